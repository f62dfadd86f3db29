// The phone page's layout (issue 24 item 9): the on-screen keyboard must not cover the chat's
// input. Browsers shrink the visual viewport, not the layout viewport, when the keyboard opens, so
// `100dvh` still reaches under the keyboard; the page takes the visual viewport's height instead
// (CSS variable --vvh on the root, px) and keeps it scrolled to the top.

/** What trackVisualViewport needs of a window (a test passes a fake). */
export interface ViewportWindow {
  visualViewport?: (EventTarget & { height: number }) | null;
  scrollTo?: (x: number, y: number) => void;
}

/**
 * Keeps `--vvh` on root equal to the visual viewport's height (px) on every resize and scroll of
 * it; returns the function that stops. Without a visualViewport (old browsers) it does nothing and
 * the CSS falls back to 100dvh.
 */
export function trackVisualViewport(win: ViewportWindow | undefined, root: { style: { setProperty(k: string, v: string): void; removeProperty(k: string): string } }): () => void {
  const vv = win?.visualViewport;
  if (!vv) return () => {};
  const apply = () => {
    root.style.setProperty('--vvh', `${Math.round(vv.height)}px`);
    win?.scrollTo?.(0, 0);
  };
  apply();
  vv.addEventListener('resize', apply);
  vv.addEventListener('scroll', apply);
  return () => {
    vv.removeEventListener('resize', apply);
    vv.removeEventListener('scroll', apply);
    root.style.removeProperty('--vvh');
  };
}
