// @vitest-environment node
// app.css is plain CSS: every rule closed, no rule nested in another (only @media and other at-rules hold
// rules). One missing "}" turns every rule after it, the components' scoped styles included, into
// nested rules that match nothing (the first-start screen and Settings lost their layout that way).
import { describe, expect, it } from 'vitest';
// @ts-expect-error -- the UI's tsconfig has no Node types; this test runs in Node (see the first line)
import { readFileSync } from 'node:fs';

/** The first structural mistake in css ("line N: …"), or null. */
function cssStructureError(css: string): string | null {
  const text = css.replace(/\/\*[\s\S]*?\*\//g, (c) => c.replace(/[^\n]/g, ' ')).replace(/"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'/g, (s) => ' '.repeat(s.length));
  const stack: { at: boolean; line: number }[] = [];
  let line = 1;
  let start = 0; // where the current prelude starts
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '\n') line++;
    else if (c === '{') {
      const prelude = text.slice(start, i).trim();
      const parent = stack[stack.length - 1];
      if (parent && !parent.at) return `line ${line}: "${prelude}" is nested in the rule opened on line ${parent.line} (a "}" is missing)`;
      stack.push({ at: prelude.startsWith('@'), line });
      start = i + 1;
    } else if (c === '}') {
      if (!stack.pop()) return `line ${line}: "}" closes nothing`;
      start = i + 1;
    } else if (c === ';') start = i + 1;
  }
  const open = stack.pop();
  return open ? `line ${open.line}: a rule is never closed` : null;
}

describe('app.css', () => {
  it('closes every rule and nests none', () => {
    const appCss: string = readFileSync(new URL('./app.css', import.meta.url), 'utf8');
    expect(appCss.length).toBeGreaterThan(1000);
    expect(cssStructureError(appCss)).toBeNull();
  });
  it('finds the mistakes', () => {
    expect(cssStructureError('.a { color: red; }\n@media (max-width: 1px) { .b { color: red; } }')).toBeNull();
    expect(cssStructureError('.a {\n  height: 1px;\n\n.b { color: red; }\n}')).toBe('line 4: ".b" is nested in the rule opened on line 1 (a "}" is missing)');
    expect(cssStructureError('.a { content: "{"; }')).toBeNull();
    expect(cssStructureError('.a { }\n}')).toBe('line 2: "}" closes nothing');
    expect(cssStructureError('.a {')).toBe('line 1: a rule is never closed');
  });
});
