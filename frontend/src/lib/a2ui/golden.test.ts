// The A2UI golden suite (issue 23): JSONL in → rendered DOM (normalised) and emitted actions out,
// each compared with a golden file under testdata/ (UPDATE_GOLDEN=1 rewrites them). Covers every
// v0.8 standard component, every binding form (literal, path, path with a literal, relative path in
// a template, v0.9 function), templates with keyed items, updates to a bound path, deletion, invalid
// lines; every v0.9 example shipped in @a2ui/web_core; the package's own v0.8 model-processor test
// payloads (read from node_modules, not copied); axe-core over the golden surfaces.
// @vitest-environment jsdom
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { cleanup, render } from '@testing-library/svelte';
import { tick } from 'svelte';
import { get } from 'svelte/store';
import axe from 'axe-core';
// @ts-expect-error -- the UI's tsconfig has no Node types; vitest runs this in Node
import { mkdirSync, writeFileSync } from 'node:fs';
import SurfaceView from '../../components/a2ui/Surface.svelte';
import type { A2uiActionEvent } from '../../components/a2ui/types';
import { createProcessor, type Processor } from './model.svelte';
import { normaliseDom, updating } from '../testing/a2uiGolden';
import { setLang } from '../i18n.svelte';

const inputs = import.meta.glob('./testdata/*.jsonl', { query: '?raw', import: 'default', eager: true }) as Record<string, string>;
const goldens = import.meta.glob('./testdata/**/*.golden.txt', { query: '?raw', import: 'default', eager: true }) as Record<string, string>;
const examples = import.meta.glob('./schemas/v0_9/catalogs/basic/examples/*.json', { import: 'default', eager: true }) as Record<string, { name?: string; messages: unknown[] }>;
const mpTest = import.meta.glob('/node_modules/@a2ui/web_core/src/v0_8/data/model-processor.test.js', { query: '?raw', import: 'default', eager: true }) as Record<string, string>;

/** testdata/ on disk (vitest runs in frontend/). */
function testdataDir(): string {
  const cwd = (globalThis as { process?: { cwd(): string } }).process?.cwd() ?? '.';
  return `${cwd}/src/lib/a2ui/testdata`;
}

function check(name: string, text: string) {
  const key = `./testdata/${name}.golden.txt`;
  if (updating()) {
    const file = `${testdataDir()}/${name}.golden.txt`;
    mkdirSync(file.slice(0, file.lastIndexOf('/')), { recursive: true });
    writeFileSync(file, text + '\n');
    return;
  }
  expect(goldens[key], `${key} is missing: run UPDATE_GOLDEN=1 npx vitest run src/lib/a2ui/golden.test.ts`).toBeDefined();
  expect(text + '\n').toBe(goldens[key]);
}

function lines(name: string): string[] {
  const text = inputs[`./testdata/${name}.jsonl`];
  if (text === undefined) throw new Error(`no testdata/${name}.jsonl`);
  return text.split('\n').filter((l) => l.trim() !== '');
}

/** Renders every surface of p; returns the container and the actions they emit. */
async function mountAll(p: Processor) {
  const actions: A2uiActionEvent[] = [];
  const host = document.createElement('div');
  document.body.appendChild(host);
  for (const s of get(p.surfaces)) render(SurfaceView, { target: host, props: { surface: s, onaction: (e: A2uiActionEvent) => actions.push(e), locale: 'en' } });
  await tick();
  return { host, actions };
}

function section(title: string, body: string): string {
  return `## ${title}\n${body}`;
}

async function typeInto(el: Element | null, value: string) {
  if (!el) throw new Error('no such field');
  (el as HTMLInputElement).value = value;
  el.dispatchEvent(new Event('input', { bubbles: true }));
  await tick();
}

async function click(el: Element | null) {
  if (!el) throw new Error('no such control');
  (el as HTMLElement).click();
  await tick();
}

/** axe-core over host: the violations of impact serious or critical (none expected). */
async function seriousViolations(host: Element) {
  const res = await axe.run(host, { resultTypes: ['violations'], rules: { 'color-contrast': { enabled: false }, region: { enabled: false } } });
  return res.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.nodes.map((n) => n.html).join(' | ')}`);
}

beforeAll(() => {
  // Dates format in local time: fix the zone so the goldens hold anywhere.
  const proc = (globalThis as { process?: { env: Record<string, string> } }).process;
  if (proc) proc.env.TZ = 'UTC';
  setLang('en');
});
afterEach(() => {
  cleanup();
  document.body.innerHTML = '';
});

describe('A2UI golden: v0.8', () => {
  it('every standard component, with beginRendering styles', async () => {
    const p = createProcessor();
    const res = p.apply(lines('v08-all-components'));
    expect(res.errors).toEqual([]);
    const { host, actions } = await mountAll(p);
    const before = normaliseDom(host);
    // Tabs: the second tab by keyboard; Modal: open it by its trigger; the primary button.
    const tab = host.querySelector('[role="tab"]') as HTMLElement;
    tab.focus();
    tab.dispatchEvent(new KeyboardEvent('keydown', { key: 'ArrowRight', bubbles: true }));
    await tick();
    expect(document.activeElement?.textContent).toBe('Second');
    await click([...host.querySelectorAll('button')].find((b) => b.textContent?.trim() === 'Details') ?? null);
    const dialog = host.querySelector('[role="dialog"]');
    expect(dialog?.textContent).toContain('Modal content');
    // Tab from the dialog's last control wraps to its first (its Close button is both here): the
    // browser's own Tab, which would leave the dialog, is prevented.
    const closeBtn = dialog!.querySelector('button') as HTMLButtonElement;
    closeBtn.focus();
    const tabbed = closeBtn.dispatchEvent(new KeyboardEvent('keydown', { key: 'Tab', bubbles: true, cancelable: true }));
    expect(tabbed).toBe(false);
    expect(document.activeElement).toBe(closeBtn);
    expect(await seriousViolations(host)).toEqual([]);
    dialog!.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape', bubbles: true }));
    await tick();
    expect(host.querySelector('[role="dialog"]')).toBeNull();
    await click([...host.querySelectorAll('button')].find((b) => b.textContent?.trim() === 'Submit') ?? null);
    // maxAllowedSelections 2 of 3: the third is disabled once two are on.
    const group = [...host.querySelectorAll('fieldset')][1];
    const boxes = [...group.querySelectorAll('input[type="checkbox"]')] as HTMLInputElement[];
    await click(boxes[0]);
    await click(boxes[1]);
    expect(boxes[2].disabled).toBe(true);
    // The markdown body keeps its link and drops the script and the handler.
    const md = host.querySelector('.a2-md')!.innerHTML;
    expect(md).toContain('<strong>Bold</strong>');
    expect(md).not.toContain('<script');
    expect(md).not.toContain('onerror');
    check('v08-all-components', [section('rendered', before), section('after tab, modal, submit, choices', normaliseDom(host)), section('actions', JSON.stringify(actions, null, 2))].join('\n'));
    expect(actions.map((a) => a.name)).toEqual(['open_details', 'submit']);
    expect(actions[1]).toEqual({ surfaceId: 'all', componentId: 'btn', name: 'submit', context: { s: 'x', n: 2, b: false } });
  });

  it('a form bound by path: typing, ticking, sliding, choosing write the data model; the press sends the values; an update to a bound path re-renders', async () => {
    const p = createProcessor();
    expect(p.apply(lines('v08-form-binding')).errors).toEqual([]);
    const { host, actions } = await mountAll(p);
    const first = normaliseDom(host);
    expect(host.textContent).toContain('(no name yet)'); // path with a literal: the literal until the path holds a value
    await typeInto(host.querySelector('input[type="text"]'), 'Zoë 张');
    await click(host.querySelector('input[type="checkbox"]'));
    const range = host.querySelector('input[type="range"]') as HTMLInputElement;
    range.value = '7';
    range.dispatchEvent(new Event('input', { bubbles: true }));
    await tick();
    await click([...host.querySelectorAll('label')].find((l) => l.textContent?.trim() === 'Red')?.querySelector('input') ?? null);
    await typeInto(host.querySelector('input[type="date"]'), '2027-01-02');
    await click([...host.querySelectorAll('button')].find((b) => b.textContent?.trim() === 'Send') ?? null);
    expect(actions).toEqual([
      { surfaceId: 'form', componentId: 'send', name: 'send_form', context: { name: 'Zoë 张', agree: true, size: 7, colors: ['blue', 'red'], when: '2027-01-02', source: 'golden' } },
    ]);
    const filled = normaliseDom(host);
    // The agent changes a bound value: the title and the field follow.
    expect(
      p.apply([
        { dataModelUpdate: { surfaceId: 'form', path: '/form', contents: [{ key: 'title', valueString: 'Order #2' }, { key: 'name', valueString: 'Lin' }] } },
      ]).errors,
    ).toEqual([]);
    await tick();
    expect(host.querySelector('h2')?.textContent).toBe('Order #2');
    expect((host.querySelector('input[type="text"]') as HTMLInputElement).value).toBe('Lin');
    expect(await seriousViolations(host)).toEqual([]);
    check('v08-form-binding', [section('rendered', first), section('filled', filled), section('after dataModelUpdate /form', normaliseDom(host)), section('actions', JSON.stringify(actions, null, 2))].join('\n'));
  });

  it('a template over a list: items keyed by id, relative paths, the press of one item sends its context; an item inserted in front keeps the others', async () => {
    const p = createProcessor();
    expect(p.apply(lines('v08-template')).errors).toEqual([]);
    const { host, actions } = await mountAll(p);
    const first = normaliseDom(host);
    const banana = host.querySelectorAll('li')[1];
    await click(banana.querySelector('button'));
    expect(actions).toEqual([{ surfaceId: 'tpl', componentId: 'itemBtn', name: 'pick', context: { id: 'b', name: 'Banana' } }]);
    p.apply([{ dataModelUpdate: { surfaceId: 'tpl', contents: [{ key: 'items', valueString: JSON.stringify([{ id: 'c', name: 'Cherry' }, { id: 'a', name: 'Apple' }, { id: 'b', name: 'Banana' }]) }] } }]);
    await tick();
    const items = host.querySelectorAll('li');
    expect([...items].map((li) => li.textContent?.replace('Pick', '').trim())).toEqual(['Cherry', 'Apple', 'Banana']);
    expect(items[2]).toBe(banana); // keyed by id: the Banana row is the same DOM node
    check('v08-template', [section('rendered', first), section('after an item inserted in front', normaliseDom(host)), section('actions', JSON.stringify(actions, null, 2))].join('\n'));
  });

  it('deleteSurface removes its surface', async () => {
    const p = createProcessor();
    const res = p.apply(lines('v08-delete'));
    expect(res).toEqual({ applied: 5, errors: [], surfaces: ['one', 'two'] });
    expect(get(p.surfaces).map((s) => s.id)).toEqual(['two']);
    const { host } = await mountAll(p);
    check('v08-delete', section('rendered', normaliseDom(host)));
  });

  it("runs the package's own v0.8 model-processor test payloads (those valid against the schema render; the rest are refused with a reason)", async () => {
    const src = Object.values(mpTest)[0];
    expect(src, '@a2ui/web_core/src/v0_8/data/model-processor.test.js').toBeDefined();
    const batches = extractProcessMessages(src);
    expect(batches.length).toBeGreaterThan(10);
    const report: string[] = [];
    let rendered = 0;
    for (const [i, batch] of batches.entries()) {
      const p = createProcessor();
      const res = batch === null ? null : p.apply(batch);
      const { host } = await mountAll(p);
      if (res && res.errors.length === 0 && get(p.surfaces).length > 0) rendered++;
      report.push(section(`payload ${i + 1}`, res === null ? 'skipped: not a plain literal (it names variables of the test)' : `${JSON.stringify(res)}\n${normaliseDom(host)}`));
      cleanup();
      document.body.innerHTML = '';
    }
    expect(rendered).toBeGreaterThan(5);
    check('v08-model-processor-payloads', report.join('\n'));
  });
});

describe('A2UI golden: v0.9', () => {
  it('a form with checks, a function, a keyed template and a theme', async () => {
    const p = createProcessor();
    expect(p.apply(lines('v09-form')).errors).toEqual([]);
    const { host, actions } = await mountAll(p);
    const first = normaliseDom(host);
    const ok = [...host.querySelectorAll('button')].find((b) => b.textContent?.trim() === 'Sign up') as HTMLButtonElement;
    expect(ok.disabled).toBe(true); // required(/email) fails
    await typeInto(host.querySelector('input[type="text"]'), 'ada@example.com');
    await click([...host.querySelectorAll('label')].find((l) => l.textContent?.trim() === 'Pro')?.querySelector('input') ?? null);
    expect(host.textContent).toContain('ada@example.com on pro with 2 seats');
    // Chips with a filter: typing narrows them; pressing one toggles it into /tags.
    await typeInto(host.querySelector('input[type="search"]'), 're');
    const chips = [...host.querySelectorAll('button[aria-pressed]')];
    expect(chips.map((c) => c.textContent?.trim())).toEqual(['Red', 'Green']);
    await click(chips[0]);
    expect(chips[0].getAttribute('aria-pressed')).toBe('true');
    expect(p.get('v9')!.data.tags).toEqual(['green', 'red']);
    expect(ok.disabled).toBe(false);
    await click(ok);
    expect(actions).toEqual([{ surfaceId: 'v9', componentId: 'ok', name: 'signup', context: { email: 'ada@example.com', plan: ['pro'], seats: 2, fixed: 'yes' } }]);
    expect(await seriousViolations(host)).toEqual([]);
    check('v09-form', [section('rendered', first), section('filled', normaliseDom(host)), section('actions', JSON.stringify(actions, null, 2))].join('\n'));
  });

  const names = Object.keys(examples).sort();
  it('ships examples to run', () => expect(names.length).toBeGreaterThan(30));
  for (const path of names) {
    const base = path.split('/').pop()!.replace(/\.json$/, '');
    it(`example ${base} renders without error`, async () => {
      const p = createProcessor();
      const res = p.apply(examples[path].messages);
      expect(res.errors).toEqual([]);
      expect(get(p.surfaces).length).toBeGreaterThan(0);
      const { host } = await mountAll(p);
      expect(host.querySelector('.a2-note'), 'an unknown component or a cycle').toBeNull();
      check(`v09-examples/${base}`, normaliseDom(host));
      expect(await seriousViolations(host)).toEqual([]);
    });
  }
});

describe('A2UI golden: invalid lines', () => {
  it('stop at the first invalid line with its number and the reason; the lines before it apply', async () => {
    const p = createProcessor();
    const res = p.apply(lines('invalid-schema'));
    expect(res.applied).toBe(2);
    expect(res.errors).toHaveLength(1);
    expect(res.errors[0].line).toBe(3);
    expect(res.errors[0].reason).toMatch(/\/surfaceUpdate\/components\/0\/component\/Text/);
    const { host } = await mountAll(p);
    expect(host.textContent).toContain('before the bad line');
    expect(host.textContent).not.toContain('after the bad line');
    check('invalid-schema', [section('errors', JSON.stringify(res.errors, null, 2)), section('rendered', normaliseDom(host))].join('\n'));
  });

  it.each([
    ['not JSON', ['{"beginRendering":'], /^not JSON/],
    ['an unknown version', ['{"version":"v0.7","createSurface":{"surfaceId":"x"}}'], /^unknown A2UI version \(the line holds "version": "v0.7"\)/],
    ['no version and no known key', ['{"render":{}}'], /^unknown A2UI version \(the line holds keys "render"\)/],
    ['two v0.8 kinds on one line', ['{"beginRendering":{"surfaceId":"a","root":"r"},"deleteSurface":{"surfaceId":"a"}}'], /exactly one of/],
    ['a v0.9 update before createSurface', ['{"version":"v0.9","updateComponents":{"surfaceId":"nope","components":[{"id":"root","component":"Text","text":"x"}]}}'], /no surface "nope" \(send createSurface first\)/],
    ['an unknown v0.9 component', ['{"version":"v0.9","createSurface":{"surfaceId":"s","catalogId":"c"}}', '{"version":"v0.9","updateComponents":{"surfaceId":"s","components":[{"id":"root","component":"Marquee","text":"x"}]}}'], /unknown component "Marquee"/],
    ['a prototype key as a component id', ['{"beginRendering":{"surfaceId":"s","root":"r"}}', '{"surfaceUpdate":{"surfaceId":"s","components":[{"id":"__proto__","component":{"Text":{"text":{"literalString":"x"}}}}]}}'], /component id "__proto__" is not allowed/],
    ['a prototype key in a path', ['{"version":"v0.9","createSurface":{"surfaceId":"s","catalogId":"c"}}', '{"version":"v0.9","updateDataModel":{"surfaceId":"s","path":"/__proto__/x","value":1}}'], /not allowed/],
  ])('%s is refused with its line number', (_name, batch, reason) => {
    const p = createProcessor();
    const res = p.apply(batch);
    expect(res.errors).toHaveLength(1);
    expect(res.errors[0].line).toBe(batch.length);
    expect(res.errors[0].reason).toMatch(reason);
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });

  it('a component cycle is reported and not drawn (no endless recursion)', async () => {
    const p = createProcessor();
    const res = p.apply([
      { beginRendering: { surfaceId: 'c', root: 'a' } },
      { surfaceUpdate: { surfaceId: 'c', components: [{ id: 'a', component: { Card: { child: 'b' } } }, { id: 'b', component: { Card: { child: 'a' } } }] } },
    ]);
    expect(res.errors.map((e) => e.reason)).toEqual([expect.stringMatching(/cycle \(a → b → a\)/)]);
    const { host } = await mountAll(p);
    expect(host.querySelectorAll('.a2-card')).toHaveLength(2);
    expect(host.querySelector('.a2-note')).not.toBeNull();
  });

  it('media and links only from http(s), data: and blob: — never javascript:', async () => {
    const p = createProcessor();
    p.apply([
      { beginRendering: { surfaceId: 'm', root: 'col' } },
      {
        surfaceUpdate: {
          surfaceId: 'm',
          components: [
            { id: 'col', component: { Column: { children: { explicitList: ['i1', 'i2', 'v1', 'i3'] } } } },
            { id: 'i1', component: { Image: { url: { literalString: 'javascript:alert(1)' } } } },
            { id: 'i2', component: { Image: { url: { literalString: 'data:text/html,<script>alert(1)</script>' } } } },
            { id: 'v1', component: { Video: { url: { literalString: 'JaVaScRiPt:alert(1)' } } } },
            { id: 'i3', component: { Image: { url: { literalString: 'data:image/png;base64,iVBORw0KGgo=' } } } },
          ],
        },
      },
    ]);
    const { host } = await mountAll(p);
    expect(host.innerHTML.toLowerCase()).not.toContain('javascript:');
    expect(host.innerHTML).not.toContain('data:text/html');
    expect(host.querySelectorAll('img')).toHaveLength(1);
    expect(host.querySelectorAll('.a2-blocked')).toHaveLength(3);
  });

  it('a picture or clip that does not load (the CSP fetches none from elsewhere) is said in words with its alt text', async () => {
    const p = createProcessor();
    p.apply([
      { beginRendering: { surfaceId: 'n', root: 'col' } },
      {
        surfaceUpdate: {
          surfaceId: 'n',
          components: [
            { id: 'col', component: { Column: { children: { explicitList: ['img', 'vid'] } } } },
            { id: 'img', component: { Image: { url: { literalString: 'https://images.example/cat.png' }, altText: { literalString: 'A cat' } } } },
            { id: 'vid', component: { Video: { url: { literalString: 'https://media.example/clip.mp4' } } } },
          ],
        },
      },
    ]);
    const { host } = await mountAll(p);
    host.querySelector('img')!.dispatchEvent(new Event('error'));
    host.querySelector('video')!.dispatchEvent(new Event('error'));
    await tick();
    expect(host.querySelector('img')).toBeNull();
    expect(host.querySelector('video')).toBeNull();
    expect(host.textContent).toContain('A cat — picture from images.example not loaded');
    expect(host.textContent).toContain('media from media.example not loaded');
    expect(await seriousViolations(host)).toEqual([]);
  });
});

/**
 * The array literals passed to processor.processMessages(...) in the package's test file, evaluated
 * as data (they are plain object literals: no identifiers, calls or functions are allowed in them).
 */
function extractProcessMessages(src: string): (unknown[] | null)[] {
  const out: (unknown[] | null)[] = [];
  const marker = 'processor.processMessages(';
  let at = src.indexOf(marker);
  while (at >= 0) {
    let i = at + marker.length;
    let depth = 0;
    let quote: string | null = null;
    const start = i;
    for (; i < src.length; i++) {
      const c = src[i];
      if (quote) {
        if (c === '\\') i++;
        else if (c === quote) quote = null;
        continue;
      }
      if (c === "'" || c === '"' || c === '`') quote = c;
      else if (c === '[' || c === '{' || c === '(') depth++;
      else if (c === ']' || c === '}' || c === ')') {
        if (depth === 0) break;
        depth--;
      }
    }
    const literal = src.slice(start, i);
    try {
      out.push(parseLiteral(literal));
    } catch {
      out.push(null); // e.g. { surfaceId, root } shorthand or a variable: not data on its own
    }
    at = src.indexOf(marker, i);
  }
  return out;
}

/** A JS object/array literal of strings, numbers, booleans, null → JSON value (quotes normalised, keys quoted, trailing commas dropped). */
function parseLiteral(js: string): unknown[] {
  let json = '';
  for (let i = 0; i < js.length; i++) {
    const c = js[i];
    if (c === "'" || c === '"') {
      let j = i + 1;
      let s = '';
      while (j < js.length && js[j] !== c) {
        if (js[j] === '\\') {
          s += js[j + 1];
          j += 2;
          continue;
        }
        s += js[j++];
      }
      json += JSON.stringify(s);
      i = j;
    } else if (/[A-Za-z_$]/.test(c)) {
      let j = i;
      while (j < js.length && /[\w$]/.test(js[j])) j++;
      const word = js.slice(i, j);
      if (word !== 'true' && word !== 'false' && word !== 'null' && !/^\s*:/.test(js.slice(j))) throw new Error(`not a literal: ${word}`);
      json += word === 'true' || word === 'false' || word === 'null' ? word : JSON.stringify(word);
      i = j - 1;
    } else if (c === '/' && js[i + 1] === '/') {
      while (i < js.length && js[i] !== '\n') i++;
    } else {
      json += c;
    }
  }
  json = json.replace(/,(\s*[}\]])/g, '$1');
  return JSON.parse(json);
}

describe('v0.9 sendDataModel', () => {
  const surface = (send: boolean) => [
    { version: 'v0.9', createSurface: { surfaceId: 'dm', catalogId: 'https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json', sendDataModel: send } },
    {
      version: 'v0.9',
      updateComponents: {
        surfaceId: 'dm',
        components: [
          { id: 'root', component: 'Column', children: ['name', 'go'] },
          { id: 'name', component: 'TextField', label: 'Name', value: { path: '/name' } },
          { id: 'go', component: 'Button', child: 'goText', action: { event: { name: 'go', context: { n: { path: '/name' } } } } },
          { id: 'goText', component: 'Text', text: 'Go' },
        ],
      },
    },
    { version: 'v0.9', updateDataModel: { surfaceId: 'dm', path: '/extra', value: { kept: true } } },
  ];
  for (const send of [true, false]) {
    it(`a press ${send ? 'carries the whole data model, as the person left it' : 'carries no data model'} when createSurface says sendDataModel: ${send}`, async () => {
      const p = createProcessor();
      expect(p.apply(surface(send)).errors).toEqual([]);
      const { host, actions } = await mountAll(p);
      await typeInto(host.querySelector('input'), '张三 Ada');
      await click([...host.querySelectorAll('button')].find((b) => b.textContent?.trim() === 'Go') ?? null);
      expect(actions).toHaveLength(1);
      expect(actions[0].context).toEqual({ n: '张三 Ada' });
      if (send) expect(actions[0].dataModel).toEqual({ name: '张三 Ada', extra: { kept: true } });
      else expect(actions[0]).not.toHaveProperty('dataModel');
    });
  }
});
