// Package worker runs agent profile instances as separate OS processes
// (SPEC §3 "Gateway ↔ agent worker", SPEC §6 "Profile = template +
// instances").
//
// The parent (the gateway process) and a worker (`atrium worker --profile
// <id> --instance <k>`, the same binary re-executed) speak line-delimited
// JSON over the worker's stdin/stdout; the worker logs to stderr. Every line
// is one [Msg] `{type, id, profileId, sessionId, payload, ts}`
// (docs/PROTOCOL.md, "Worker line protocol").
//
// The pieces:
//   - [Reader] and [Writer]: the line codec. A line of up to
//     [ReaderOptions.MaxLineBytes] (default [DefaultMaxLineBytes], 64 MiB)
//     is read; a longer one is read to its end, discarded and reported as
//     [ErrLineTooLong]; a line that is not a JSON message is reported as
//     [ErrMalformed]. Neither stops the reader.
//   - [Serve]: the worker side: reads `run`, `cancel`, `ping` requests and
//     writes `ready`, `heartbeat`, `thinking`, `chunk`, `final`, `error`,
//     `cancelled`, `pong` events. A run is one streaming model call through
//     package model.
//   - [Supervisor]: the parent side of one instance: starts the worker,
//     watches it (exit = crashed, no line for HangTimeout = hung, bad lines =
//     protocol violations), reports every change as a [Status], restarts it
//     with capped exponential backoff and stops it gracefully.
//   - [Pool]: the light profile index scanned at start-up and the running
//     instances (`Spawn`, `Stop`, `List`).
package worker
