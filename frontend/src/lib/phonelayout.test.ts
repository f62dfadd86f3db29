import { describe, expect, it } from 'vitest';
import { trackVisualViewport } from './phonelayout';

class FakeViewport extends EventTarget {
  height = 844;
}

describe('the phone page follows the visual viewport (issue 24 item 9)', () => {
  it('takes its height when the keyboard opens and closes, and stops when asked', () => {
    const vv = new FakeViewport();
    const root = document.createElement('div');
    const scrolls: number[] = [];
    const stop = trackVisualViewport({ visualViewport: vv, scrollTo: (_x, y) => scrolls.push(y) }, root);
    expect(root.style.getPropertyValue('--vvh')).toBe('844px');
    vv.height = 503.4; // a keyboard of 340 px
    vv.dispatchEvent(new Event('resize'));
    expect(root.style.getPropertyValue('--vvh')).toBe('503px');
    expect(scrolls.at(-1)).toBe(0);
    vv.height = 844;
    vv.dispatchEvent(new Event('resize'));
    expect(root.style.getPropertyValue('--vvh')).toBe('844px');
    stop();
    expect(root.style.getPropertyValue('--vvh')).toBe('');
    vv.height = 400;
    vv.dispatchEvent(new Event('resize'));
    expect(root.style.getPropertyValue('--vvh')).toBe('');
  });

  it('does nothing without a visualViewport', () => {
    const root = document.createElement('div');
    trackVisualViewport({}, root)();
    expect(root.style.getPropertyValue('--vvh')).toBe('');
  });
});
