// The talk's note follows the page's language: it is kept as its key and raw values and worded when
// shown (a note made in Chinese stayed Chinese after the person switched to English: the page kept
// the worded sentence).
import { afterEach, describe, expect, it } from 'vitest';
import { endedReasonText, talkNoteText, type TalkNote } from './talknote';
import { resetLang, setLang } from './i18n.svelte';

afterEach(() => resetLang());

describe('talkNoteText', () => {
  const notes: [TalkNote, string, string][] = [
    [{ key: 'talk.voiceFailed' }, 'The answer’s voice could not be played', '无法播放回答的语音'],
    [{ key: 'talk.queued' }, 'sent when the current answer ends', '将在当前回答结束后发送'],
    [{ key: 'talk.voiceCommand', kind: 'slower' }, 'Done: speaking slower.', '已完成：说慢一点。'],
    [{ key: 'talk.ended', reason: 'connection_gone' }, 'The talk ended: the connection was lost.', '语音已结束：连接已断开。'],
    [{ key: 'talk.ended', reason: 'something_new' }, 'The talk ended: something_new.', '语音已结束：something_new。'],
  ];
  it.each(notes)('%j is worded in the language shown now', (n, en, zh) => {
    setLang('zh');
    expect(talkNoteText(n)).toContain(zh);
    setLang('en');
    expect(talkNoteText(n)).toContain(en);
    expect(talkNoteText(n, 'zh')).toContain(zh);
  });
  it('words every end reason the gateway gives', () => {
    for (const r of ['too_long', 'too_large', 'idle', 'bad_stream', 'connection_gone', 'shutdown', 'slow_reader', 'forbidden']) {
      expect(endedReasonText(r, 'en')).not.toBe(r);
      expect(endedReasonText(r, 'zh').replace('Atrium', '')).not.toMatch(/[A-Za-z]{3,}/);
    }
  });
});

describe('words not sent', () => {
  it('names them after the note, each quoted, in the page language', () => {
    const full: TalkNote = { key: 'talk.uttErr.queueFull', words: ['And one more?'] };
    expect(talkNoteText(full, 'en')).toMatch(/not sent: say it again once it ends\. Not sent: “And one more\?”$/);
    expect(talkNoteText(full, 'zh')).toMatch(/这段没有发送：请在回答结束后再说一次。未发送：“And one more\?”$/);
    const ended: TalkNote = { key: 'talk.ended', reason: 'forbidden', words: ['明天呢？', 'And later?'], wordsKey: 'talk.waitingDropped' };
    expect(talkNoteText(ended, 'en')).toContain('Not sent, because the talk ended: “明天呢？”, “And later?”');
    expect(talkNoteText(ended, 'zh')).toContain('以下内容未发送：“明天呢？”、“And later?”');
  });
});
