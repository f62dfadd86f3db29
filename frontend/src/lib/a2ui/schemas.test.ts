import { describe, expect, it } from 'vitest';
import pkgJson from '../../../package.json';

// The committed copy of the A2UI schemas (src/lib/a2ui/schemas, embedded by Go as
// frontend.A2UISchemas()) must equal what the pinned @a2ui/web_core ships; after a
// version bump, `npm run a2ui-schemas` refreshes it. Both sides are read as raw text.
const committed = import.meta.glob('./schemas/**/*', { query: '?raw', import: 'default', eager: true }) as Record<string, string>;
const shipped08 = import.meta.glob('/node_modules/@a2ui/web_core/src/v0_8/schemas/*.json', { query: '?raw', import: 'default', eager: true }) as Record<string, string>;
const shipped09 = import.meta.glob('/node_modules/@a2ui/web_core/src/v0_9/schemas/**/*', { query: '?raw', import: 'default', eager: true }) as Record<string, string>;
const shippedTop = import.meta.glob('/node_modules/@a2ui/web_core/{LICENSE,package.json}', { query: '?raw', import: 'default', eager: true }) as Record<string, string>;

function expected(): Map<string, string> {
  const want = new Map<string, string>();
  for (const [p, text] of Object.entries(shipped08)) want.set(`v0_8/${p.split('/').pop()}`, text);
  const base09 = '/node_modules/@a2ui/web_core/src/v0_9/schemas/';
  for (const [p, text] of Object.entries(shipped09)) want.set(`v0_9/${p.slice(base09.length)}`, text);
  const top = '/node_modules/@a2ui/web_core/';
  if (shippedTop[`${top}LICENSE`] !== undefined) want.set('LICENSE', shippedTop[`${top}LICENSE`]);
  if (shippedTop[`${top}package.json`] !== undefined) want.set('VERSION', `${JSON.parse(shippedTop[`${top}package.json`]).version}\n`);
  return want;
}

describe('committed A2UI schemas', () => {
  it('are pinned at @a2ui/web_core 0.11.0', () => {
    expect((pkgJson.devDependencies as Record<string, string>)['@a2ui/web_core']).toBe('0.11.0');
    expect(committed['./schemas/VERSION']).toBe('0.11.0\n');
  });

  it('equal the files in node_modules (run `npm run a2ui-schemas` after a bump)', () => {
    const want = expected();
    const got = new Map(Object.entries(committed).map(([p, text]) => [p.slice('./schemas/'.length), text]));
    // The validator needs these; a package layout change that lost them must fail here.
    for (const name of ['LICENSE', 'VERSION', 'v0_8/server_to_client_with_standard_catalog.json', 'v0_9/server_to_client.json', 'v0_9/catalogs/basic/catalog.json']) {
      expect(want.has(name), name).toBe(true);
    }
    expect([...got.keys()].sort()).toEqual([...want.keys()].sort());
    for (const [name, text] of want) expect(got.get(name), name).toBe(text);
  });
});

describe('generated validators', () => {
  it('are what codegen.js makes of the committed schemas (run `npm run a2ui-schemas` after a change)', async () => {
    const { generateValidators } = await import('./codegen.js');
    const parse = (p: string) => JSON.parse(committed[`./schemas/${p}`]);
    const fresh = generateValidators({
      v08Message: parse('v0_8/server_to_client_with_standard_catalog.json'),
      v09Message: parse('v0_9/server_to_client.json'),
      v09Common: parse('v0_9/common_types.json'),
      v09Basic: parse('v0_9/catalogs/basic/catalog.json'),
    });
    const file = import.meta.glob('./validators.generated.js', { query: '?raw', import: 'default', eager: true }) as Record<string, string>;
    expect(file['./validators.generated.js'] === fresh, 'validators.generated.js is stale').toBe(true);
  });

  it('run without eval (the page CSP has no unsafe-eval): no Function constructor or eval in the page code', () => {
    const file = (import.meta.glob('./validators.generated.js', { query: '?raw', import: 'default', eager: true }) as Record<string, string>)['./validators.generated.js'];
    expect(file).not.toMatch(/new Function|\beval\(/);
    const validate = (import.meta.glob('./validate.ts', { query: '?raw', import: 'default', eager: true }) as Record<string, string>)['./validate.ts'];
    expect(validate).not.toMatch(/from 'ajv/);
  });
});
