// MCP clients (issue 26, SPEC §8a): the tokens of the gateway's /mcp (mcp.token.create/list/revoke,
// the person at this machine only) and, for each client program, the exact text to paste into its
// settings. Clients that start a command get `atrium mcp --as ROLE` (stdio, no token); clients that
// speak HTTP get the /mcp address with the token as a bearer header.

/** One client's token as mcp.token.list shows it (times in Unix ms, 0 = never). */
export interface TokenInfo {
  id: string;
  name: string;
  role: string;
  createdMs: number;
  lastUsedMs: number;
  revokedMs?: number;
}

/** What a snippet needs: the role, the /mcp URL, the token (HTTP clients), the server's name. */
export interface SnippetInput {
  role: string;
  url: string;
  token?: string;
  name?: string;
  command?: string;
}

/** The clients Settings shows a snippet for, in order. */
export const CLIENTS = ['claudeDesktop', 'cursor', 'codex', 'claudeCode'] as const;
export type Client = (typeof CLIENTS)[number];

/** The /mcp URL of a gateway address ("127.0.0.1:18789"). */
export function mcpURL(addr: string): string {
  return `http://${addr || '127.0.0.1:18789'}/mcp`;
}

/** The stdio arguments: `mcp`, and `--as ROLE` unless the role is authenticated. */
export function stdioArgs(role: string): string[] {
  return role && role !== 'authenticated' ? ['mcp', '--as', role] : ['mcp'];
}

/** A TOML basic string (quotes, backslashes and control characters escaped). */
export function tomlString(s: string): string {
  return (
    '"' +
    s.replace(/[\\"\u0000-\u001f\u007f]/g, (c) => {
      switch (c) {
        case '\\':
          return '\\\\';
        case '"':
          return '\\"';
        case '\n':
          return '\\n';
        case '\t':
          return '\\t';
        default:
          return '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0');
      }
    }) +
    '"'
  );
}

/** A POSIX shell word, single-quoted when it needs to be. */
export function shellWord(s: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/**
 * The snippet for one client: Claude Desktop's claude_desktop_config.json (stdio), Cursor's
 * ~/.cursor/mcp.json (HTTP with the token), Codex's ~/.codex/config.toml (stdio), and a
 * `claude mcp add` line for Claude Code (HTTP with the token; stdio when there is none).
 */
export function snippet(client: Client, i: SnippetInput): string {
  const name = i.name || 'atrium';
  const command = i.command || 'atrium';
  const args = stdioArgs(i.role);
  const bearer = `Bearer ${i.token ?? 'TOKEN'}`;
  switch (client) {
    case 'claudeDesktop':
      return JSON.stringify({ mcpServers: { [name]: { command, args } } }, null, 2);
    case 'cursor':
      return JSON.stringify({ mcpServers: { [name]: { url: i.url, headers: { Authorization: bearer } } } }, null, 2);
    case 'codex':
      return `[mcp_servers.${name}]\ncommand = ${tomlString(command)}\nargs = [${args.map(tomlString).join(', ')}]\n`;
    case 'claudeCode':
      return i.token
        ? `claude mcp add --transport http ${shellWord(name)} ${shellWord(i.url)} --header ${shellWord('Authorization: ' + bearer)}`
        : `claude mcp add ${shellWord(name)} -- ${[command, ...args].map(shellWord).join(' ')}`;
  }
}
