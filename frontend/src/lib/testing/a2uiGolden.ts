// Test helpers for the A2UI golden suite (src/lib/a2ui/golden.test.ts): a DOM normaliser whose
// output is stable across Svelte builds (no scoped-style hashes, no comment anchors, attributes
// sorted, form controls' live value and checked state shown), and golden files under
// src/lib/a2ui/testdata compared or, with UPDATE_GOLDEN=1, rewritten.

/** The DOM under root as indented lines: `<tag attr="v" .value="…">`, text nodes as JSON strings. */
export function normaliseDom(root: Element): string {
  const out: string[] = [];
  const walk = (n: Node, depth: number) => {
    const pad = '  '.repeat(depth);
    if (n.nodeType === 3) {
      const text = (n.textContent ?? '').replace(/\s+/g, ' ').trim();
      if (text) out.push(pad + JSON.stringify(text));
      return;
    }
    if (n.nodeType !== 1) return;
    const el = n as Element;
    const attrs: string[] = [];
    for (const a of [...el.attributes].sort((x, y) => x.name.localeCompare(y.name))) {
      let v = a.value;
      if (a.name === 'class') v = v.split(/\s+/).filter((c) => c && !/^svelte-/.test(c)).sort().join(' ');
      if (a.name === 'class' && v === '') continue;
      attrs.push(`${a.name}=${JSON.stringify(v)}`);
    }
    if (el instanceof HTMLInputElement) {
      if (el.type === 'checkbox' || el.type === 'radio') attrs.push(`.checked=${el.checked}`);
      else attrs.push(`.value=${JSON.stringify(el.value)}`);
    } else if (el instanceof HTMLTextAreaElement || el instanceof HTMLSelectElement) {
      attrs.push(`.value=${JSON.stringify(el.value)}`);
    }
    out.push(`${pad}<${el.tagName.toLowerCase()}${attrs.length ? ' ' + attrs.join(' ') : ''}>`);
    for (const c of el.childNodes) walk(c, depth + 1);
  };
  walk(root, 0);
  return out.join('\n');
}

/** Node's process.env (the UI's tsconfig has no Node types). */
function env(): Record<string, string | undefined> {
  return ((globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env ?? {}) as Record<string, string | undefined>;
}

export const updating = (): boolean => env().UPDATE_GOLDEN === '1';
