import { afterEach, describe, expect, it, vi } from 'vitest';
import { GatewayError } from './gateway';
import { copyText, errorCode, errorText, errorTitle, plainMessage, throttle } from './util';

describe('error text for people (tester defect: codes and layered prefixes in the UI)', () => {
  const e = new GatewayError('INVALID_REQUEST', 'import empty.md: memory: invalid input: empty content');

  it('shows the message without the code and without category labels', () => {
    expect(errorText(e)).toBe('import empty.md: empty content');
    expect(errorText({ code: 'CONFLICT', message: 'chat send: busy: session s1 is still answering the previous message' })).toBe(
      'chat send: session s1 is still answering the previous message',
    );
    expect(errorText({ code: 'NOT_FOUND', message: 'get memory/x.md: memory: not found' })).toBe('get memory/x.md: not found');
  });

  it('keeps the code for logic and tooltips', () => {
    expect(errorCode(e)).toBe('INVALID_REQUEST');
    expect(errorTitle(e)).toBe('INVALID_REQUEST: import empty.md: memory: invalid input: empty content');
    expect(errorCode('plain')).toBe('');
  });

  it('leaves ordinary messages alone; a lone code is still shown', () => {
    expect(plainMessage('the answer took longer than 5m0s and was stopped')).toBe('the answer took longer than 5m0s and was stopped');
    expect(plainMessage('workspace /x: memory is missing')).toBe('workspace /x: memory is missing');
    expect(errorText({ code: 'INTERNAL' })).toBe('INTERNAL');
    expect(errorText('memory: invalid input: empty name')).toBe('empty name');
  });
});

describe('throttle', () => {
  afterEach(() => vi.useRealTimers());

  it('fires while calls keep coming, at most once per window, with the latest arguments', () => {
    vi.useFakeTimers();
    const calls: number[] = [];
    const t = throttle((n: number) => calls.push(n), 1000);
    for (let i = 1; i <= 25; i++) {
      t(i);
      vi.advanceTimersByTime(100); // a steady stream: a debounce would never fire
    }
    expect(calls).toEqual([10, 20]);
    vi.advanceTimersByTime(1000);
    expect(calls).toEqual([10, 20, 25]);
    t(26);
    t.cancel();
    vi.advanceTimersByTime(2000);
    expect(calls).toEqual([10, 20, 25]);
  });
});

describe('copyText', () => {
  it('writes the clipboard, else falls back to the copy command, else says it could not', async () => {
    const writeText = vi.fn(async (_: string) => {});
    expect(await copyText('abc', { clipboard: { writeText }, document })).toBe(true);
    expect(writeText).toHaveBeenCalledWith('abc');
    let selected = '';
    const exec = vi.fn(() => {
      selected = (document.activeElement as HTMLTextAreaElement | null)?.value ?? document.querySelector('textarea')?.value ?? '';
      return true;
    });
    Object.defineProperty(document, 'execCommand', { value: exec, configurable: true });
    writeText.mockRejectedValueOnce(new Error('not allowed'));
    expect(await copyText('def', { clipboard: { writeText }, document })).toBe(true);
    expect(exec).toHaveBeenCalledWith('copy');
    expect(selected).toBe('def');
    expect(document.querySelector('textarea')).toBeNull(); // the helper textarea is gone
    exec.mockReturnValueOnce(false);
    expect(await copyText('ghi', { clipboard: null, document })).toBe(false);
    expect(await copyText('jkl', { clipboard: null, document: null })).toBe(false);
  });
});
