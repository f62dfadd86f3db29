// Package nodehost is `atrium node` (issue 16 item 9, SPEC §7): a headless
// node host that lends another computer's commands to an Atrium gateway.
//
// Its state dir (default ~/.atrium-node, ATRIUM_NODE_HOME, --state) holds:
//
//   - device.key: the device's Ed25519 key, PEM "PRIVATE KEY" (PKCS #8), 0600.
//     Created once, never replaced or deleted by the host; a corrupt file is
//     an error (State, ErrCorrupt).
//   - node.json: the gateway it is paired with (URL, gateway id, pinned TLS
//     fingerprint) and its device tokens per role, 0600, written atomically
//     (Config).
//   - exec-approvals.json: what system.run may run (Approvals): mode
//     deny|allowlist|ask|full (default ask), the allowlist of executables,
//     the environment variables a caller may set, the timeout and the output
//     cap. A malformed file is an error that denies every run, never full.
//
// The Host connects over TLS pinned to the fingerprint it learned at first
// contact (the pairing URL, --fingerprint or an mDNS TXT record; an advertised
// fingerprint never replaces a pinned one), proves its key (device.SignConnect,
// payload v2), pairs with a setup code the first time, waits for approval,
// keeps the device token it is given and reconnects with it, with capped
// exponential backoff and jitter. A token the gateway no longer accepts
// (device_token_mismatch) is dropped from node.json — only the token — and
// the host reconnects with its proof alone, which asks the gateway for a
// repair; the key is kept.
//
// It serves node.invoke.request events with node.invoke.result:
// system.run (Runner, under the exec approvals; "ask" asks the person
// through node.exec.ask), system.which and system.notify. Events are taken
// on the gateway client's reader (inbox.go) and never dropped: at most
// Options.MaxConcurrent requests run, one more is answered at once
// UNAVAILABLE (retryable), and the other events (a rotated token, a
// pairing decision) wait apart from the requests. A connect refused
// rate_limited, or an upgrade answered 503, is retried after the wait the
// gateway gives. A paired host reports the person's last input
// (presence.update, Options.LastInput: Windows and macOS; unknown
// elsewhere).
package nodehost
