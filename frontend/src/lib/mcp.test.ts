import { describe, expect, it } from 'vitest';
import { CLIENTS, mcpURL, shellWord, snippet, stdioArgs, tomlString } from './mcp';

describe('MCP client snippets', () => {
  const url = mcpURL('127.0.0.1:18789');
  const token = 'atrium_mcp_abc-DEF_123';

  it('gives Claude Desktop a stdio server acting as the role', () => {
    const s = JSON.parse(snippet('claudeDesktop', { role: 'writer', url }));
    expect(s).toEqual({ mcpServers: { atrium: { command: 'atrium', args: ['mcp', '--as', 'writer'] } } });
    expect(JSON.parse(snippet('claudeDesktop', { role: 'authenticated', url })).mcpServers.atrium.args).toEqual(['mcp']);
  });

  it('gives Cursor the /mcp URL with the token as a bearer header', () => {
    const s = JSON.parse(snippet('cursor', { role: 'writer', url, token }));
    expect(s.mcpServers.atrium).toEqual({ url: 'http://127.0.0.1:18789/mcp', headers: { Authorization: `Bearer ${token}` } });
  });

  it('gives Codex a TOML table, every string escaped', () => {
    expect(snippet('codex', { role: 'writer', url })).toBe('[mcp_servers.atrium]\ncommand = "atrium"\nargs = ["mcp", "--as", "writer"]\n');
    expect(snippet('codex', { role: '写手', url, command: 'C:\\Atrium\\atrium.exe' })).toContain('command = "C:\\\\Atrium\\\\atrium.exe"');
    expect(snippet('codex', { role: '写手', url })).toContain('"写手"');
    expect(tomlString('a"b\n')).toBe('"a\\"b\\n"');
  });

  it('gives Claude Code one shell line, HTTP with a token and stdio without', () => {
    expect(snippet('claudeCode', { role: 'writer', url, token })).toBe(
      `claude mcp add --transport http atrium http://127.0.0.1:18789/mcp --header 'Authorization: Bearer ${token}'`,
    );
    expect(snippet('claudeCode', { role: "o'brien", url })).toBe(`claude mcp add atrium -- atrium mcp --as 'o'\\''brien'`);
    expect(shellWord('a b')).toBe("'a b'");
  });

  it('has a snippet for every client, and defaults the address', () => {
    for (const c of CLIENTS) expect(snippet(c, { role: 'writer', url, token }).length).toBeGreaterThan(20);
    expect(mcpURL('')).toBe('http://127.0.0.1:18789/mcp');
    expect(stdioArgs('')).toEqual(['mcp']);
  });
});
