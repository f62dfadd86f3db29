// Package talk is Talk (issue 27): the agents' ears and mouth. A page (the
// desktop UI, or a paired phone's UI connection) opens a talk bound to one
// chat session (talk.open), offers a WebRTC data channel labelled
// ChannelLabel (talk.offer; the wiring answers it with rtc.AcceptStream, so
// this package never imports pion) and streams the microphone's audio on
// it, one utterance at a time (U, A…, E). The gateway transcribes each
// utterance with an OpenAI-compatible /v1/audio/transcriptions server
// (STTClient), answers voice commands itself (ParseCommand: speed and
// voice, en and zh), and either sends the transcript as the person's chat
// message (continuous mode) or returns it for editing (push-to-talk).
// Every assistant answer in the session while the talk is open is cut
// into sentences as it streams (Cutter) and spoken: synthesised by an
// OpenAI-compatible /v1/audio/speech server or ElevenLabs (Synth, read as
// the body arrives) and sent back as S messages, or, with no speech server
// configured, sent as T text for the browser's speechSynthesis.
//
// Every wait has a bound: an utterance at most Limits.MaxUtteranceMs long
// (on the injected clock) and MaxUtteranceBytes large, a chunk at most
// MaxChunkBytes, a talk with no audio for Options.IdleTimeout is closed,
// every HTTP request to a speech server has Options.HTTPTimeout. A broken
// bound ends the talk (talk.ended with its reason) and nothing of the
// broken utterance is kept.
//
// The wire contract (methods, the channel's messages, events, settings)
// is docs/PROTOCOL.md "Talk (issue 27)".
package talk
