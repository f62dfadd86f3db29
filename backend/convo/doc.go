// Package convo decides what of a conversation goes into a model's context
// (SPEC §6 "Recency-first context merge", "Context economy", "Session
// lifecycle"). It is pure and deterministic: no I/O, no clock of its own (the
// caller passes times in), no globals. The chat service calls it while it
// builds a prompt; the model calls it needs (a summary) arrive as callbacks.
//
// # Messages
//
// A Message is a model.Message (role, content, tool calls, tool call id)
// plus the stable id and timestamp history gives it. Lengths called
// "characters" are Unicode code points (runes), never bytes: a Chinese
// character counts 1, as does "é". Token counts are the CJK-aware estimate of
// package memory/chunk (a CJK character ≈ 1 token, other text ≈ 4 characters
// a token) plus MessageOverheadTokens per message.
//
// # Tool turns are indivisible
//
// An assistant message with ToolCalls and the tool messages directly after
// it that answer those calls (matched by ToolCallID) form one unit. Every
// cut in this package (Fit's budget, Economy's compaction boundary) falls
// between units, so a call is never separated from its result. Repair
// enforces the pairing on its input first: a tool result that answers no
// call of the assistant message just before it is dropped, and an
// unanswered call (a run aborted mid-tool-call) is removed from its
// assistant message (the message itself stays when it has text).
//
// # Recency-first merge (Merge, Fit, BuildContext)
//
// With server history H_s and the client's recent history H_r,
// ω = Overlap(H_s, H_r) is the largest k such that the last k of H_s equal
// the first k of H_r, and Merge returns H_s ⊕ tail(H_r, |H_r| − ω). Two
// messages are equal when both carry an ID and the IDs are equal; when
// either lacks an ID they are equal when role, content and ToolCallID are.
// Fit then keeps, newest first, at most U = DefaultUserTurns (10) user
// turns, cuts each message at L = DefaultMessageChars (2000) characters and
// stops before the whole would exceed B = DefaultTotalChars (12000)
// characters, dropping the oldest.
//
// # Context economy (Economy, Pruner)
//
// Economy plans compaction near the model's window: the threshold is the
// window minus a reserve of DefaultReserveTokens (20000) tokens; a silent
// memory flush turn is due DefaultFlushSoftTokens (4000) tokens before the
// threshold, once per compaction, judged on a fresh token count. Compaction
// summarises older turns through a Summarizer callback and keeps recent
// turns whole; it never replaces a summary with an empty one and never
// leaves an orphaned tool call or result. Pruner trims old tool results in
// what is sent: results longer than DefaultSoftTrimChars (4000) characters
// keep DefaultHeadChars (1500) + DefaultTailChars (1500) around a marker,
// and the oldest are replaced by a placeholder; it returns a new slice and
// never changes the transcript it was given.
//
// # Session lifecycle (ResetPolicy, NewNote)
//
// ResetPolicy says when a session is due for a reset: daily at 04:00 local
// time (DefaultDailyAt), after N idle minutes, or whichever comes first.
// NewNote renders the last DefaultNoteMessages (15) messages of a session
// as the Markdown note `memory/roles/<r>/YYYY-MM-DD-<slug>.md` that `/new`
// saves; the caller writes it through memory.Write.
package convo
