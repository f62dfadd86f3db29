package pairing

import "time"

// maxKeys bounds the addresses the limiter remembers; beyond it an address
// with failures in the window is forgotten. The guessing bound does not
// rest on this limiter (a code locks after Options.MaxWrongTries, however
// many addresses try), so forgetting one only lets it try again sooner.
const maxKeys = 10000

// limiter counts failed setup codes per address key over a sliding window.
// There is deliberately no budget shared by all addresses: one would let
// anyone on the network block everyone (issue 21 item 3). Not safe for
// concurrent use (Service holds its lock).
type limiter struct {
	window time.Duration
	perKey int
	byKey  map[string][]time.Time
}

// prune drops the failures older than the window from ts.
func (l *limiter) prune(ts []time.Time, now time.Time) []time.Time {
	i := 0
	for i < len(ts) && now.Sub(ts[i]) >= l.window {
		i++
	}
	return ts[i:]
}

// blocked returns how long key must wait before its next try (0: it may
// try now).
func (l *limiter) blocked(key string, now time.Time) time.Duration {
	ts := l.prune(l.byKey[key], now)
	if len(ts) == 0 {
		delete(l.byKey, key)
		return 0
	}
	l.byKey[key] = ts
	if len(ts) < l.perKey {
		return 0
	}
	return ts[len(ts)-l.perKey].Add(l.window).Sub(now)
}

// fail records a failure of key at now.
func (l *limiter) fail(key string, now time.Time) {
	if _, ok := l.byKey[key]; !ok && len(l.byKey) >= maxKeys {
		for k, ts := range l.byKey {
			if ts = l.prune(ts, now); len(ts) == 0 {
				delete(l.byKey, k)
			}
		}
		if len(l.byKey) >= maxKeys {
			for k := range l.byKey { // forget one address (see maxKeys)
				delete(l.byKey, k)
				break
			}
		}
	}
	l.byKey[key] = append(l.byKey[key], now)
	if ts := l.byKey[key]; len(ts) > 2*l.perKey {
		l.byKey[key] = append([]time.Time(nil), ts[len(ts)-l.perKey:]...)
	}
}
