package live

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrStream: the node's bytes are not a WebM stream this package can
// follow (docs/PROTOCOL.md "Live view": an EBML header, a Segment, Info
// and Tracks, then Clusters).
var ErrStream = errors.New("not a WebM live stream")

// EBML element ids this parser acts on (Matroska specification).
const (
	idEBML          = 0x1A45DFA3
	idSegment       = 0x18538067
	idInfo          = 0x1549A966
	idTimecodeScale = 0x2AD7B1
	idTracks        = 0x1654AE6B
	idTrackEntry    = 0xAE
	idTrackNumber   = 0xD7
	idTrackType     = 0x83
	idCluster       = 0x1F43B675
	idTimecode      = 0xE7
	idSimpleBlock   = 0xA3
	idBlockGroup    = 0xA0
	idBlock         = 0xA1
	idRefBlock      = 0xFB
)

// topLevel reports whether id is a child of a Segment: one of them ends a
// Cluster of unknown size.
func topLevel(id uint32) bool {
	switch id {
	case idCluster, idInfo, idTracks, 0x1C53BB6B /* Cues */, 0x1254C367, /* Tags */
		0x114D9B74 /* SeekHead */, 0x1043A770 /* Chapters */, 0x1941A469 /* Attachments */ :
		return true
	}
	return false
}

// Parser bounds.
const (
	maxInit    = 64 << 10 // bytes before the first Cluster
	maxElement = 16 << 20 // one element inside a Cluster, or a known-size Cluster
	unknownLen = -1
)

// segKind is what a piece of the stream is.
type segKind int

const (
	segInit    segKind = iota // the EBML header, the Segment's header, Info, Tracks …: what a player needs first
	segCluster                // the start of a Cluster up to and including its first block
	segMore                   // the rest of the current Cluster (or a top-level element after it)
)

// segment is a whole piece of the stream, cut at element boundaries.
type segment struct {
	kind segKind
	data []byte
	key  bool  // segCluster: its first video block is a keyframe
	tcMs int64 // segCluster: the Cluster's time, ms
	end  int64 // the latest block time in data, ms (-1: none)
}

type parseState int

const (
	stHeader  parseState = iota // before the EBML header
	stSegment                   // before the Segment's header
	stTop                       // inside the Segment, between Clusters
	stCluster                   // inside a Cluster of unknown size
)

// webmParser follows a WebM byte stream as it arrives in arbitrary pieces
// (MediaRecorder chunks) and cuts it into segments. It holds at most one
// element (≤ maxElement) of unparsed bytes.
type webmParser struct {
	st      parseState
	buf     []byte
	init    []byte
	scaleNs int64 // TimecodeScale, ns per tick (default 1 ms)
	video   uint64
	tcMs    int64
	pending []byte // the current Cluster's bytes before its first block
	inClus  bool
	left    int64 // bytes left of a known-size Cluster (stCluster), unknownLen for unknown
}

func newWebmParser() *webmParser { return &webmParser{scaleNs: 1_000_000} }

// feed takes the next bytes of the stream and returns the segments that
// are complete. Errors wrap ErrStream.
func (p *webmParser) feed(b []byte) ([]segment, error) {
	p.buf = append(p.buf, b...)
	var out []segment
	for {
		id, size, hl, ok, err := elementHeader(p.buf)
		if err != nil {
			return out, err
		}
		if !ok {
			if len(p.buf) > maxElement {
				return out, fmt.Errorf("live: an element header of over %d bytes: %w", maxElement, ErrStream)
			}
			return out, nil
		}
		switch p.st {
		case stHeader:
			if id != idEBML || size == unknownLen {
				return out, fmt.Errorf("live: stream starts with element %x, not the EBML header: %w", id, ErrStream)
			}
			if !p.whole(hl, size) {
				return out, p.tooBig(hl, size)
			}
			p.addInit(p.take(hl + int(size)))
			p.st = stSegment
		case stSegment:
			if id != idSegment {
				return out, fmt.Errorf("live: element %x where the Segment belongs: %w", id, ErrStream)
			}
			p.addInit(p.take(hl)) // its children follow
			p.st = stTop
		case stTop:
			if id == idCluster {
				if p.init != nil && !p.inClus {
					out = append(out, segment{kind: segInit, data: p.init, end: -1})
					p.init = nil
					p.inClus = true
				}
				if size != unknownLen && size > maxElement {
					return out, p.tooBig(hl, size)
				}
				p.pending = append(p.pending[:0:0], p.take(hl)...)
				p.tcMs = 0
				p.left = size
				p.st = stCluster
				continue
			}
			if size == unknownLen {
				return out, fmt.Errorf("live: element %x of unknown size: %w", id, ErrStream)
			}
			if !p.whole(hl, size) {
				return out, p.tooBig(hl, size)
			}
			el := p.take(hl + int(size))
			if !p.inClus {
				switch id {
				case idInfo:
					p.info(el[hl:])
				case idTracks:
					p.tracks(el[hl:])
				}
				if len(p.init)+len(el) > maxInit {
					return out, fmt.Errorf("live: the stream's header is over %d bytes: %w", maxInit, ErrStream)
				}
				p.addInit(el)
				continue
			}
			out = append(out, segment{kind: segMore, data: el, end: -1})
		case stCluster:
			if p.left == 0 || (p.left == unknownLen && topLevel(id)) {
				p.endCluster(&out)
				p.st = stTop
				continue
			}
			if size == unknownLen {
				return out, fmt.Errorf("live: cluster child %x of unknown size: %w", id, ErrStream)
			}
			if !p.whole(hl, size) {
				return out, p.tooBig(hl, size)
			}
			n := hl + int(size)
			if p.left != unknownLen {
				if int64(n) > p.left {
					return out, fmt.Errorf("live: cluster child %x overruns its cluster: %w", id, ErrStream)
				}
				p.left -= int64(n)
			}
			el := p.take(n)
			body := el[hl:]
			blockAt, key, isBlock := int64(-1), false, false
			switch id {
			case idTimecode:
				p.tcMs = p.ms(int64(readUint(body)))
			case idSimpleBlock:
				blockAt, key, isBlock = p.block(body, true)
			case idBlockGroup:
				blockAt, key, isBlock = p.group(body)
			}
			if p.pending != nil {
				p.pending = append(p.pending, el...)
				if isBlock {
					out = append(out, segment{kind: segCluster, data: p.pending, key: key, tcMs: p.tcMs, end: blockAt})
					p.pending = nil
				} else if len(p.pending) > maxElement {
					return out, fmt.Errorf("live: a cluster without blocks: %w", ErrStream)
				}
				continue
			}
			out = append(out, segment{kind: segMore, data: el, end: blockAt})
			if p.left == 0 {
				p.endCluster(&out)
				p.st = stTop
			}
		}
	}
}

// endCluster flushes a Cluster that ended before any block.
func (p *webmParser) endCluster(out *[]segment) {
	if p.pending != nil {
		*out = append(*out, segment{kind: segMore, data: p.pending, end: -1})
		p.pending = nil
	}
}

func (p *webmParser) whole(hl int, size int64) bool {
	return size <= maxElement && len(p.buf) >= hl+int(size)
}

// tooBig is nil while an element may still complete, else the error.
func (p *webmParser) tooBig(hl int, size int64) error {
	if size > maxElement {
		return fmt.Errorf("live: element of %d bytes, at most %d: %w", size, maxElement, ErrStream)
	}
	_ = hl
	return nil
}

func (p *webmParser) take(n int) []byte {
	el := append([]byte(nil), p.buf[:n]...)
	p.buf = append(p.buf[:0], p.buf[n:]...)
	return el
}

func (p *webmParser) addInit(b []byte) { p.init = append(p.init, b...) }

func (p *webmParser) ms(ticks int64) int64 { return ticks * p.scaleNs / 1_000_000 }

// info reads TimecodeScale.
func (p *webmParser) info(b []byte) {
	children(b, func(id uint32, v []byte) {
		if id == idTimecodeScale {
			if s := int64(readUint(v)); s > 0 {
				p.scaleNs = s
			}
		}
	})
}

// tracks finds the first video track's number.
func (p *webmParser) tracks(b []byte) {
	children(b, func(id uint32, v []byte) {
		if id != idTrackEntry || p.video != 0 {
			return
		}
		var num, typ uint64
		children(v, func(id uint32, v []byte) {
			switch id {
			case idTrackNumber:
				num = readUint(v)
			case idTrackType:
				typ = readUint(v)
			}
		})
		if typ == 1 {
			p.video = num
		}
	})
}

// block reads a (Simple)Block: its time (ms) and, for a SimpleBlock of the
// video track, its keyframe flag. isBlock is false for another track's.
func (p *webmParser) block(b []byte, simple bool) (at int64, key, isBlock bool) {
	track, n := readVint(b)
	if n <= 0 || len(b) < n+3 {
		return -1, false, false
	}
	rel := int64(int16(binary.BigEndian.Uint16(b[n:])))
	at = p.tcMs + p.ms(rel)
	if p.video != 0 && track != p.video {
		return at, false, false
	}
	return at, simple && b[n+2]&0x80 != 0, true
}

// group reads a BlockGroup: a keyframe when it references no other block.
func (p *webmParser) group(b []byte) (at int64, key, isBlock bool) {
	at, refs := -1, false
	children(b, func(id uint32, v []byte) {
		switch id {
		case idBlock:
			at, _, isBlock = p.block(v, false)
		case idRefBlock:
			refs = true
		}
	})
	return at, isBlock && !refs, isBlock
}

// children calls f for each complete child element of b (known sizes).
func children(b []byte, f func(id uint32, v []byte)) {
	for len(b) > 0 {
		id, size, hl, ok, err := elementHeader(b)
		if err != nil || !ok || size == unknownLen || int64(len(b)-hl) < size {
			return
		}
		f(id, b[hl:hl+int(size)])
		b = b[hl+int(size):]
	}
}

// elementHeader parses an element's id (1–4 bytes, marker kept) and size
// (1–8 bytes; all ones = unknownLen). ok is false when b is too short.
func elementHeader(b []byte) (id uint32, size int64, hl int, ok bool, err error) {
	if len(b) == 0 {
		return 0, 0, 0, false, nil
	}
	il := vintLen(b[0])
	if il == 0 || il > 4 {
		return 0, 0, 0, false, fmt.Errorf("live: bad element id byte %#x: %w", b[0], ErrStream)
	}
	if len(b) < il+1 {
		return 0, 0, 0, false, nil
	}
	for _, c := range b[:il] {
		id = id<<8 | uint32(c)
	}
	sl := vintLen(b[il])
	if sl == 0 {
		return 0, 0, 0, false, fmt.Errorf("live: bad element size byte %#x: %w", b[il], ErrStream)
	}
	if len(b) < il+sl {
		return 0, 0, 0, false, nil
	}
	v, _ := readVint(b[il:])
	if v == 1<<(7*sl)-1 {
		return id, unknownLen, il + sl, true, nil
	}
	if v > 1<<56 {
		return 0, 0, 0, false, fmt.Errorf("live: element size %d: %w", v, ErrStream)
	}
	return id, int64(v), il + sl, true, nil
}

// vintLen is the length of a variable-size integer from its first byte (0: invalid).
func vintLen(c byte) int {
	for i := 0; i < 8; i++ {
		if c&(0x80>>i) != 0 {
			return i + 1
		}
	}
	return 0
}

// readVint reads a variable-size integer without its marker; n 0 when b is
// too short or invalid.
func readVint(b []byte) (v uint64, n int) {
	if len(b) == 0 {
		return 0, 0
	}
	n = vintLen(b[0])
	if n == 0 || len(b) < n {
		return 0, 0
	}
	v = uint64(b[0] & (0xFF >> n))
	for _, c := range b[1:n] {
		v = v<<8 | uint64(c)
	}
	return v, n
}

func readUint(b []byte) uint64 {
	var v uint64
	for _, c := range b[:min(len(b), 8)] {
		v = v<<8 | uint64(c)
	}
	return v
}
