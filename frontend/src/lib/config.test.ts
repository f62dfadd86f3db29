import { describe, expect, it } from 'vitest';
import { mdnsText, modelForm, modelPatch, modelRequest, parseAllowlist, reindexCost, restartText, talkForm, talkPatch, talkTestText, visionText } from './config';
import { resetLang, setLang } from './i18n.svelte';

describe('settings forms', () => {
  it('carries the vision override: yes, no, or removed to let the server decide', () => {
    expect(modelForm({ model: 'llava', vision: true }).vision).toBe('yes');
    expect(modelForm({ model: 'llama', vision: false }).vision).toBe('no');
    expect(modelForm({ model: 'm' }).vision).toBe('');
    const f = modelForm({ provider: 'ollama', model: 'llava' });
    expect(modelPatch({ ...f, vision: 'yes' }).vision).toBe(true);
    expect(modelPatch({ ...f, vision: 'no' }).vision).toBe(false);
    expect(modelPatch({ ...f, vision: '' }).vision).toBeNull();
    expect(modelPatch({ provider: 'ollama', baseUrl: '', model: 'm', apiKey: '', clearKey: false })).not.toHaveProperty('vision');
  });
  it('says whether the model in use takes images and where that was learnt (en, zh)', () => {
    const m = { provider: 'ollama', model: 'llava', baseUrl: '', reason: '' };
    setLang('en');
    expect(visionText({ ...m, vision: 'yes', visionFrom: 'server' })).toBe('the model takes images: photos are shown to it (as the model server says)');
    expect(visionText({ ...m, vision: 'no', visionFrom: 'config' })).toContain("path and details (set in config.json)");
    expect(visionText(m)).toContain('unknown');
    setLang('zh');
    expect(visionText({ ...m, vision: 'yes', visionFrom: 'config' })).toBe('模型可接收图像：照片会发给它 (来自 config.json)');
    expect(visionText({ ...m, vision: 'unknown' })).toContain('未知');
    resetLang();
  });
  it('never carries a key it did not get typed', () => {
    const f = modelForm({ provider: 'openai', baseUrl: 'http://127.0.0.1:1234/v1', model: 'qwen', apiKeySet: true });
    expect(f.apiKey).toBe('');
    expect(modelPatch(f)).toEqual({ provider: 'openai', baseUrl: 'http://127.0.0.1:1234/v1', model: 'qwen', vision: null });
    expect(modelRequest(f)).not.toHaveProperty('apiKey');
  });
  it('sets a typed key, removes a cleared one, nulls empty fields', () => {
    expect(modelPatch({ provider: 'openai', baseUrl: ' ', model: 'm', apiKey: ' sk-1 ', clearKey: false })).toEqual({
      provider: 'openai',
      baseUrl: null,
      model: 'm',
      apiKey: 'sk-1',
    });
    expect(modelPatch({ provider: '', baseUrl: '', model: '', apiKey: '', clearKey: true }).apiKey).toBeNull();
    expect(modelRequest({ provider: 'openai', baseUrl: '', model: '', apiKey: 'k', clearKey: false }, 'writer')).toEqual({
      provider: 'openai',
      baseUrl: '',
      model: '',
      apiKey: 'k',
      profile: 'writer',
    });
  });
  it('parses the allowlist and names what needs a restart', () => {
    expect(parseAllowlist('/usr/bin/git\n\n  /usr/bin/ls \n')).toEqual(['/usr/bin/git', '/usr/bin/ls']);
    expect(restartText([])).toBe('');
    expect(restartText(['memory.embedding'])).toContain('embedding provider');
    setLang('zh');
    expect(restartText(['memory.embedding', 'gateway'])).toBe('重启后生效：嵌入模型, 网关端口/绑定');
    expect(mdnsText({ mdns: 'retrying' })).toBe('失败，正在重试（见日志）');
    expect(mdnsText({ mdns: 'retrying', mdnsReason: 'no-multicast', mdnsInterfaces: ['lo'] })).toBe('无法在 lo 上广播：该接口不支持多播（手机须扫描二维码）');
    expect(mdnsText({ mdns: 'advertising', mdnsInterfaces: ['eth0', 'wlan0'] })).toBe('正在通过 eth0, wlan0 广播');
    expect(reindexCost(1, 3)).toContain('1 个文件（3 个分块）');
    resetLang();
    expect(reindexCost(1, 1)).toContain('all 1 file (1 chunk)');
    expect(mdnsText({ mdns: 'advertising' })).toBe('advertising');
    expect(mdnsText({ mdns: 'advertising', mdnsInterfaces: ['eth0'] })).toBe('advertising on eth0');
    expect(mdnsText({ mdns: 'retrying', mdnsReason: 'no-multicast', mdnsInterfaces: ['tun0'] })).toBe(
      'not possible on tun0: no multicast (phones must scan the QR code)',
    );
    expect(mdnsText({ mdns: 'retrying', mdnsReason: 'interface-down', mdnsInterfaces: ['eth0'] })).toBe('not possible on eth0: the interface is down (retrying)');
    expect(mdnsText({ mdns: 'retrying', mdnsReason: 'no-interface' })).toContain('no network interface holds');
    expect(mdnsText({ mdns: 'retrying', mdnsReason: 'error', mdnsInterfaces: ['eth0'] })).toBe('failing, retrying (see the log)');
    expect(mdnsText({ mdns: '' })).toBe('');
    expect(mdnsText(undefined)).toBe('');
  });
});

describe('Settings → Talk (issue 27)', () => {
  it('fills the form from config.get with the documented defaults, and a key only as "set"', () => {
    const f = talkForm(undefined);
    expect(f).toMatchObject({ ttsProvider: '', ttsSpeed: '1', interrupt: 'cancel', keepAudio: false, sttLanguage: 'auto', sttKey: '' });
    const g = talkForm({ stt: { baseUrl: 'http://127.0.0.1:8000', apiKeySet: true, language: 'ui' }, tts: { provider: 'elevenlabs', speed: 1.25, elevenlabs: { voiceId: 'v', stability: 0.4 } }, interrupt: 'queue', keepAudio: true });
    expect(g).toMatchObject({ sttBaseUrl: 'http://127.0.0.1:8000', sttKey: '', sttLanguage: 'ui', ttsProvider: 'elevenlabs', ttsSpeed: '1.25', elVoiceId: 'v', elStability: '0.4', interrupt: 'queue', keepAudio: true });
  });

  it('patches: blanks are null (the default), keys only when typed or removed, bounds checked', () => {
    const f = { ...talkForm(undefined), sttBaseUrl: ' http://127.0.0.1:8000 ', sttKey: 'sk-1', ttsProvider: 'openai' as const, ttsVoice: 'nova', interrupt: 'queue' as const };
    const r = talkPatch(f);
    expect('patch' in r && r.patch).toEqual({
      stt: { baseUrl: 'http://127.0.0.1:8000', model: null, language: 'auto', apiKey: 'sk-1' },
      tts: { provider: 'openai', baseUrl: null, model: null, voice: 'nova', speed: 1, format: null, elevenlabs: { voiceId: null, modelId: null, stability: null } },
      interrupt: 'queue',
      keepAudio: false,
      continuous: { silenceMs: null, minSpeechMs: null },
    });
    const cleared = talkPatch({ ...talkForm(undefined), ttsClearKey: true });
    expect('patch' in cleared && (cleared.patch.tts as Record<string, unknown>).apiKey).toBeNull();
    expect('patch' in cleared && 'apiKey' in (cleared.patch.stt as Record<string, unknown>)).toBe(false);
    expect(talkPatch({ ...talkForm(undefined), ttsSpeed: '3' })).toEqual({ error: 'settings.talk.badSpeed' });
    expect(talkPatch({ ...talkForm(undefined), elStability: '-1' })).toEqual({ error: 'settings.talk.badStability' });
    expect(talkPatch({ ...talkForm(undefined), silenceMs: '10' })).toEqual({ error: 'settings.talk.badVad' });
    // The bounds are backend/talk's (minSpeechMs 50…5000): a value config.json may hold saves again.
    const kept = talkPatch({ ...talkForm(undefined), minSpeechMs: '3000' });
    expect('patch' in kept && (kept.patch.continuous as { minSpeechMs: number }).minSpeechMs).toBe(3000);
    expect(talkPatch({ ...talkForm(undefined), minSpeechMs: '5001' })).toEqual({ error: 'settings.talk.badVad' });
  });
});

// Settings → Talk's Test buttons in Chinese said the gateway's English sentence ("the transcription
// server at … answered HTTP 401 (Unauthorized)", "… spoke "Atrium" and "你好": 132388 bytes of
// audio/wav"): the page words talk.test's fields in its language, and says what to check.
describe('talkTestText', () => {
  const url = 'http://127.0.0.1:8080/v1/audio/transcriptions';
  const english = (s: string) => s.replace(url, '').replace('http://127.0.0.1:8880', '').replace(/audio\/wav|whisper-1|HTTP|API|Atrium|JSON text/g, '').match(/[A-Za-z]{3,}/g);
  const cases: [kind: 'stt' | 'tts', r: Parameters<typeof talkTestText>[1], en: string][] = [
    ['stt', { ok: true, latencyMs: 12, url, model: 'whisper-1', detail: 'x transcribed a 1 s test tone' }, `✓ Works (12 ms): ${url} transcribed a 1 s test tone with the model whisper-1.`],
    ['tts', { ok: true, latencyMs: 7, url: 'http://127.0.0.1:8880', provider: 'openai', bytes: 132388, mimeType: 'audio/wav', detail: 'spoke' }, '✓ Works (7 ms): the speech server at http://127.0.0.1:8880 spoke “Atrium” and “你好” (132388 bytes of audio/wav).'],
    ['tts', { ok: true, latencyMs: 0, browser: true, provider: 'browser', detail: 'no speech server is set' }, '✓ No speech server is set: answers are spoken by the device’s own voice.'],
    ['stt', { ok: false, code: 'TALK_STT_FAILED', why: 'status', status: 401, url, detail: 'answered HTTP 401 (Unauthorized)' }, `✗ The transcription server failed: ${url} refused the key (HTTP 401): check the API key.`],
    ['stt', { ok: false, code: 'TALK_STT_FAILED', why: 'status', status: 404, url, detail: 'answered HTTP 404' }, `✗ The transcription server failed: ${url} answered HTTP 404: check the address (the server’s, without a path after /v1).`],
    ['stt', { ok: false, code: 'TALK_STT_FAILED', why: 'unreachable', url, detail: 'could not be reached' }, `✗ The transcription server failed: ${url} could not be reached: is the server running, and is the address right?`],
    ['stt', { ok: false, code: 'TALK_STT_FAILED', why: 'not_json', url, detail: 'answered without a JSON text field' }, `✗ The transcription server failed: ${url} answered without a transcript (no JSON text field): is it a transcription server?`],
    ['tts', { ok: false, code: 'TALK_TTS_FAILED', why: 'status', status: 500, url: 'http://127.0.0.1:8880', detail: 'answered HTTP 500' }, '✗ The speech server failed: http://127.0.0.1:8880 answered HTTP 500.'],
    ['tts', { ok: false, code: 'TALK_TTS_FAILED', why: 'empty', url: 'http://127.0.0.1:8880', detail: 'no audio bytes' }, '✗ The speech server failed: http://127.0.0.1:8880 answered with no audio.'],
    ['tts', { ok: false, code: 'TALK_TTS_FAILED', why: 'slow', url: 'http://127.0.0.1:8880', detail: 'did not begin its answer in time' }, '✗ The speech server failed: http://127.0.0.1:8880 did not begin its answer in time: is its model still loading? Try again in a moment.'],
  ];
  it.each(cases)('%s %j', (kind, r, en) => {
    expect(talkTestText(kind, r, 'en')).toBe(en);
    const zh = talkTestText(kind, r, 'zh');
    expect(english(zh), zh).toBeNull();
    expect(zh).not.toContain(r.detail ?? '');
  });
  it('shows the detail of a gateway that sends no fields, and a refusal alone', () => {
    expect(talkTestText('stt', { ok: false, code: 'TALK_STT_FAILED', detail: 'the transcription server at u answered HTTP 500' }, 'en')).toBe('✗ The transcription server failed: the transcription server at u answered HTTP 500');
    expect(talkTestText('stt', { ok: true, latencyMs: 3, detail: 'u transcribed' }, 'en')).toBe('✓ works (3 ms) u transcribed');
    expect(talkTestText('stt', { ok: false, detail: '语音需要一个语音转文字服务器' }, 'zh')).toBe('✗ 语音需要一个语音转文字服务器');
  });
});
