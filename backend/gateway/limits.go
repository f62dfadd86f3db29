package gateway

import (
	"fmt"

	"github.com/coder/websocket"
)

// This file holds the limits that bound what clients can make the server
// hold (issue 14 items 1 and 2): the unauthenticated-connection caps and
// the outbound-buffer budget across all connections.

// preAuthPool names the budget an unauthenticated connection takes a slot
// of: connections through [Server.ExternalHandler] (the LAN listeners)
// and through [Server.Handler] on a loopback address (the desktop window,
// the CLI) have separate caps, so that connections from the LAN can never
// take the slots the person's own window and CLI need.
func preAuthPool(loopback bool) string {
	if loopback {
		return "loopback"
	}
	return "external"
}

// admitPreAuth takes an unauthenticated slot of pool for ip. It returns ""
// when admitted, else the reason for refusing (a cap is full). Each pool
// has Options.MaxUnauthenticated slots, Options.MaxUnauthenticatedPerIP of
// them per address.
func (s *Server) admitPreAuth(pool, ip string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.preAuth[pool] >= s.opts.MaxUnauthenticated {
		return fmt.Sprintf("too many connections waiting for their handshake (%d)", s.opts.MaxUnauthenticated)
	}
	key := pool + " " + ip
	if s.preAuthByIP[key] >= s.opts.MaxUnauthenticatedPerIP {
		return fmt.Sprintf("too many connections from %s waiting for their handshake (%d)", ip, s.opts.MaxUnauthenticatedPerIP)
	}
	s.preAuth[pool]++
	s.preAuthByIP[key]++
	return ""
}

// releasePreAuth gives back the slot admitPreAuth took of pool for ip.
func (s *Server) releasePreAuth(pool, ip string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.preAuth[pool] - 1; n > 0 {
		s.preAuth[pool] = n
	} else {
		delete(s.preAuth, pool)
	}
	key := pool + " " + ip
	if n := s.preAuthByIP[key] - 1; n > 0 {
		s.preAuthByIP[key] = n
	} else {
		delete(s.preAuthByIP, key)
	}
}

// numPreAuth reports the connections holding an unauthenticated slot.
func (s *Server) numPreAuth() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, k := range s.preAuth {
		n += k
	}
	return n
}

// TotalBuffered reports the bytes queued for sending across all open
// connections (bounded by Options.MaxTotalBufferedBytes).
func (s *Server) TotalBuffered() int64 { return s.totalQueued.Load() }

// shed closes the connections with the largest queues until the total is
// within Options.MaxTotalBufferedBytes. Closing discards a connection's
// queue, which gives its bytes back at once.
func (s *Server) shed() {
	s.shedMu.Lock()
	defer s.shedMu.Unlock()
	for s.totalQueued.Load() > s.opts.MaxTotalBufferedBytes {
		var worst *conn
		var most int64
		s.mu.RLock()
		for c := range s.all {
			if q := c.queuedBytes(); q > most {
				worst, most = c, q
			}
		}
		s.mu.RUnlock()
		if worst == nil {
			return
		}
		s.log.Warn("slow consumer disconnected", "connId", worst.id, "buffered", most,
			"totalBuffered", s.totalQueued.Load(), "totalLimit", s.opts.MaxTotalBufferedBytes)
		worst.closeWith(websocket.StatusPolicyViolation, slowConsumerReason(most, s.opts.MaxTotalBufferedBytes), false)
	}
}

// slowConsumerReason is the close reason of a connection shed for the
// budget (at most 123 bytes, the room in a close frame, for any figures).
func slowConsumerReason(queued, budget int64) string {
	return fmt.Sprintf("slow consumer: most queued (%d bytes) when the server's send budget of %d bytes was full", queued, budget)
}

// preAuthTooLargeReason is the close reason of a first frame over limit.
func preAuthTooLargeReason(limit int64) string {
	return fmt.Sprintf("first frame must be a connect request of at most %d bytes", limit)
}
