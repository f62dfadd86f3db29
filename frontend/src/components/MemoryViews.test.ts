// The memory panel's files, conflicts and audit views against a scripted gateway.
import { beforeEach, describe, expect, it } from 'vitest';
import { fireEvent, render, screen, waitFor, within } from '@testing-library/svelte';
import MemoryPanel from './MemoryPanel.svelte';
import ConflictsView from './ConflictsView.svelte';
import AuditView from './AuditView.svelte';
import { GatewayClient } from '../lib/gateway';
import { FakeWebSocket } from '../lib/testing/fakeWebSocket';
import { resetLang, setLang } from '../lib/i18n.svelte';

function connect() {
  const gw = new GatewayClient({ url: 'ws://test/ws', token: 't', instanceId: 'i', WebSocket: FakeWebSocket, random: () => 0.5 });
  gw.start();
  const ws = FakeWebSocket.last();
  ws.handshake();
  return { gw, ws };
}

/** Answers every unanswered request for method; returns the params of those answered. */
function answer(ws: FakeWebSocket, method: string, payload: unknown | ((params: any) => unknown), done: Set<string>): any[] {
  const out: any[] = [];
  for (const f of ws.sent) {
    if (f.method === method && !done.has(f.id)) {
      done.add(f.id);
      ws.reply(f, typeof payload === 'function' ? (payload as (p: any) => unknown)(f.params) : payload);
      out.push(f.params);
    }
  }
  return out;
}

beforeEach(() => FakeWebSocket.reset());

const files = [
  {
    path: 'memory/roles/writer/草稿.md',
    size: 20,
    mtime: 2,
    chunks: 1,
    layer: 'role',
    role: 'writer',
    access: { rule: 'roles/*/**', source: 'defaults', read: ['writer', 'admin'], write: ['writer', 'admin'], collaborate: [] },
  },
  {
    path: 'memory/global/user-profile.md',
    size: 10,
    mtime: 1,
    chunks: 1,
    layer: 'global',
    access: { rule: 'global/user-profile.md', line: 3, source: 'file', read: ['*'], write: ['admin', 'main'], collaborate: [] },
  },
  {
    path: 'memory/sessions/s1/context.md',
    size: 5,
    mtime: 3,
    chunks: 1,
    layer: 'session',
    access: { rule: 'sessions/*/*', source: 'file', read: ['$session_owner', 'admin'], write: ['$session_owner'], collaborate: [], sessionOwner: 'writer' },
  },
];

describe('memory files by layer', () => {
  it('groups L1, L2, L3 with badges and who may read and write, and filters a layer', async () => {
    const { gw, ws } = connect();
    render(MemoryPanel, { props: { gw, connected: true, status: null } });
    const done = new Set<string>();
    await waitFor(() => expect(answer(ws, 'memory.files', { files }, done)).toHaveLength(1));
    answer(ws, 'conflicts.list', { conflicts: [] }, done);
    await waitFor(() => expect(screen.getAllByTestId('memory-file')).toHaveLength(3));
    expect(screen.getAllByTestId('memory-layer-group').map((g) => g.dataset.layer)).toEqual(['L1', 'L2', 'L3']);
    const rows = screen.getAllByTestId('memory-file');
    expect(rows.map((r) => r.querySelector('[data-testid=file-layer]')!.textContent)).toEqual(['L1 global', 'L2 role', 'L3 session']);
    expect(rows[0].querySelector('[data-testid=file-access]')!.textContent).toBe('read: * · write: admin, main');
    expect(rows[0].querySelector('[data-testid=file-access]')!.getAttribute('title')).toBe('rule "global/user-profile.md" (.acl line 3)');
    expect(rows[1].textContent).toContain('草稿.md');
    expect(rows[1].querySelector('[data-testid=file-access]')!.textContent).toBe('read: writer, admin · write: writer, admin');
    expect(rows[2].querySelector('[data-testid=file-access]')!.textContent).toContain('$session_owner (writer)');

    await fireEvent.change(screen.getByTestId('memory-layer-filter'), { target: { value: 'L2' } });
    await waitFor(() => expect(screen.getAllByTestId('memory-file')).toHaveLength(1));
    expect(screen.getByTestId('memory-file').dataset.layer).toBe('L2');
  });

  it('lists OpenClaw context files as main\'s persona, not as searched memory', async () => {
    const { gw, ws } = connect();
    render(MemoryPanel, { props: { gw, connected: true, status: null } });
    const done = new Set<string>();
    const withSoul = [...files, { path: 'SOUL.md', size: 1673, mtime: 4, chunks: 0, layer: 'role', role: 'main', context: true }];
    await waitFor(() => expect(answer(ws, 'memory.files', { files: withSoul }, done)).toHaveLength(1));
    await waitFor(() => expect(screen.getAllByTestId('memory-file')).toHaveLength(4));
    const soul = screen.getAllByTestId('memory-file').find((r) => r.textContent!.includes('SOUL.md'))!;
    expect(soul.querySelector('[data-testid=file-context]')!.textContent).toContain('persona · not searched');
    expect(soul.textContent).not.toContain('0 chunks');
  });

  it('shows the open conflicts count and switches views', async () => {
    const { gw, ws } = connect();
    render(MemoryPanel, { props: { gw, connected: true, status: null } });
    const done = new Set<string>();
    await waitFor(() => expect(answer(ws, 'conflicts.list', { conflicts: [{ id: 1, path: 'memory/a.md', other: 'x', ts: 1, state: 'open' }] }, done)).toHaveLength(1));
    await waitFor(() => expect(screen.getByTestId('conflicts-count').textContent).toBe('1'));
    await fireEvent.click(screen.getByTestId('memory-view-audit'));
    expect(screen.getByTestId('audit-view')).toBeTruthy();
    expect(screen.queryByTestId('memory-dropzone')).toBeNull();
    await fireEvent.click(screen.getByTestId('memory-view-files'));
    expect(screen.getByTestId('memory-dropzone')).toBeTruthy();
  });
});

describe('conflicts queue', () => {
  const conflict = {
    id: 7,
    path: 'memory/global/计划.md',
    kind: 'overwrite',
    base: 'admin=1',
    current: 'admin=2',
    writer: 'admin',
    other: '# 计划\nstep one\nstep two\n',
    ts: Date.parse('2026-03-01T10:00:00Z'),
    state: 'open',
  };

  async function openOne() {
    const { gw, ws } = connect();
    render(ConflictsView, { props: { gw, connected: true } });
    const done = new Set<string>();
    await waitFor(() => expect(answer(ws, 'conflicts.list', { conflicts: [conflict] }, done)).toEqual([{ state: 'open', limit: 100 }]));
    await waitFor(() => expect(screen.getAllByTestId('conflict-item')).toHaveLength(1));
    expect(screen.getByTestId('conflict-item').textContent).toContain('memory/global/计划.md');
    await fireEvent.click(screen.getByTestId('conflict-item'));
    await waitFor(() => expect(answer(ws, 'memory.get', { path: conflict.path, text: '# 计划\nstep one (edited)\nstep two\n' }, done)).toEqual([{ path: conflict.path }]));
    await waitFor(() => expect(screen.getByTestId('conflict-diff')).toBeTruthy());
    return { ws, done };
  }

  it('shows both sides with the differing lines marked', async () => {
    await openOne();
    const left = screen.getAllByTestId('diff-left');
    const right = screen.getAllByTestId('diff-right');
    expect(left.map((c) => c.textContent)).toEqual(['# 计划', 'step one (edited)', 'step two']);
    expect(right.map((c) => c.textContent)).toEqual(['# 计划', 'step one', 'step two']);
    expect(left.map((c) => c.dataset.changed)).toEqual(['false', 'true', 'false']);
    expect(right.map((c) => c.dataset.changed)).toEqual(['false', 'true', 'false']);
    expect(screen.getByTestId('conflict-stats').textContent).toContain('1 line only in the file');
  });

  it('take other resolves with choice other and refreshes the queue', async () => {
    const { ws, done } = await openOne();
    await fireEvent.click(screen.getByTestId('conflict-take-other'));
    await waitFor(() => expect(answer(ws, 'conflicts.resolve', { conflict: { ...conflict, state: 'resolved' } }, done)).toEqual([{ id: 7, choice: 'other', idempotencyKey: expect.any(String) }]));
    await waitFor(() => expect(answer(ws, 'conflicts.list', { conflicts: [] }, done)).toHaveLength(1));
    await waitFor(() => expect(screen.getByTestId('conflicts-empty')).toBeTruthy());
    expect(screen.getByTestId('conflict-notice').textContent).toContain('took the other side');
    expect(screen.queryByTestId('conflict-detail')).toBeNull();
  });

  it('keep both sends the union of the two texts as merged content', async () => {
    const { ws, done } = await openOne();
    await fireEvent.click(screen.getByTestId('conflict-keep-both'));
    await waitFor(() =>
      expect(answer(ws, 'conflicts.resolve', { conflict: { ...conflict, state: 'resolved' } }, done)).toEqual([
        { id: 7, choice: 'merged', content: '# 计划\nstep one (edited)\nstep one\nstep two\n', idempotencyKey: expect.any(String) },
      ]),
    );
  });

  it('keeps the conflict open and says why when resolving fails', async () => {
    const { ws } = await openOne();
    await fireEvent.click(screen.getByTestId('conflict-keep-current'));
    await waitFor(() => expect(ws.lastRequest('conflicts.resolve')).toBeDefined());
    const req = ws.lastRequest('conflicts.resolve');
    expect(req.params).toEqual({ id: 7, choice: 'current', idempotencyKey: expect.any(String) });
    ws.serverSend({ type: 'res', id: req.id, ok: false, error: { code: 'CONFLICT', message: 'resolve conflict 7: memory: conflict: already resolved' } });
    await waitFor(() => expect(screen.getByTestId('conflict-detail').textContent).toContain('already resolved'));
    expect(screen.getByTestId('conflict-detail').textContent).not.toContain('CONFLICT');
  });
});

describe('audit view', () => {
  const entries = [
    { timestamp: '2026-03-01T10:00:00Z', operation: 'files', role: 'admin', target: 'memory/', result: 'allowed', reason: '3 listed, 0 hidden' },
    { timestamp: '2026-03-01T10:00:05Z', operation: 'get', role: 'writer', target: 'roles/code-expert/secret.md', result: 'denied', reason: 'rule does not grant read' },
  ];

  it('lists newest first, highlights denials, and filters through audit.tail', async () => {
    const { gw, ws } = connect();
    render(AuditView, { props: { gw, connected: true, refreshMs: 0 } });
    const done = new Set<string>();
    await waitFor(() => expect(answer(ws, 'audit.tail', { entries, corrupt: 0 }, done)).toEqual([{ n: 200, hideRoutine: true }]));
    await waitFor(() => expect(screen.getAllByTestId('audit-row')).toHaveLength(2));
    const rows = screen.getAllByTestId('audit-row');
    expect(rows[0].dataset.result).toBe('denied');
    expect(rows[0].classList.contains('denied')).toBe(true);
    expect(within(rows[0]).getByText('roles/code-expert/secret.md')).toBeTruthy();
    expect(rows[1].classList.contains('denied')).toBe(false);

    await fireEvent.change(screen.getByTestId('audit-result'), { target: { value: 'denied' } });
    await waitFor(() => expect(answer(ws, 'audit.tail', { entries: [entries[1]], corrupt: 1 }, done)).toEqual([{ n: 200, result: 'denied', hideRoutine: true }]));
    await waitFor(() => expect(screen.getAllByTestId('audit-row')).toHaveLength(1));
    expect(screen.getByTestId('audit-view').textContent).toContain('1 unreadable line skipped');

    await fireEvent.input(screen.getByTestId('audit-role'), { target: { value: 'writer' } });
    await waitFor(() => expect(answer(ws, 'audit.tail', { entries: [entries[1]], corrupt: 0 }, done)).toEqual([{ n: 200, role: 'writer', result: 'denied', hideRoutine: true }]), {
      timeout: 2000,
    });
    await fireEvent.click(screen.getByTestId('audit-refresh'));
    await waitFor(() => expect(answer(ws, 'audit.tail', { entries: [entries[1]], corrupt: 0 }, done)).toHaveLength(1));

    // Routine entries (the UI's own listings and reads) are hidden by default; the toggle asks for all.
    await fireEvent.click(screen.getByTestId('audit-routine'));
    await waitFor(() => expect(answer(ws, 'audit.tail', { entries, corrupt: 0 }, done)).toEqual([{ n: 200, role: 'writer', result: 'denied' }]));
    await waitFor(() => expect(screen.getAllByTestId('audit-row')).toHaveLength(2));
    await fireEvent.click(screen.getByTestId('audit-routine'));
    await waitFor(() => expect(answer(ws, 'audit.tail', { entries: [entries[1]], corrupt: 0 }, done)).toEqual([{ n: 200, role: 'writer', result: 'denied', hideRoutine: true }]));
  });

  it('auto-refreshes', async () => {
    const { gw, ws } = connect();
    render(AuditView, { props: { gw, connected: true, refreshMs: 50 } });
    await waitFor(() => expect(ws.sent.filter((f) => f.method === 'audit.tail').length).toBeGreaterThanOrEqual(3), { timeout: 2000 });
  });

  it('shows a FORBIDDEN answer as its message', async () => {
    const { gw, ws } = connect();
    render(AuditView, { props: { gw, connected: true, refreshMs: 0 } });
    await waitFor(() => expect(ws.lastRequest('audit.tail')).toBeDefined());
    ws.serverSend({ type: 'res', id: ws.lastRequest('audit.tail').id, ok: false, error: { code: 'FORBIDDEN', message: 'only admin may read the audit log' } });
    await waitFor(() => expect(screen.getByTestId('audit-view').textContent).toContain('only admin may read the audit log'));
  });
});

describe('memory search confidence', () => {
  it('shows the confidence of the answer, and says when results are weak', async () => {
    const { gw, ws } = connect();
    render(MemoryPanel, { props: { gw, connected: true, status: null } });
    const search = screen.getByTestId('memory-search-input') as HTMLInputElement;
    await fireEvent.input(search, { target: { value: 'dentist on Saturday' } });
    await fireEvent.keyDown(search, { key: 'Enter' });
    const done = new Set<string>();
    const hit = { path: 'memory/2026-04-01.md', startLine: 3, endLine: 5, score: 0.1412, snippet: 'the team', layer: 'role', role: 'main' };
    await waitFor(() => expect(answer(ws, 'memory.search', { results: [hit], confidence: { level: 'low', score: 0.1412 } }, done)).toHaveLength(1));
    await waitFor(() => expect(screen.getByTestId('search-confidence').dataset.level).toBe('low'));
    expect(screen.getByTestId('search-confidence').textContent).toContain('Confidence: low (0.14)');
    expect(screen.getByTestId('search-confidence').textContent).toContain('may not answer');
    expect(screen.getAllByTestId('memory-result')).toHaveLength(1);

    await fireEvent.input(search, { target: { value: 'nightly backup' } });
    await fireEvent.keyDown(search, { key: 'Enter' });
    await waitFor(() => expect(answer(ws, 'memory.search', { results: [{ ...hit, score: 0.71 }], confidence: { level: 'high', score: 0.71 } }, done)).toHaveLength(1));
    await waitFor(() => expect(screen.getByTestId('search-confidence').dataset.level).toBe('high'));
    expect(screen.getByTestId('search-confidence').textContent).toContain('Confidence: high (0.71)');
    expect(screen.queryByTestId('search-rewrite')).toBeNull();
  });

  it('says what the chat model\'s rewrite searched, and how long it took (en, zh)', async () => {
    const { gw, ws } = connect();
    render(MemoryPanel, { props: { gw, connected: true, status: null } });
    const search = screen.getByTestId('memory-search-input') as HTMLInputElement;
    await fireEvent.input(search, { target: { value: 'how do we stop the server filling its disk' } });
    await fireEvent.keyDown(search, { key: 'Enter' });
    const done = new Set<string>();
    const hit = { path: 'memory/2026-04-01.md', startLine: 3, endLine: 5, score: 0.52, snippet: 'logrotate', layer: 'role', role: 'main' };
    await waitFor(() => expect(answer(ws, 'memory.search', { results: [hit], confidence: { level: 'medium', score: 0.6 }, rewrittenQuery: 'logrotate disk full', rewriteMs: 734 }, done)).toHaveLength(1));
    await waitFor(() => expect(screen.getByTestId('search-rewrite').textContent).toBe('Also searched in the chat model\'s words: “logrotate disk full” (734 ms)'));
    setLang('zh');
    await waitFor(() => expect(screen.getByTestId('search-rewrite').textContent).toBe('也用聊天模型的说法搜索了：“logrotate disk full”（734 毫秒）'));
    resetLang();
  });

  it('shows nothing of a confidence an older gateway does not send', async () => {
    const { gw, ws } = connect();
    render(MemoryPanel, { props: { gw, connected: true, status: null } });
    const search = screen.getByTestId('memory-search-input') as HTMLInputElement;
    await fireEvent.input(search, { target: { value: 'backup' } });
    await fireEvent.keyDown(search, { key: 'Enter' });
    const done = new Set<string>();
    await waitFor(() => expect(answer(ws, 'memory.search', { results: [{ path: 'a.md', startLine: 1, endLine: 1, score: 0.5, snippet: 'x' }] }, done)).toHaveLength(1));
    await waitFor(() => expect(screen.getAllByTestId('memory-result')).toHaveLength(1));
    expect(screen.queryByTestId('search-confidence')).toBeNull();
  });
});
