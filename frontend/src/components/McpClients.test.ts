// Settings → MCP clients against a scripted gateway: the tokens listed with their role and last use,
// a new token shown once with the snippets that carry it, a revoke sent; English and Chinese.
import { beforeEach, describe, expect, it } from 'vitest';
import { fireEvent, render, screen, waitFor } from '@testing-library/svelte';
import McpClients from './McpClients.svelte';
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

const used = { id: 'a1', name: 'Cursor', role: 'writer', createdMs: 1_700_000_000_000, lastUsedMs: 1_700_000_100_000 };

beforeEach(() => {
  FakeWebSocket.reset();
  resetLang();
});

describe('settings: MCP clients', () => {
  it('creates a token for a role, shows it once with the snippets, lists and revokes tokens', async () => {
    const { gw, ws } = connect();
    const done = new Set<string>();
    render(McpClients, { gw, connected: true, addr: '127.0.0.1:18789' });
    await waitFor(() => expect(ws.answerAll('mcp.token.list', { tokens: [used] }, done)).toBeGreaterThan(0));
    ws.answerAll('roles.list', { roles: [{ role: 'main' }, { role: 'writer' }] }, done);
    await waitFor(() => expect(screen.getAllByTestId('mcp-token-row')).toHaveLength(1));
    expect(screen.getByTestId('mcp-snippet-claudeDesktop').textContent).toContain('"mcp"');

    await fireEvent.click(screen.getByTestId('mcp-create'));
    expect(screen.getByTestId('mcp-error').textContent).toContain('name');
    await fireEvent.input(screen.getByTestId('mcp-name'), { target: { value: 'Claude Code' } });
    await waitFor(() => expect((screen.getByTestId('mcp-role') as HTMLSelectElement).options.length).toBe(3));
    await fireEvent.change(screen.getByTestId('mcp-role'), { target: { value: 'writer' } });
    await fireEvent.click(screen.getByTestId('mcp-create'));
    await waitFor(() => expect(ws.lastRequest('mcp.token.create')).toBeTruthy());
    expect(ws.lastRequest('mcp.token.create').params).toMatchObject({ name: 'Claude Code', role: 'writer' });
    const secret = 'atrium_mcp_SECRET';
    ws.answerAll('mcp.token.create', { token: secret, info: { ...used, id: 'b2', name: 'Claude Code', lastUsedMs: 0 } }, done);
    await waitFor(() => expect(screen.getByTestId('mcp-token').textContent).toBe(secret));
    expect(screen.getByTestId('mcp-snippet-cursor').textContent).toContain(`Bearer ${secret}`);
    expect(screen.getByTestId('mcp-snippet-claudeCode').textContent).toContain('claude mcp add --transport http atrium http://127.0.0.1:18789/mcp');
    expect(screen.getByTestId('mcp-snippet-codex').textContent).toContain('args = ["mcp", "--as", "writer"]');
    expect(screen.getByTestId('mcp-snippet-claudeDesktop').textContent).not.toContain(secret);

    await fireEvent.click(screen.getByText('Revoke'));
    await waitFor(() => expect(ws.lastRequest('mcp.token.revoke')?.params).toMatchObject({ id: 'a1' }));
  });

  it('speaks Chinese', async () => {
    setLang('zh');
    const { gw, ws } = connect();
    const done = new Set<string>();
    render(McpClients, { gw, connected: true, addr: '127.0.0.1:18789' });
    await waitFor(() => expect(ws.answerAll('mcp.token.list', { tokens: [] }, done)).toBeGreaterThan(0));
    await waitFor(() => expect(screen.getByText('还没有令牌。')).toBeTruthy());
    expect(screen.getByText('MCP 客户端')).toBeTruthy();
    expect(screen.getByTestId('mcp-create').textContent).toBe('创建令牌');
  });
});
