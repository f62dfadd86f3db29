package pairing

import "time"

// maxKeys bounds the addresses the limiter remembers; beyond it the oldest
// failures are forgotten per address, while the global budget still counts
// every failure.
const maxKeys = 10000

// limiter counts failed setup codes per address key and in all, over a
// sliding window. Not safe for concurrent use (Service holds its lock).
type limiter struct {
	window         time.Duration
	perKey, global int
	byKey          map[string][]time.Time
	all            []time.Time
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
	l.all = l.prune(l.all, now)
	ts := l.prune(l.byKey[key], now)
	if len(ts) == 0 {
		delete(l.byKey, key)
	} else {
		l.byKey[key] = ts
	}
	var wait time.Duration
	if len(ts) >= l.perKey {
		wait = ts[len(ts)-l.perKey].Add(l.window).Sub(now)
	}
	if len(l.all) >= l.global {
		if w := l.all[len(l.all)-l.global].Add(l.window).Sub(now); w > wait {
			wait = w
		}
	}
	return wait
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
			for k := range l.byKey { // forget one address; the global budget still holds
				delete(l.byKey, k)
				break
			}
		}
	}
	l.byKey[key] = append(l.byKey[key], now)
	l.all = append(l.all, now)
	if len(l.all) > 2*l.global {
		l.all = append([]time.Time(nil), l.all[len(l.all)-l.global:]...)
	}
	if ts := l.byKey[key]; len(ts) > 2*l.perKey {
		l.byKey[key] = append([]time.Time(nil), ts[len(ts)-l.perKey:]...)
	}
}
