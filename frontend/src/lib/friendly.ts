// Errors in words a person reads (issue 14): what the chat shows when a message could not be sent
// or an answer failed, chosen by the protocol error code; the server's own text goes to the tooltip.
import { lang, t } from './i18n.svelte';
import type { MessageKey } from './messages';
import { errorCode, errorText } from './util';

/** Why a message was not sent (chat.send refused): code and message of the error, name of the profile. */
export function sendErrorText(code: string | undefined, detail: string | undefined, name: string): string {
  const d = detail || code || '';
  if (code === 'UNAVAILABLE' && /not connected|connection lost|unauthorized/i.test(d)) return t('send.offline');
  switch (code) {
    case 'UNAVAILABLE':
      return t('send.UNAVAILABLE', { name });
    case 'CONFLICT':
      return t('send.CONFLICT', { name });
    case 'TIMEOUT':
      return t('send.TIMEOUT');
    case 'INVALID_REQUEST':
      return t('send.INVALID_REQUEST', { detail: d });
    case 'PAYLOAD_TOO_LARGE':
      return t('send.PAYLOAD_TOO_LARGE');
    case 'NOT_FOUND':
      return t('send.NOT_FOUND', { name });
    case 'FORBIDDEN':
      return t('send.FORBIDDEN', { name });
    case 'UNAUTHORIZED':
      return t('send.UNAUTHORIZED');
  }
  return t('send.other', { detail: d });
}

/** Why an answer failed (chat.error, or a stored reply with an error). */
export function runErrorText(code: string | undefined, detail: string | undefined, name: string): string {
  switch (code) {
    case 'UNAVAILABLE':
      return t('run.UNAVAILABLE', { name });
    case 'TIMEOUT':
      return t('run.TIMEOUT');
  }
  return t('run.other', { detail: detail || code || '?' });
}

/**
 * Why a page of history could not be read (history.profile refused), by code (issue 24 item 8: the
 * server's English sentence showed in the Chinese UI); the server's text goes to the tooltip.
 */
export function loadErrorText(code: string | undefined, detail: string | undefined, name: string): string {
  switch (code) {
    case 'FORBIDDEN':
      return t('load.FORBIDDEN', { name });
    case 'UNAVAILABLE':
    case 'UNAUTHORIZED':
      return t('load.UNAVAILABLE');
  }
  return t('chat.historyError', { error: detail || code || '?' });
}

/** Tooltip of an error: its code and the server's text. */
export function errorTip(code: string | undefined, detail: string | undefined): string {
  return [code, detail].filter((x) => !!x).join(': ');
}

/** The gateway's error codes (backend/gateway/errors.go Code*; docs/PROTOCOL.md "Errors"). */
export const ERROR_CODES = [
  'INVALID_REQUEST',
  'UNAUTHORIZED',
  'FORBIDDEN',
  'NOT_FOUND',
  'NOT_PAIRED',
  'CONFLICT',
  'UNAVAILABLE',
  'TIMEOUT',
  'PAYLOAD_TOO_LARGE',
  'INTERNAL',
] as const;

/**
 * A failed request's error for Settings, Nodes and the MCP clients, in the UI's language: by its
 * code (a sentence per code, the server's English message after it as the detail), the message as
 * sent when the code is unknown or absent. In English the message alone, as before.
 */
export function errorSay(err: unknown): string {
  const detail = errorText(err);
  const code = errorCode(err);
  if (lang() === 'en' || !(ERROR_CODES as readonly string[]).includes(code)) return detail;
  return t(`error.${code}` as MessageKey, { detail: detail || code });
}
