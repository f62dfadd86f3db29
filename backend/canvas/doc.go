// Package canvas is the gateway side of Canvas and A2UI (SPEC §8, issue
// 23; docs/PROTOCOL.md "Canvas and A2UI"): agents and the person show UI on
// the desktop ("desktop": every UI connection of the person) or on a node
// (the phone page).
//
//   - Validation (validate.go): every A2UI JSON line is checked against the
//     official schemas as shipped by @a2ui/web_core (Options.Schemas, laid
//     out as frontend.A2UISchemas(); compiled by santhosh-tekuri/jsonschema
//     v6, nothing loaded from the network). A line's version is told by its
//     shape (v0.9 lines say "version":"v0.9"; v0.8 lines are one of
//     surfaceUpdate, beginRendering, dataModelUpdate, deleteSurface);
//     anything else is "unknown A2UI version". The first invalid line stops
//     a push; the lines before it apply. Reasons name the line number and
//     the JSON pointer.
//   - Surfaces (surface.go, store.go) are kept per target, each owned by
//     the session that pushed it ("<profileId>/<sessionId>"; the person's
//     pushes: PersonSession), compacted — the latest begin line, the latest
//     of each component, the data-model updates no later one overwrote —
//     and persisted in state.db (tables canvas_*), so canvas.state replays
//     them to a UI that (re)connects and a node gets them again when it
//     connects (Connected). Bounds: Options.Max*.
//   - Delivery (service.go): the desktop gets canvas.update events and
//     answers canvas.rendered (the first answer acks); a node gets
//     node.invoke commands (canvas.a2ui.push, …) through package nodes. A
//     push answers once the target reported its render, at most RenderWait
//     later, else rendered:false with the reason.
//   - Pages (frame.go): canvas.present html is served at FramePath<token>
//     with FrameCSP (a CSP sandbox: an opaque origin, inline code only,
//     nothing fetched), shown in a sandboxed iframe; canvas.eval is posted
//     into that frame and runs there only. A url page is shown in the same
//     sandboxed iframe and cannot be evaluated in.
//   - Actions (actions.go): canvas.action is stored before it is
//     acknowledged, then becomes a user message (a visible turn) in the
//     owning session through Options.Chat, queued while that session
//     answers, sent after a restart if it was still waiting.
//
// The wiring (backend/atrium) builds the Service, registers its methods
// and FrameHandler on the gateway, reports connections and wakes Run when a
// chat run ends. Agents reach it through the canvas tool (agent/tools).
package canvas
