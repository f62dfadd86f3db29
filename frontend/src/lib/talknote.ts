// The talk's note under its controls (TalkControls): what was heard, why an utterance or the voice
// failed, that words wait for the answer, that the talk ended. A note is kept as its message key and
// the raw values it names (a voice command's kind, an end's reason), and worded when shown, so it
// follows the page's language when the person switches it (a note made in Chinese stayed Chinese
// after a switch to English, and the other way round).
import { sentences, t, type Lang, lang } from './i18n.svelte';
import type { MessageKey } from './messages';

export interface TalkNote {
  key: MessageKey;
  /** A voice command's kind (slower, faster, voice), for talk.voiceCommand / talk.voiceCommandBound. */
  kind?: string;
  /** An end's reason (talk.ended): the gateway's or the page's code. */
  reason?: string;
  /** Words the person said that were not sent, named after the note's sentence (wordsKey, by default talk.notSentWords). */
  words?: string[];
  wordsKey?: MessageKey;
}

const KINDS: Record<string, MessageKey> = { slower: 'talk.cmd.slower', faster: 'talk.cmd.faster', voice: 'talk.cmd.voice' };
const REASONS = new Set(['too_long', 'too_large', 'idle', 'bad_stream', 'connection_gone', 'shutdown', 'slow_reader', 'forbidden']);

/** The words of a talk's end reason in l (an unknown reason as it came). */
export function endedReasonText(reason: string, l: Lang = lang()): string {
  return REASONS.has(reason) ? t(`talk.reason.${reason}` as MessageKey, undefined, l) : reason;
}

/** The note in l. */
export function talkNoteText(n: TalkNote, l: Lang = lang()): string {
  const words = n.words?.length ? t(n.wordsKey ?? 'talk.notSentWords', { words: n.words.map((w) => t('talk.quote', { words: w }, l)).join(l === 'zh' ? '、' : ', ') }, l) : '';
  return sentences([noteSentence(n, l), words], l);
}

function noteSentence(n: TalkNote, l: Lang): string {
  if (n.kind !== undefined) return t(n.key, { kind: KINDS[n.kind] ? t(KINDS[n.kind], undefined, l) : n.kind }, l);
  if (n.reason !== undefined) return t(n.key, { reason: endedReasonText(n.reason, l) }, l);
  return t(n.key, undefined, l);
}
