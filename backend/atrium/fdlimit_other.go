//go:build !unix

package atrium

import "net"

// openFileLimit: no per-process descriptor limit to read here (0: unknown);
// the LAN listeners keep Options.MaxLANConns.
func openFileLimit() int { return 0 }

// connFD: sockets are not numbered lowest-free here (-1: unknown).
func connFD(net.Conn) int { return -1 }
