// Package acl is Atrium's access-control engine for memory (SPEC §5.1): it
// parses the workspace's `memory/.acl` (YAML), decides whether a principal may
// read, write or collaborate on a memory file, supplies the documented
// defaults when the file is absent, canonicalises caller-supplied paths
// before any check, and keeps the current policy in force across reloads
// (Holder). It imports no other Atrium package; nothing is wired into the
// app yet.
//
// # Names
//
// Rules and Check name files relative to the workspace's `memory/` folder,
// as in the SPEC's example: `global/user-profile.md`, `roles/code-expert/*`,
// `sessions/*/*`. Name maps a workspace-relative path onto that namespace:
// `memory/<x>` is `<x>`. The OpenClaw single-agent layout (SPEC §4.1) keeps
// its daily logs in `memory/YYYY-MM-DD.md`, so they are simply the top-level
// names `YYYY-MM-DD.md`; its `MEMORY.md` (or `memory.md`) at the workspace
// root is named `MEMORY.md` (`memory.md`) too, the same name as a
// `memory/MEMORY.md` would have: both are role main's curated memory and are
// always governed by the same rule. The OpenClaw workspace's standing
// context files at the root (ContextFiles: `SOUL.md`, `IDENTITY.md`,
// `USER.md`, `AGENTS.md`, `TOOLS.md`, `HEARTBEAT.md`) keep their names the
// same way. Nothing else outside `memory/` is in the namespace.
//
// # Pattern language
//
// A pattern is a slash-separated name relative to `memory/`. Segments are
// literal text, except:
//
//   - `*` inside a segment matches any run of characters within that one
//     segment (never a `/`), including none: `roles/*/config.md`,
//     `sessions/*/*`, `2026-*.md`.
//   - `**` as a whole segment matches whole segments: at the end of a pattern
//     one or more (`global/**` matches every file below global/, not
//     `global` itself); elsewhere zero or more (`roles/**/notes.md` matches
//     `roles/notes.md` and `roles/a/b/notes.md`).
//
// `?`, `[`, `]`, `{` and `}` are refused (there is no other wildcard), as are
// empty, `.` and `..` segments, a leading or trailing `/`, backslashes,
// control characters, `**` inside a longer segment, `**/**`, and names that
// are not in Unicode NFC. Matching is case-sensitive and byte-exact (paths
// are NFC; see Canonicalize).
//
// Which rule decides (SPEC §5.1): a pattern without wildcards is an exact
// path and beats every pattern; among matching patterns the most specific
// wins, specificity being the number of literal characters (every character
// other than `*`, counted in Unicode code points, slashes included); equal
// specificity goes to the rule written earlier in the file. Only that one
// rule decides; if none matches, the answer is deny.
//
// The file `.acl` itself (`memory/.acl`) is reserved: only admin may read or
// write it, nobody may collaborate on it, and no rule can say otherwise (a
// rule for `.acl` is a parse error), so an agent can never edit its own
// permissions.
//
// # Principals
//
// A rule lists, per action, who is allowed (Principal describes the caller):
//
//   - a role name, e.g. `code-expert`: a caller with that Role;
//   - `*` or `all`: every role and admin;
//   - `authenticated`: every authenticated principal: every role, admin, and
//     principals with Authenticated set (paired devices);
//   - `$session_owner`: the role recorded as the owner of the session the
//     file belongs to (`sessions/<id>/...`), looked up through SessionOwners;
//     an unknown session, a missing lookup or a file outside `sessions/<id>/`
//     has no owner and the principal matches nobody (never assumed);
//   - `admin`: the person at the desktop (Principal.Admin). Admin is a
//     principal like any other, not a superuser: a rule that does not list
//     admin (or `*`, `all`, `authenticated`) does not grant admin anything.
//
// The zero Principal (anonymous) matches nothing. Role names (ValidateRole)
// are one NFC path segment without `*`, `/`, `\`, spaces, control or format
// characters, not starting with `.` or `$`, and not, in any letter case, one
// of the reserved words `admin`, `all`, `authenticated`.
//
// # Defaults
//
// When `memory/.acl` does not exist, Defaults is in force (SPEC §5.1 plus the
// decisions noted in its doc). When it exists, its rules alone are in force.
// A Holder never fails open: a malformed file keeps the last good policy,
// and if there never was one only admin is allowed anything (AdminOnly).
//
// # Errors
//
// Parse returns a *ParseError (line, column, reason), which also matches
// ErrInvalidACL with errors.Is. Canonicalize returns a *PathError that
// matches ErrInvalidPath.
package acl
