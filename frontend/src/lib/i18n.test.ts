// The UI's language: picking it, switching it, and the words that depend on a number.
import { afterEach, describe, expect, it } from 'vitest';
import { fireEvent, render, screen, waitFor } from '@testing-library/svelte';
import { LANG_KEY, interpolate, lang, pickLang, resetLang, sentences, setLang, t } from './i18n.svelte';
import { MESSAGES } from './messages';
import { formatScore, layerBadge, layerLabel, statusSummary } from './memory';
import { heartbeatOutcomeText, modelReasonText } from './config';
import { errorSay, loadErrorText, sendErrorText, runErrorText } from './friendly';
import App from '../App.svelte';
import { GatewayClient } from './gateway';
import { FakeWebSocket } from './testing/fakeWebSocket';

afterEach(() => {
  resetLang();
  localStorage.clear();
});

describe('i18n', () => {
  it('picks the stored choice, else the browser languages, else English', () => {
    expect(pickLang('zh', ['en-US'])).toBe('zh');
    expect(pickLang('en', ['zh-CN'])).toBe('en');
    expect(pickLang(null, ['zh-TW', 'en'])).toBe('zh');
    expect(pickLang('fr', ['fr-FR', 'zh-Hans-CN', 'en'])).toBe('zh');
    expect(pickLang(null, ['de', 'en-GB'])).toBe('en');
    expect(pickLang(null, ['ja'])).toBe('en');
    expect(pickLang(undefined, undefined)).toBe('en');
  });

  it("follows the system languages the desktop window injected before the browser's", () => {
    (globalThis as { __ATRIUM__?: unknown }).__ATRIUM__ = { languages: ['zh-CN'] };
    try {
      resetLang();
      expect(lang()).toBe('zh');
    } finally {
      delete (globalThis as { __ATRIUM__?: unknown }).__ATRIUM__;
      resetLang();
    }
    expect(lang()).toBe('en');
  });

  it('switches, remembers the choice, and sets the document language', () => {
    setLang('zh');
    expect(lang()).toBe('zh');
    expect(localStorage.getItem(LANG_KEY)).toBe('zh');
    expect(document.documentElement.lang).toBe('zh-CN');
    expect(t('chat.send')).toBe('发送');
    setLang('en');
    expect(t('chat.send')).toBe('Send');
  });

  it('every entry has both languages, with the same placeholders', () => {
    for (const [key, [en, zh]] of Object.entries(MESSAGES)) {
      for (const m of [en, zh]) {
        const text = typeof m === 'function' ? m({ n: 2 }) : m;
        expect(text, key).not.toBe('');
      }
      if (typeof en === 'string' && typeof zh === 'string') {
        const vars = (s: string) => [...s.matchAll(/\{(\w+)\}/g)].map((x) => x[1]).sort();
        expect(vars(zh), key).toEqual(vars(en));
      }
    }
    expect(interpolate('{a} and {b}', { a: 1 })).toBe('1 and {b}');
  });

  it('counts are right in both languages: "1 file · 1 chunk", "2 files · 2 chunks", "1 个文件"', () => {
    const st = (files: number, chunks: number) => statusSummary({ state: 'ready', files, chunks, provider: 'builtin', model: 'hashed-ngram-v2' });
    expect(st(1, 1)).toBe('memory: ready · 1 file · 1 chunk · builtin/hashed-ngram-v2');
    expect(st(2, 0)).toBe('memory: ready · 2 files · 0 chunks · builtin/hashed-ngram-v2');
    setLang('zh');
    expect(st(1, 1)).toBe('记忆：就绪 · 1 个文件 · 1 个分块 · builtin/hashed-ngram-v2');
    expect(st(2, 5)).toBe('记忆：就绪 · 2 个文件 · 5 个分块 · builtin/hashed-ngram-v2');
  });

  it('an English message counting {n} things says "1 file", not "1 files" (every key)', () => {
    // A plural noun right after the number (within three words: "1 running instances") is wrong when n is 1;
    // such a message is a function of n (enCount in messages.ts), not a plain template.
    const wrong: string[] = [];
    for (const [key, [en]] of Object.entries(MESSAGES) as [string, [unknown, unknown]][]) {
      if (typeof en === 'string' && !en.includes('{n}')) continue;
      const text = typeof en === 'function' ? (en as (v: Record<string, string | number>) => string)(new Proxy({ n: 1 }, { get: (o, k) => (k in o ? o[k as 'n'] : 'X') })) : interpolate(en as string, new Proxy({ n: 1 }, { get: (o, k) => (k in o ? o[k as 'n'] : 'X') }));
      const m = text.match(/\b1 (?:[A-Za-z-]+ ){0,2}?([A-Za-z]*[^\Wsu\d]s)\b/);
      // Verbs after the noun ("1 device asks") are right.
      if (m && !/^(is|was|has|asks|stops|stays|needs|waits|runs|says|goes|works)$/.test(m[1])) wrong.push(`${key}: ${text}`);
    }
    expect(wrong).toEqual([]);
    expect(t('profiles.deleteRemoves', { n: 1, path: 'memory/roles/x' })).toBe('Its memory is deleted for good: 1 file in memory/roles/x/ is removed and cannot be restored.');
    expect(t('profiles.deleteRemoves', { n: 3, path: 'memory/roles/x' })).toBe('Its memory is deleted for good: 3 files in memory/roles/x/ are removed and cannot be restored.');
    expect(t('profiles.deleteMemoryToo', { n: 1 })).toBe('Also delete its memory (1 file) for good');
    expect(t('profiles.deleteKeeps', { n: 1, path: 'p', archive: 'a' })).toMatch(/^Its memory is kept: 1 file in p\/ moves to a\//);
    expect(t('profiles.editSavedRestart', { n: 2 })).toBe('Saved. 2 running instances still use the old model until they restart.');
    expect(t('profiles.deleteMemoryToo', { n: 1 }, 'zh')).toBe('同时永久删除它的记忆（1 个文件）');
  });

  it('scores are rounded for display (the wire keeps full precision)', () => {
    expect(formatScore(0.8594198700000001)).toBe('0.86');
    expect(formatScore(1)).toBe('1.00');
    expect(formatScore(Number.NaN)).toBe('–');
  });

  it('errors in words, by code, in both languages; the server text is not the message', () => {
    const raw = 'chat send: unavailable: instance code-expert-1 is not ready';
    expect(sendErrorText('UNAVAILABLE', raw, 'code-expert-1')).toBe('code-expert-1 cannot take messages right now. Try again in a moment.');
    expect(sendErrorText('UNAVAILABLE', 'not connected to the gateway', 'Main')).toBe('Not connected to the gateway: the message was not sent.');
    expect(sendErrorText('INVALID_REQUEST', 'message has 40000 characters (at most 32000)', 'Main')).toContain('at most 32000');
    expect(runErrorText('UNAVAILABLE', 'instance crashed: exited: signal: killed', 'writer-1')).not.toContain('signal');
    setLang('zh');
    expect(sendErrorText('UNAVAILABLE', raw, 'code-expert-1')).toBe('code-expert-1 暂时无法接收消息，请稍后再试。');
  });

  it('lib modules speak Chinese too: layer badges, why this model, heartbeat outcomes (issue 24 item 8)', () => {
    const m = { provider: 'ollama', model: 'qwen2.5:7b', baseUrl: 'http://127.0.0.1:11434/v1', reason: 'found a local Ollama at http://127.0.0.1:11434 with model qwen2.5:7b', reasonCode: 'ollama-found' };
    expect(layerBadge('global')).toBe('L1 global');
    expect(modelReasonText(m)).toBe('found a local Ollama (http://127.0.0.1:11434/v1, model qwen2.5:7b)');
    setLang('zh');
    expect(layerBadge('global')).toBe('L1 全局');
    expect(layerBadge('role')).toBe('L2 角色');
    expect(layerBadge('session')).toBe('L3 会话');
    expect(layerBadge(undefined)).toBe('记忆');
    expect(layerLabel(undefined)).toBe('记忆');
    expect(modelReasonText(m)).toBe('发现本机 Ollama（http://127.0.0.1:11434/v1，模型 qwen2.5:7b）');
    expect(modelReasonText({ ...m, reasonCode: 'none', model: '', baseUrl: '' })).toBe('未配置模型，本机也未发现模型：离线模式');
    // An older gateway without codes: its sentence as sent.
    expect(modelReasonText({ ...m, reasonCode: undefined })).toBe(m.reason);
    expect(heartbeatOutcomeText('silent')).toBe('无事可报（HEARTBEAT_OK）');
    // Settings, Nodes and MCP errors: by the gateway's code, the server's message kept as the detail.
    const refusedSave = { code: 'FORBIDDEN', message: 'config.set: forbidden: only the person at this computer changes settings' };
    expect(errorSay(refusedSave)).toBe('不允许这样做（config.set: forbidden: only the person at this computer changes settings）');
    expect(errorSay({ code: 'NEW_CODE', message: 'something new' })).toBe('something new');
    expect(errorSay(new Error('plain'))).toBe('plain');
    setLang('en');
    expect(errorSay(refusedSave)).toBe(refusedSave.message);
    setLang('zh');
    // The MCP "acts as" menu and the scope picker name the ACL's "authenticated" in Chinese.
    expect(t('mcp.authenticated')).toBe('已认证（无角色）');
    expect(t('nodes.scope.authenticated')).not.toMatch(/[A-Za-z]/);
    // A refused history page: by its code, not the server's English sentence.
    const refused = "history.profile profile main: forbidden: this device's memory scope is authenticated";
    expect(loadErrorText('FORBIDDEN', refused, 'Main')).toBe('本设备无权读取 Main 的对话：它的记忆范围不包含该角色。电脑前的人可以在“节点 → 已配对设备”中更改。');
    expect(loadErrorText('INTERNAL', 'disk full', 'Main')).toBe('无法加载历史记录：disk full');
  });

  it('the switch in the top bar changes the UI text at once', async () => {
    FakeWebSocket.reset();
    const gw = new GatewayClient({ url: 'ws://test/ws', token: 't', instanceId: 'i', WebSocket: FakeWebSocket, random: () => 0.5 });
    render(App, { props: { gw } });
    gw.start();
    FakeWebSocket.last().handshake();
    await waitFor(() => expect(screen.getByTestId('conn-state').textContent).toBe('connected'));
    expect(screen.getByRole('button', { name: 'Memory' })).toBeTruthy();
    await fireEvent.change(screen.getByTestId('lang-select'), { target: { value: 'zh' } });
    await waitFor(() => expect(screen.getByTestId('conn-state').textContent).toBe('已连接'));
    expect(screen.getByRole('button', { name: '记忆' })).toBeTruthy();
    expect((screen.getByTestId('chat-send') as HTMLButtonElement).textContent?.trim()).toBe('发送');
    expect(localStorage.getItem(LANG_KEY)).toBe('zh');
  });
});

describe('sentences', () => {
  it('puts a space between English sentences and none between Chinese ones', () => {
    expect(sentences(['UTF-8 text.', 'Nothing is overwritten.'], 'en')).toBe('UTF-8 text. Nothing is overwritten.');
    expect(sentences(['UTF-8 文本。', '不会覆盖任何文件。'], 'zh')).toBe('UTF-8 文本。不会覆盖任何文件。');
    expect(sentences(['', 'One.'], 'en')).toBe('One.');
  });
});

