// Package nodes is the gateway side of nodes (SPEC §7, issue 16): the
// presence list, the registry of connected node connections, node.invoke
// and the exec "ask" relay.
//
// Presence ([Presence]) has one entry per client instance (client.instanceId,
// else the connId) with the fields of SPEC §7; an entry stays 5 minutes after
// its last connection ended, and the table holds at most 200 (the oldest go).
// Every change is announced to operator connections as one event
// "presence" {entries:[…]} (the whole list), coalesced: changes within
// [Options.CoalesceDelay] make one event. The same list fills hello-ok
// snapshot.presence ([Service.PresenceSnapshot]).
//
// The registry lists node connections with their caps and the commands they
// may run (declared at connect ∩ approved at pairing; the gateway computes
// them), each connection its own: a device with several keeps them apart.
// A node's id is its deviceId, or "local:<connId>" for a node that
// connected with the local operator token.
//
// node.invoke picks the newest connection that may run the command and has
// fewer than [Options.MaxPendingInvokes] invokes waiting (none: UNAVAILABLE
// at once), sends it the event "node.invoke.request" {id, command,
// params, timeoutMs} and waits for "node.invoke.result" {id, ok, payload?,
// error?, media?} from that same connection; another connection's result for
// the id is refused (FORBIDDEN, audited). No answer within timeoutMs is
// TIMEOUT; the node's connection ending, or closing (the gateway can no
// longer send to it), is UNAVAILABLE ("node <name> disconnected") for every
// invoke waiting for it at once; a node's retryable UNAVAILABLE answer
// (busy) is UNAVAILABLE too. A command the node may not run is FORBIDDEN before anything
// is sent, and audited; every invoke is audited. Results up to
// [DefaultMaxResultBytes] travel inline; a result may carry a "media"
// object (reserved for transfers that do not fit a frame: camera, screen).
//
// The exec ask relay: a node whose exec approvals say "ask" calls
// node.exec.ask {command, cwd, timeoutMs}; admin connections get the event
// "exec.ask.requested" and one of them answers with exec.ask.answer; no answer
// in time is "deny".
//
// The package knows connections only through [Service.Connected] and
// [Service.Disconnected], which the wiring calls from the gateway's hooks.
package nodes
