// The Nodes panel's state: requests, devices, presence, exec asks, and the invoke form's params.
import { describe, expect, it } from 'vitest';
import {
  approveParams,
  chosenScope,
  initialChoice,
  initialNodes,
  parseInvokeParams,
  reduceNodes,
  scopeRole,
  scopeRoles,
  toPairCode,
  toPairedDevice,
  toPairRequest,
  type NodesAction,
} from './nodes';

const req = (id: string, deviceId: string, extra: Record<string, unknown> = {}) => ({
  requestId: id,
  deviceId,
  displayName: 'Pixel',
  platform: 'Android',
  roles: ['operator', 'node'],
  commands: ['location.get', 'system.notify'],
  remoteIp: '127.0.0.2',
  createdAt: 1000,
  ...extra,
});

describe('reduceNodes', () => {
  it('keeps one request per device, removes it when resolved', () => {
    const acts: NodesAction[] = [
      { type: 'pending', payload: { pending: [req('r1', 'd1')] } },
      { type: 'requested', payload: { request: req('r2', 'd2') } },
      { type: 'requested', payload: { request: req('r3', 'd1', { kind: 'repair' }) } }, // d1 again: replaces r1
      { type: 'requested', payload: { request: { bogus: true } } },
    ];
    let s = acts.reduce(reduceNodes, initialNodes());
    expect(s.pending.map((r) => [r.requestId, r.kind])).toEqual([
      ['r2', 'new'],
      ['r3', 'repair'],
    ]);
    s = reduceNodes(s, { type: 'resolved', payload: { requestId: 'r2', decision: 'approved' } });
    expect(s.pending.map((r) => r.requestId)).toEqual(['r3']);
  });

  it('reads devices, presence (event or snapshot), nodes and exec asks', () => {
    let s = reduceNodes(initialNodes(), { type: 'devices', payload: { devices: [{ deviceId: 'd1', displayName: 'Pixel', roles: ['node'], connected: true, lastSeenAt: '2026-12-02T00:00:00Z', tokens: { node: 'revoked', x: 1 } }, {}] } });
    expect(s.devices).toHaveLength(1);
    expect(s.devices[0]).toMatchObject({ deviceId: 'd1', connected: true, lastSeenAt: Date.parse('2026-12-02T00:00:00Z'), tokens: { node: 'revoked' } });
    s = reduceNodes(s, { type: 'presence', payload: { entries: [{ instanceId: 'i1', host: 'Pixel', mode: 'node', connected: false }] } });
    expect(s.presence[0]).toMatchObject({ instanceId: 'i1', connected: false });
    s = reduceNodes(s, { type: 'presence', payload: [{ instanceId: 'i2' }] });
    expect(s.presence.map((p) => p.instanceId)).toEqual(['i2']);
    s = reduceNodes(s, { type: 'nodes', payload: { nodes: [{ nodeId: 'd1', commands: ['location.get'], connected: true }] } });
    expect(s.nodes[0]).toMatchObject({ nodeId: 'd1', commands: ['location.get'] });
    s = reduceNodes(s, { type: 'ask', payload: { id: 'x1', nodeId: 'n', displayName: 'box', command: ['rm', '-rf', '/tmp/x'], cwd: '/' } });
    s = reduceNodes(s, { type: 'ask', payload: { id: 'x1', command: ['again'] } });
    expect(s.asks).toHaveLength(1);
    s = reduceNodes(s, { type: 'asked', id: 'x1' });
    expect(s.asks).toHaveLength(0);
  });

  it('approves the ticked commands only', () => {
    const r = toPairRequest(req('r1', 'd1'))!;
    expect(approveParams(r, new Set(['system.notify']))).toEqual({ requestId: 'r1', roles: ['operator', 'node'], commands: ['system.notify'], scope: 'authenticated' });
    expect(approveParams(r, new Set(), 'role:main')).toEqual({ requestId: 'r1', roles: ['operator', 'node'], commands: [], scope: 'role:main' });
  });

  it('memory scopes: roles to choose, the first choice, what is sent', () => {
    expect(scopeRoles({ roles: [{ role: 'writer' }, { role: 'main' }, {}, { role: 'writer' }] })).toEqual(['main', 'writer']);
    expect(scopeRoles(null)).toEqual(['main']);
    expect(scopeRole('role:writer')).toBe('writer');
    expect(scopeRole('role:')).toBeNull();
    expect(scopeRole('admin')).toBeNull();
    const roles = ['main', 'writer'];
    expect(initialChoice('', roles)).toEqual({ pick: 'authenticated', everything: false });
    expect(initialChoice('role:writer', roles)).toEqual({ pick: 'role:writer', everything: false });
    expect(initialChoice('role:gone', roles)).toEqual({ pick: 'authenticated', everything: false });
    expect(initialChoice('admin', roles)).toEqual({ pick: 'authenticated', everything: false }); // never pre-ticked
    expect(chosenScope({ pick: 'role:writer', everything: false })).toBe('role:writer');
    expect(chosenScope({ pick: 'role:writer', everything: true })).toBe('admin');
    expect(toPairedDevice({ deviceId: 'd1' })?.scope).toBe('authenticated');
    expect(toPairedDevice({ deviceId: 'd1', scope: 'admin' })?.scope).toBe('admin');
    expect(toPairRequest(req('r1', 'd1', { kind: 'repair', scope: 'role:main' }))?.scope).toBe('role:main');
  });

  it('reads device.pair.code', () => {
    expect(toPairCode({})).toBeNull();
    expect(toPairCode({ code: 'ABCD2345', display: 'ABCD-2345', url: 'https://127.0.0.2:1/pair#c=x', expiresAt: 5 })).toMatchObject({ urls: ['https://127.0.0.2:1/pair#c=x'], display: 'ABCD-2345' });
  });
});

describe('parseInvokeParams', () => {
  it('accepts empty and JSON objects, refuses the rest with a reason', () => {
    expect(parseInvokeParams('  ')).toEqual({ ok: true, value: {} });
    expect(parseInvokeParams('{"title":"你好"}')).toEqual({ ok: true, value: { title: '你好' } });
    expect(parseInvokeParams('[1]')).toEqual({ ok: false, error: 'params must be a JSON object' });
    expect(parseInvokeParams('{bad')).toMatchObject({ ok: false });
  });
});
