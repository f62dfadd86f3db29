// Package mcpserve is Atrium's Model Context Protocol server (SPEC §8a,
// issue 26): memory for other tools (Claude Desktop, Cursor, Codex, Claude
// Code, any MCP client), on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk).
//
// A server acts as one role for its whole life: the role of the bearer
// token a client sent to the gateway's /mcp route (Tokens), or the role
// `atrium mcp --as ROLE` named over stdio ("" is `authenticated`, what a
// paired device without a role may do). It offers
//
//   - the tools memory_search, memory_get, memory_write and memory_note,
//     with the agents' defaults (backend/agent/tools: 6 results, a score
//     floor calibrated for the query's length, scores rounded to 3
//     decimals, snippets), base versions and conflicts as in the app;
//   - the memory files the role may read as resources (URI
//     "atrium:///" + workspace-relative path, text/markdown), with
//     notifications/resources/list_changed when the set changes and
//     notifications/resources/updated to subscribers when a file changes
//     (Server.Refresh);
//   - the prompt "memory_layers", which explains the layers.
//
// Every call goes through a Memory, which is where the ACL and the audit
// log apply: Local checks each access with the guard (backend/guard) as
// the role and writes one audit entry per decision; the CLI's adapter asks
// the running app's gateway with `as`, where the app's guard does the same.
// This package never decides access itself.
//
// Token secrets are never logged; only their SHA-256 is stored (state.db,
// table mcp_tokens).
package mcpserve
