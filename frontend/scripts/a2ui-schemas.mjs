// Copies the official A2UI JSON schemas from the pinned npm package
// @a2ui/web_core (node_modules) into src/lib/a2ui/schemas/, the one committed
// directory that both the frontend (ajv) and the Go binary (frontend.A2UISchemas)
// validate against. Run it after changing the pinned version:
//
//   npm run a2ui-schemas
//
// Layout written (the previous copy is removed first, so nothing stale stays):
//   schemas/v0_8/*.json          ← src/v0_8/schemas/*.json
//   schemas/v0_9/**              ← src/v0_9/schemas/** (catalogs with their examples)
//   schemas/LICENSE              ← the package's LICENSE (Apache-2.0)
//   schemas/VERSION              ← the package's version, one line
//
// src/lib/a2ui/schemas.test.ts fails when this copy and node_modules differ.
import { cpSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..');
const pkg = join(root, 'node_modules', '@a2ui', 'web_core');
const out = join(root, 'src', 'lib', 'a2ui', 'schemas');

const version = JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')).version;
rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, 'v0_8'), { recursive: true });
for (const name of readdirSync(join(pkg, 'src', 'v0_8', 'schemas'))) {
  if (name.endsWith('.json')) cpSync(join(pkg, 'src', 'v0_8', 'schemas', name), join(out, 'v0_8', name));
}
cpSync(join(pkg, 'src', 'v0_9', 'schemas'), join(out, 'v0_9'), { recursive: true });
cpSync(join(pkg, 'LICENSE'), join(out, 'LICENSE'));
writeFileSync(join(out, 'VERSION'), `${version}\n`);
console.log(`a2ui-schemas: copied @a2ui/web_core ${version} into ${out}`);

// The validators as code (no eval in the page): see src/lib/a2ui/codegen.js.
const { generateValidators } = await import('../src/lib/a2ui/codegen.js');
const read = (p) => JSON.parse(readFileSync(join(out, p), 'utf8'));
const generated = generateValidators({
  v08Message: read('v0_8/server_to_client_with_standard_catalog.json'),
  v09Message: read('v0_9/server_to_client.json'),
  v09Common: read('v0_9/common_types.json'),
  v09Basic: read('v0_9/catalogs/basic/catalog.json'),
});
writeFileSync(join(root, 'src', 'lib', 'a2ui', 'validators.generated.js'), generated);
console.log('a2ui-schemas: wrote src/lib/a2ui/validators.generated.js');
