import { describe, expect, it } from 'vitest';
import { renderMarkdown } from './markdown';

describe('renderMarkdown', () => {
  it.each([
    ['bold and code', '**No model** uses `config.json`', ['<strong>No model</strong>', '<code>config.json</code>']],
    ['block quote', '> 今天把数据库连接池调到了 32。', ['<blockquote>', '数据库连接池']],
    ['list', '- one\n- 二', ['<li>one</li>', '<li>二</li>']],
    ['line breaks kept', 'line one\nline two', ['line one<br>line two']],
    ['links open outside', '[docs](https://example.com)', ['href="https://example.com"', 'target="_blank"', 'rel="noopener noreferrer"']],
  ])('%s', (_name, input, wants) => {
    const html = renderMarkdown(input);
    for (const w of wants) expect(html).toContain(w);
  });

  it.each([
    ['script tag', '<script>alert(1)</script>hi', '<script'],
    ['event handler', '<img src=x onerror="alert(1)">', 'onerror'],
    ['javascript link', '[x](javascript:alert(1))', 'javascript:'],
    ['iframe', '<iframe src="https://evil.example"></iframe>', '<iframe'],
    ['style attribute', '<p style="position:fixed">x</p>', 'style='],
  ])('removes %s', (_name, input, banned) => {
    expect(renderMarkdown(input).toLowerCase()).not.toContain(banned);
  });
});
