// An MCP client nobody here wrote (the npm @modelcontextprotocol/sdk) against Atrium's MCP server,
// for backend/cli's TestMCPNodeClient (issue 26). It acts as role --role, calls every tool, lists
// and reads resources and gets the prompt, and checks that the private file of role --other never
// shows. The workspace is backend/mcpserve/mcptest's (Seed). Prints one JSON line
// {ok, failures:[…]} and exits 1 on a failure.
//
//   node scripts/mcp-client.mjs --role writer --other coder --http http://127.0.0.1:PORT/mcp --token TOKEN
//   node scripts/mcp-client.mjs --role writer --other coder -- COMMAND ARG…   (stdio; env passed through)
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const argv = process.argv.slice(2);
const flags = argv.includes('--') ? argv.slice(0, argv.indexOf('--')) : argv;
const opt = (name) => {
  const i = flags.indexOf(name);
  return i >= 0 ? flags[i + 1] : undefined;
};
const role = opt('--role');
const other = opt('--other');
const PRIVATE = { writer: 'memory/roles/writer/secret.md', coder: 'memory/roles/coder/notes.md' };
const KEY = { writer: 'QK-7731', coder: 'QK-9000' };
const failures = [];
const fail = (what) => failures.push(what);

let transport;
if (argv.includes('--')) {
  const cmd = argv.slice(argv.indexOf('--') + 1);
  transport = new StdioClientTransport({ command: cmd[0], args: cmd.slice(1), env: { ...process.env }, stderr: 'inherit' });
} else {
  transport = new StreamableHTTPClientTransport(new URL(opt('--http')), {
    requestInit: { headers: { Authorization: `Bearer ${opt('--token')}` } },
  });
}

const client = new Client({ name: 'node-sdk-test', version: '1.0.0' });
const timeout = setTimeout(() => {
  console.log(JSON.stringify({ ok: false, failures: [...failures, 'timed out after 120 s'] }));
  process.exit(1);
}, 120_000);

const text = (res) => (res.content ?? []).map((c) => c.text ?? '').join('');
const leaks = (what, s) => {
  if (s.includes(KEY[other]) || s.includes(PRIVATE[other])) fail(`${what}: ${other}'s private file leaked`);
};
async function call(name, args) {
  const res = await client.callTool({ name, arguments: args });
  leaks(`${name} ${JSON.stringify(args)}`, JSON.stringify(res));
  return res;
}

try {
  await client.connect(transport);
  const tools = (await client.listTools()).tools.map((t) => t.name).sort();
  if (tools.join() !== 'memory_get,memory_note,memory_search,memory_write') fail(`tools ${tools}`);

  const own = await call('memory_search', { query: KEY[role] });
  if (own.isError || !own.structuredContent?.results?.some((h) => h.path === PRIVATE[role])) fail(`memory_search own key: ${text(own)}`);
  const theirs = await call('memory_search', { query: `${KEY[other]} key`, minScore: 0 });
  if (theirs.isError) fail(`memory_search other key: ${text(theirs)}`);

  const got = await call('memory_get', { path: PRIVATE[role] });
  if (got.isError || !got.structuredContent?.text?.includes(KEY[role])) fail(`memory_get own file: ${text(got)}`);
  for (const p of [PRIVATE[other], `memory/roles/${role}/../${other}/${PRIVATE[other].split('/').pop()}`, '/etc/passwd']) {
    const r = await call('memory_get', { path: p });
    if (!r.isError) fail(`memory_get ${p}: answered`);
  }

  const path = `memory/roles/${role}/node-client.md`;
  const w1 = await call('memory_write', { path, content: '# From node\n\nfirst\n', mode: 'replace' });
  const v1 = w1.structuredContent?.version;
  if (w1.isError || !v1) fail(`memory_write: ${text(w1)}`);
  const w2 = await call('memory_write', { path, content: '# From node\n\nsecond\n', mode: 'replace', baseVersion: v1 });
  if (w2.isError || w2.structuredContent?.conflict) fail(`memory_write on its base: ${text(w2)}`);
  const w3 = await call('memory_write', { path, content: '# From node\n\nstale\n', mode: 'replace', baseVersion: v1 });
  if (w3.isError || !w3.structuredContent?.conflict) fail(`memory_write on a stale base gave no conflict: ${text(w3)}`);
  const into = await call('memory_write', { path: `memory/roles/${other}/from-node.md`, content: 'x', mode: 'append' });
  if (!into.isError) fail(`memory_write into ${other}'s folder: written`);
  const note = await call('memory_note', { text: 'a note from the node client' });
  if (note.isError || !String(note.structuredContent?.path).startsWith(`memory/roles/${role}/`)) fail(`memory_note: ${text(note)}`);

  const uris = (await client.listResources()).resources.map((r) => r.uri);
  leaks('resources/list', JSON.stringify(uris));
  if (!uris.includes(`atrium:///${PRIVATE[role]}`)) fail(`resources/list lacks the own file: ${uris}`);
  const rr = await client.readResource({ uri: `atrium:///${PRIVATE[role]}` });
  if (!rr.contents?.[0]?.text?.includes(KEY[role])) fail('resources/read own file');
  try {
    const bad = await client.readResource({ uri: `atrium:///${PRIVATE[other]}` });
    fail(`resources/read ${other}'s file answered`);
    leaks('resources/read', JSON.stringify(bad));
  } catch {
    // refused: what we want
  }
  const pr = await client.getPrompt({ name: 'memory_layers' });
  if (!pr.messages?.[0]?.content?.text?.includes('global')) fail('prompts/get memory_layers');
} catch (e) {
  fail(`error: ${e?.message ?? e}`);
} finally {
  clearTimeout(timeout);
  await client.close().catch(() => {});
}
console.log(JSON.stringify({ ok: failures.length === 0, failures }));
process.exit(failures.length ? 1 : 0);
