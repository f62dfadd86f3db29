// @vitest-environment node
// Every string in both languages (issue 24 item 8), read from the sources: the components' templates
// say nothing in English outside t() (text, aria-label, title, placeholder, alt, and the strings a
// template expression shows, as `cond ? 'ok' : 'error'` did on the phone), and every reason code the
// gateway gives for its model choice (backend/model/reason.go) and for a permission question
// (backend/agent/reasons.go) has its words here.
import { describe, expect, it } from 'vitest';
// @ts-expect-error -- the UI's tsconfig has no Node types; this test runs in Node (see the first line)
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { MESSAGES } from './lib/messages';
import { REASON_PARAMS } from './lib/permissions';
import { ERROR_CODES } from './lib/friendly';

const root = new URL('./', import.meta.url);

function svelteFiles(dir: URL): URL[] {
  const out: URL[] = [];
  for (const name of readdirSync(dir) as string[]) {
    const u = new URL(name, dir);
    if (statSync(u).isDirectory()) out.push(...svelteFiles(new URL(name + '/', dir)));
    else if (name.endsWith('.svelte')) out.push(u);
  }
  return out;
}

// Names and examples, the same in every language.
const ALLOWED = new Set([
  'Atrium', 'config.json:', 'location.get', 'http://127.0.0.1:11434/v1', 'writer', '/usr/bin/git', 'loopback', 'lan',
  // Settings → Talk's examples: server addresses, model, voice and format names.
  'http://127.0.0.1:8000', 'whisper-1', 'tts-1', 'alloy', 'mp3', 'eleven_multilingual_v2',
]);

/** The English a template shows outside t(): "file:line: what". */
export function untranslated(name: string, src: string): string[] {
  const blank = (m: string) => m.replace(/[^\n]/g, ' ');
  let s = src.replace(/<script[\s\S]*?<\/script>/g, blank).replace(/<style[\s\S]*?<\/style>/g, blank).replace(/<!--[\s\S]*?-->/g, blank);
  // Template expressions: the strings they show (the branches of ?: and ??, not comparisons or keys).
  const found: string[] = [];
  const lineOf = (i: number) => s.slice(0, i).split('\n').length;
  let depth = 0;
  let start = -1;
  let text = '';
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '{') {
      if (depth === 0) start = i;
      depth++;
    } else if (c === '}' && depth > 0) {
      depth--;
      if (depth === 0) {
        const expr = s.slice(start, i + 1);
        // Only what is shown: element content, not an attribute's value (`class={…}`, `data-x={…}`)
        // nor a block's condition ({#if …}, {:else …}, {@const …}, {/if}).
        const before = text; // what precedes, earlier expressions blanked (an arrow's ">" is no tag end)
        const shown = before.lastIndexOf('>') > before.lastIndexOf('<') && !/^\{\s*[#:@/]/.test(expr);
        for (const m of shown ? expr.matchAll(/(?:\?\??|:)\s*'([^']*[A-Za-z]{2,}[^']*)'\s*(?=[)}:,]|$)/g) : []) {
          if (!(m[1] in MESSAGES) && !ALLOWED.has(m[1]) && !/^[~$/.]/.test(m[1])) found.push(`${name}:${lineOf(start)}: shows '${m[1]}'`);
        }
        text += blank(expr);
        continue;
      }
    }
    if (depth === 0) text += c;
  }
  s = text;
  s.split('\n').forEach((l, i) => {
    for (const m of l.matchAll(/>([^<>]*[A-Za-z]{2,}[^<>]*)</g)) {
      if (!ALLOWED.has(m[1].trim())) found.push(`${name}:${i + 1}: text "${m[1].trim()}"`);
    }
    for (const m of l.matchAll(/\b(aria-label|title|placeholder|alt)="([^"]*[A-Za-z]{2,}[^"]*)"/g)) {
      if (!ALLOWED.has(m[2])) found.push(`${name}:${i + 1}: ${m[1]} "${m[2]}"`);
    }
  });
  return found;
}

describe('every string in both languages', () => {
  it('the components show no English outside t()', () => {
    const files = svelteFiles(root);
    expect(files.length).toBeGreaterThan(20);
    const found = files.flatMap((u) => untranslated(u.pathname.slice(root.pathname.length), readFileSync(u, 'utf8')));
    expect(found).toEqual([]);
  });

  it('finds what it must', () => {
    expect(untranslated('a.svelte', `<p>{ok ? 'ok' : (err ?? 'error')}</p>`)).toEqual([`a.svelte:1: shows 'ok'`, `a.svelte:1: shows 'error'`]);
    expect(untranslated('a.svelte', `<p>Hello</p>\n<b aria-label="Close">{t('common.close')}</b>`)).toEqual(['a.svelte:1: text "Hello"', 'a.svelte:2: aria-label "Close"']);
    // An attribute's value, a message key and a path are not shown text.
    expect(untranslated('a.svelte', `<p class={x === 'ok' ? 'good' : 'bad'} title="{y ? 'a b' : ''}">{t(x ? 'chat.send' : 'common.close')} {z ? '~/.atrium' : ''}</p>`)).toEqual([]);
  });

  it("every model reason code of the gateway has its words (backend/model/reason.go)", () => {
    const go: string = readFileSync(new URL('../../backend/model/reason.go', import.meta.url), 'utf8');
    const codes = [...go.matchAll(/Reason\w+\s*=\s*"([a-z-]+)"/g)].map((m) => m[1]).filter((c) => c !== 'other');
    expect(codes.length).toBeGreaterThan(8);
    for (const c of codes) expect(`settings.reason.${c}` in MESSAGES, c).toBe(true);
  });

  it('every permission question reason code of the agent loop has its words (backend/agent/reasons.go)', () => {
    const go: string = readFileSync(new URL('../../backend/agent/reasons.go', import.meta.url), 'utf8');
    const codes = [...go.matchAll(/ReasonCode\w+\s*=\s*"([a-z-]+)"/g)].map((m) => m[1]);
    expect(codes.length).toBeGreaterThan(4);
    for (const c of codes) {
      expect(`perm.reason.${c}` in MESSAGES, c).toBe(true);
      expect(Object.hasOwn(REASON_PARAMS, c), c).toBe(true);
    }
    // And no words for a code the agent loop no longer sends.
    expect(Object.keys(REASON_PARAMS).sort()).toEqual([...codes].sort());
  });

  it("every error code of the gateway has its words (backend/gateway/errors.go), so Settings, Nodes and MCP say it in zh", () => {
    const go: string = readFileSync(new URL('../../backend/gateway/errors.go', import.meta.url), 'utf8');
    const codes = [...go.matchAll(/Code\w+\s*=\s*"([A-Z_]+)"/g)].map((m) => m[1]);
    expect(codes.length).toBeGreaterThan(8);
    expect([...ERROR_CODES].sort()).toEqual([...codes].sort());
    for (const c of codes) expect(`error.${c}` in MESSAGES, c).toBe(true);
  });

  it("components show a failed request's error through errorSay (its code in the UI's language), not errorText", () => {
    // The chat passes errorText as the detail of its own code-based sentences (lib/friendly.ts:
    // sendErrorText, loadErrorText), which word every code in both languages. Talk's settings are
    // still to move.
    const left = new Set(['components/ChatPanel.svelte', 'components/TalkSettings.svelte']);
    const raw = svelteFiles(root)
      .map((u) => u.pathname.slice(root.pathname.length))
      .filter((name) => !left.has(name) && /\berrorText\(/.test(readFileSync(new URL(name, root), 'utf8')));
    expect(raw).toEqual([]);
  });

  it('sentences shown one after another are joined by sentences() (a space in English, none after Chinese "。")', () => {
    const joined = svelteFiles(root)
      .map((u) => u.pathname.slice(root.pathname.length))
      .filter((name) => /\{t\([^{}]*\)\} \{t\(/.test(readFileSync(new URL(name, root), 'utf8')));
    expect(joined).toEqual([]);
  });
});
