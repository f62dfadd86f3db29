// Safe Markdown rendering for assistant messages: marked (GFM) turns the
// text into HTML, DOMPurify removes anything executable. Links open outside
// the app. Model output is untrusted input: never render it without this.
import DOMPurify from 'dompurify';
import { Marked } from 'marked';

const marked = new Marked({ gfm: true, breaks: true, async: false });

let purifier: ReturnType<typeof DOMPurify> | null = null;

function getPurifier(): ReturnType<typeof DOMPurify> {
  if (purifier) return purifier;
  const p = DOMPurify(window);
  p.addHook('afterSanitizeAttributes', (node) => {
    if (node.tagName === 'A') {
      node.setAttribute('target', '_blank');
      node.setAttribute('rel', 'noopener noreferrer');
    }
  });
  purifier = p;
  return p;
}

/** Renders Markdown to sanitised HTML (no scripts, event handlers, styles, iframes or forms). */
export function renderMarkdown(text: string): string {
  const html = marked.parse(text ?? '') as string;
  return getPurifier().sanitize(html, {
    FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'object', 'embed'],
    FORBID_ATTR: ['style'],
  });
}
