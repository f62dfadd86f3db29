package gateway

import "net/http"

// MCPPath is the route of the MCP server's streamable HTTP transport
// (Options.MCP).
const MCPPath = "/mcp"

// DefaultMaxMCPBody is Options.MaxMCPBody's default, in bytes (1 MiB).
const DefaultMaxMCPBody = 1 << 20

// serveMCP hands a request to /mcp to Options.MCP after the same-origin
// check (a browser page of another origin never reaches the MCP server;
// clients that are not browsers send no Origin); 404 when MCP is not
// served. A refused request closes its connection, so that net/http does
// not read the unread body to reuse it (refuseOrigin).
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	switch {
	case s.opts.MCP == nil:
		http.NotFound(w, r)
	case !sameOrigin(r):
		s.log.Warn("gateway mcp request from another origin refused", "remote", r.RemoteAddr)
		refuseOrigin(w, "the MCP server takes no requests from other origins' pages")
	default:
		w.Header().Set("Cache-Control", "no-store")
		s.opts.MCP.ServeHTTP(w, r)
	}
}
