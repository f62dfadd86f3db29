package agent

// Reason codes of a permission question (PermissionRequest.ReasonCode):
// each names the sentence the person reads, so the UI says it in the
// person's language (SPEC §9: Chinese and English are both first-class);
// Reason keeps the English sentence as the fallback for a UI that does not
// know the code. The params each code carries (PermissionRequest.
// ReasonParams, all strings) are listed with it; docs/PROTOCOL.md
// "agent.permission" has the same list, and the UI's words for every code
// are checked by frontend/src/i18nscan.test.ts.
const (
	// ReasonCodeLevel: role wants level (levelWords) for ttl.
	// Params: role (may be ""), level ("L2", "L3"), ttlSeconds.
	ReasonCodeLevel = "level"
	// ReasonCodeExecRun: run command (the whole line) in dir?
	// Params: command, dir.
	ReasonCodeExecRun = "exec-run"
	// ReasonCodeNodeRun: run command on node? Params: command, node (its
	// name and id, or its id), and the details below when they apply.
	ReasonCodeNodeRun = "node-run"
	// ReasonCodeNodeRunCaps: run command on a node with these caps?
	// Params: command, caps (comma-separated), and the details below.
	ReasonCodeNodeRunCaps = "node-run-caps"
	// ReasonCodeCanvasEval: run JavaScript in the page presented on target
	// (inside its sandboxed frame only)? Params: target.
	ReasonCodeCanvasEval = "canvas-eval"
)

// Optional params of ReasonCodeNodeRun and ReasonCodeNodeRunCaps.
const (
	// ReasonParamFacing is a camera command's camera ("back", "front", or
	// as the model wrote it, cut to 16 characters).
	ReasonParamFacing = "facing"
	// ReasonParamArgv is system.run's command line (argv joined by spaces).
	ReasonParamArgv = "argv"
	// ReasonParamCwd is system.run's working directory.
	ReasonParamCwd = "cwd"
)
