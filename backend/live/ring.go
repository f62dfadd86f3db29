package live

import (
	"errors"
	"fmt"
	"time"
)

// ErrNothingToSave: the ring holds no keyframe cluster yet (a view just
// opened, or a node whose encoder sends none).
var ErrNothingToSave = errors.New("no keyframe received yet")

// cluster is one Cluster of the stream as the ring keeps it.
type cluster struct {
	at   time.Time // when its first block reached the gateway
	key  bool      // it starts with a video keyframe
	tcMs int64     // its time in the stream, ms
	end  int64     // the latest block time in it, ms
	data [][]byte
	size int
}

// ring keeps the stream's header and its last clusters: those received in
// the last keep (plus the keyframe cluster before them, so that a clip of
// keep can start on a keyframe), at most maxBytes in all; it always starts
// at a keyframe cluster. Not safe for concurrent use.
type ring struct {
	keep     time.Duration
	maxBytes int
	init     []byte
	clusters []*cluster
	bytes    int
}

// add takes the parser's segments, received at now.
func (r *ring) add(segs []segment, now time.Time) {
	for _, s := range segs {
		switch s.kind {
		case segInit:
			r.init = s.data
		case segCluster:
			r.clusters = append(r.clusters, &cluster{at: now, key: s.key, tcMs: s.tcMs, end: max(s.end, s.tcMs), data: [][]byte{s.data}, size: len(s.data)})
			r.bytes += len(s.data)
		case segMore:
			if len(r.clusters) == 0 {
				continue // before the first cluster the ring kept: nothing to add it to
			}
			c := r.clusters[len(r.clusters)-1]
			c.data = append(c.data, s.data)
			c.size += len(s.data)
			c.end = max(c.end, s.end)
			r.bytes += len(s.data)
		}
	}
	r.trim(now)
}

// trim drops what is older than keep (keeping the last keyframe cluster
// at or before now-keep) and, over maxBytes, the oldest clusters up to the
// next keyframe one; clusters before the first keyframe cluster are of no
// use to a clip and go too.
func (r *ring) trim(now time.Time) {
	cut := now.Add(-r.keep)
	for len(r.clusters) > 0 {
		next := r.nextKey(1)
		drop := !r.clusters[0].key || // a clip cannot start here
			next >= 0 && !r.clusters[next].at.After(cut) || // a younger keyframe cluster still covers keep
			r.bytes > r.maxBytes
		if !drop {
			return
		}
		if next < 0 {
			next = len(r.clusters)
		}
		for _, c := range r.clusters[:next] {
			r.bytes -= c.size
		}
		r.clusters = append(r.clusters[:0], r.clusters[next:]...)
	}
}

// nextKey is the index of the first keyframe cluster at or after from, or -1.
func (r *ring) nextKey(from int) int {
	for i := from; i < len(r.clusters); i++ {
		if r.clusters[i].key {
			return i
		}
	}
	return -1
}

// last returns a playable WebM of about the last d of the stream: the
// header, then the clusters from the last keyframe cluster received at or
// before now-d (the oldest kept when none is that old). durationMs is the
// stream time it spans. ErrNothingToSave when there is no keyframe cluster.
func (r *ring) last(d time.Duration, now time.Time) (file []byte, durationMs int64, err error) {
	if r.init == nil || len(r.clusters) == 0 || !r.clusters[0].key {
		return nil, 0, ErrNothingToSave
	}
	cut := now.Add(-d)
	from := 0
	for i, c := range r.clusters {
		if c.key && !c.at.After(cut) {
			from = i
		}
	}
	size := len(r.init)
	for _, c := range r.clusters[from:] {
		size += c.size
	}
	file = make([]byte, 0, size)
	file = append(file, r.init...)
	end := r.clusters[from].tcMs
	for _, c := range r.clusters[from:] {
		for _, b := range c.data {
			file = append(file, b...)
		}
		end = max(end, c.end)
	}
	if len(file) != size {
		return nil, 0, fmt.Errorf("live: clip of %d bytes, expected %d", len(file), size)
	}
	return file, end - r.clusters[from].tcMs, nil
}
