// The A2UI renderer in a real browser (issue 23): window.atriumBench.run(n, rounds) times a surface
// of n components from the JSONL line to laid-out DOM, and one bound value's update to laid-out
// DOM; window.atriumBench.shot(lang, layout) shows the Canvas panel with a form surface for the
// screenshots. Built by `npm run bench:build` into bench-dist/ (not part of the app) and driven by
// frontend/bench_test.go (chromedp). Timings include validation, the model update, Svelte's DOM
// work and a forced style and layout (offsetHeight), not paint.
import '../src/app.css';
import { flushSync, mount, unmount } from 'svelte';
import Surface from '../src/components/a2ui/Surface.svelte';
import CanvasPanel from '../src/components/CanvasPanel.svelte';
import { createProcessor } from '../src/lib/a2ui/model.svelte';
import { sharedValidator } from '../src/lib/a2ui/validate';
import { CanvasView } from '../src/lib/canvas';
import { setLang, type Lang } from '../src/lib/i18n.svelte';

/** A v0.8 surface of n components: rows of (Text bound to /items/i/label, CheckBox bound to /items/i/done) under one Column. */
export function surfaceLines(n: number): string[] {
  const rows = Math.max(1, Math.floor((n - 1) / 3));
  const comps: unknown[] = [{ id: 'root', component: { Column: { children: { explicitList: Array.from({ length: rows }, (_, i) => `r${i}`) } } } }];
  const items: unknown[] = [];
  for (let i = 0; i < rows; i++) {
    comps.push({ id: `r${i}`, component: { Row: { children: { explicitList: [`t${i}`, `c${i}`] }, alignment: 'center' } } });
    comps.push({ id: `t${i}`, component: { Text: { text: { path: `/items/${i}/label` } } } });
    comps.push({ id: `c${i}`, component: { CheckBox: { label: { literalString: `done ${i}` }, value: { path: `/items/${i}/done` } } } });
    items.push({ label: `item ${i}`, done: i % 2 === 0 });
  }
  return [
    JSON.stringify({ beginRendering: { surfaceId: 'bench', root: 'root' } }),
    JSON.stringify({ surfaceUpdate: { surfaceId: 'bench', components: comps } }),
    JSON.stringify({ dataModelUpdate: { surfaceId: 'bench', contents: [{ key: 'items', valueString: JSON.stringify(items) }] } }),
  ];
}

interface Round {
  components: number;
  renderMs: number;
  updateMs: number;
  /** Parts of renderMs: applying the lines to the model (their validation included), Svelte's mount, style and layout; validateMs: the validation alone, timed in a separate pass. */
  validateMs: number;
  applyMs: number;
  mountMs: number;
  layoutMs: number;
}

async function run(n = 1000, rounds = 7): Promise<Round[]> {
  const host = document.getElementById('app')!;
  const out: Round[] = [];
  for (let r = 0; r < rounds; r++) {
    const lines = surfaceLines(n);
    await new Promise((ok) => setTimeout(ok, 50));
    const t0 = performance.now();
    for (const l of lines) if (!sharedValidator().validate(l).ok) throw new Error('invalid bench line');
    const tv = performance.now();
    const p = createProcessor();
    const res = p.apply(lines);
    if (res.errors.length) throw new Error(JSON.stringify(res.errors));
    const ta = performance.now();
    const surface = p.get('bench')!;
    const app = mount(Surface, { target: host, props: { surface } });
    flushSync();
    const tm = performance.now();
    void host.offsetHeight;
    const t1 = performance.now();
    const count = Object.keys(surface.components).length;
    const mid = Math.floor((count - 1) / 6);
    await new Promise((ok) => setTimeout(ok, 50));
    const t2 = performance.now();
    p.apply([{ dataModelUpdate: { surfaceId: 'bench', path: `/items/${mid}`, contents: [{ key: 'label', valueString: `changed ${r}` }, { key: 'done', valueBoolean: true }] } }]);
    flushSync();
    void host.offsetHeight;
    const t3 = performance.now();
    if (!host.textContent?.includes(`changed ${r}`)) throw new Error('the update did not show');
    // renderMs counts validation once (apply validates; the separate pass above only times it alone).
    out.push({ components: count, renderMs: t1 - tv, updateMs: t3 - t2, validateMs: tv - t0, applyMs: ta - tv, mountMs: tm - ta, layoutMs: t1 - tm });
    unmount(app);
  }
  return out;
}

const FORM = [
  { beginRendering: { surfaceId: 'order', root: 'card', styles: { primaryColor: '#3A63D8' } } },
  {
    surfaceUpdate: {
      surfaceId: 'order',
      components: [
        { id: 'card', component: { Column: { children: { explicitList: ['title', 'name', 'qty', 'size', 'extras', 'when', 'agree', 'send'] } } } },
        { id: 'title', component: { Text: { text: { path: '/title' }, usageHint: 'h3' } } },
        { id: 'name', component: { TextField: { label: { path: '/l/name' }, text: { path: '/name' } } } },
        { id: 'qty', component: { Slider: { label: { path: '/l/qty' }, value: { path: '/qty' }, minValue: 1, maxValue: 10 } } },
        { id: 'size', component: { MultipleChoice: { selections: { path: '/size' }, maxAllowedSelections: 1, options: [{ label: { path: '/l/s' }, value: 's' }, { label: { path: '/l/m' }, value: 'm' }, { label: { path: '/l/lg' }, value: 'l' }] } } },
        { id: 'extras', component: { MultipleChoice: { selections: { path: '/extras' }, options: [{ label: { path: '/l/oat' }, value: 'oat' }, { label: { path: '/l/shot' }, value: 'shot' }] } } },
        { id: 'when', component: { DateTimeInput: { value: { path: '/when' }, enableDate: true, enableTime: true } } },
        { id: 'agree', component: { CheckBox: { label: { path: '/l/agree' }, value: { path: '/agree' } } } },
        { id: 'send', component: { Button: { child: 'sendText', primary: true, action: { name: 'order', context: [{ key: 'name', value: { path: '/name' } }] } } } },
        { id: 'sendText', component: { Text: { text: { path: '/l/send' } } } },
      ],
    },
  },
];
const WORDS: Record<Lang, Record<string, string>> = {
  en: { title: 'Coffee order', name: 'Your name', qty: 'Cups', s: 'Small', m: 'Medium', lg: 'Large', oat: 'Oat milk', shot: 'Extra shot', agree: 'Remember my order', send: 'Place order', who: 'Ada' },
  zh: { title: '咖啡订单', name: '您的姓名', qty: '杯数', s: '小杯', m: '中杯', lg: '大杯', oat: '燕麦奶', shot: '加浓', agree: '记住我的订单', send: '下单', who: '王芳' },
};

let shown: CanvasView | null = null;

async function shot(lang: Lang): Promise<void> {
  setLang(lang);
  const w = WORDS[lang];
  const view = new CanvasView();
  shown = view;
  const contents = [
    { key: 'title', valueString: w.title },
    { key: 'name', valueString: w.who },
    { key: 'qty', valueNumber: 2 },
    { key: 'size', valueString: '["m"]' },
    { key: 'extras', valueString: '["oat"]' },
    { key: 'when', valueString: '2026-12-03T09:30' },
    { key: 'agree', valueBoolean: true },
    { key: 'l', valueMap: Object.entries(w).map(([key, v]) => ({ key, valueString: v })) },
  ];
  await view.push([...FORM, { dataModelUpdate: { surfaceId: 'order', contents } }]);
  const host = document.getElementById('app')!;
  host.className = 'shot';
  mount(CanvasPanel, {
    target: host,
    props: { view, onaction: async () => ({ accepted: true, queued: false }), onclose: async () => {} },
  });
  flushSync();
  // Press the button: the acknowledgement shows under the surface.
  (host.querySelector('button.primary') as HTMLButtonElement | null)?.click();
  await new Promise((ok) => setTimeout(ok, 50));
}

/** canvas.snapshot of the shown Canvas, with the real html-to-image under the app's CSP: the PNG's base64. */
async function snapshot(): Promise<string> {
  if (!shown) throw new Error('call shot first');
  return shown.snapshot();
}

(window as unknown as { atriumBench: unknown }).atriumBench = { run, shot, snapshot, surfaceLines };
