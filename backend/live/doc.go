// Package live is the gateway's live view (issue 22 item 3): the person's
// desktop watches a node's camera or screen as it happens.
//
// # Flow
//
// live.open {nodeId, source, facing?, fps?, maxWidth?} (the person, or an
// operator device whose memory scope is admin: Options.MayOpen) makes a
// view and runs the node command camera.live or screen.live {viewId, fps,
// maxWidth, facing, timesliceMs, maxChunkBytes} through node.invoke, so
// the command is declared by the node and approved at pairing like any
// other. The node starts its encoder (MediaRecorder on the phone page),
// opens an RTCPeerConnection with one ordered, reliable data channel
// labelled "atrium-live" and sends its SDP offer with node.live.offer
// {viewId, sdp}; the gateway answers it (Options.Accept: rtc.AcceptStream,
// the ICE rules of media transfers: host candidates on the served
// addresses, the node's candidates from its WebSocket's address only) only
// for the node the view was opened on, once. When the channel is open the
// node answers the invoke {mimeType, width, height} and live.open returns
// {viewId, mimeType, …}.
//
// # Framing on the channel
//
//	'C' chunk  node → gateway  uint32 BE seq, float64 BE capture time (the node's Unix ms when
//	                           its encoder handed the chunk over), then WebM bytes; the first
//	                           chunk starts with the stream's header (EBML, Segment, Info, Tracks)
//	'P' ping   gateway → node  JSON {t}: the gateway's Unix ms, every Options.PingInterval
//	'Q' pong   node → gateway  JSON {t, n}: the ping's t and the node's Unix ms as it answers
//	'X' stop   either way      JSON {reason, by}: the view ends; the sender closes after it
//
// Each chunk goes on at once to the viewer's connection only, as the event
// live.chunk {viewId, seq, data (base64), ageMs}; a player appends the
// data in order to a Media Source Extensions SourceBuffer. The gateway
// also follows the WebM stream (webm.go: element boundaries, Clusters, the
// video track's keyframes) and keeps a ring of the last 60 s of Clusters,
// always starting at a keyframe Cluster (ring.go); live.save {viewId,
// seconds} writes the header and the Clusters from the last keyframe
// Cluster at or before `seconds` ago into the media store as a WebM with
// command "live.save".
//
// # Latency
//
// The clocks of node and gateway differ, so the gateway measures their
// offset over the channel: offset = n − (t + t_back)/2 of the ping with the
// smallest round trip so far. ageMs in live.chunk is the gateway's now
// minus the chunk's capture time on the gateway's clock: how long the
// chunk took from the node's encoder through the data channel to the
// gateway. The desktop adds what it measures itself (its own receipt to
// the data's append, and the playback buffer ahead of the play head) and
// shows the sum: the delay of a chunk's newest frame from the node's
// encoder output to the screen. Not counted: the gateway → desktop
// WebSocket hop (same machine for the desktop app) and a frame's wait in
// the encoder for its chunk (up to one timeslice, 250 ms).
//
// # Bounds
//
// Options.MaxViews (4) in all and MaxViewsPerNode (1); MaxDuration (30
// min); IdleTimeout (10 s without a message from the node); MaxChunkBytes
// (256 KiB per message) and a WebM header ≤ 64 KiB, elements ≤ 16 MiB;
// the viewer: a view whose viewer's WebSocket has more than ViewerBacklog
// (4 MiB) waiting ends with viewer_slow, before the gateway would close the
// viewer's connection as a slow consumer; the ring: 60 s and RingBytes (64
// MiB). Every end sends live.ended {viewId, reason, by} to the viewer and
// 'X' to the node (unless the node ended it).
package live
