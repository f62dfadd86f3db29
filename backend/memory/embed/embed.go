// Package embed defines the Embedder interface used by the memory index's
// vector leg (SPEC §4.2) and its three providers: the offline "builtin"
// embedder (default), "ollama" (Ollama's /api/embed) and "openai" (any
// OpenAI-compatible /v1/embeddings: OpenAI, llama.cpp server, LM Studio,
// vLLM). New builds one from Settings (config.json's "memory.embedding").
//
// # The HTTP providers (Ollama, OpenAI)
//
// Both share one client (HTTPOptions, documented defaults):
//
//   - Every returned vector is L2-normalised by the client, whatever the
//     provider does, so cosine scores are comparable across providers.
//   - Dims may be configured (then every vector of another length is
//     ErrDimsMismatch, with both sizes in the message) or 0: learned from
//     the first answer (Prober.Probe asks once), after which it is fixed.
//   - Inputs are checked against MaxInputTokens (chunk.EstimateTokens,
//     default 512) before anything is sent: a longer input is
//     ErrInputTooLong, never truncated. Blank inputs are not sent and yield
//     the zero vector. Calls are split into requests of at most BatchTokens
//     estimated tokens (default 8192) and MaxBatch inputs (default 64).
//   - Each request is bounded by Timeout (default 30 s). Network errors,
//     timeouts, 408, 429 and 5xx are retried (default 3 retries) with
//     exponential backoff and jitter (500 ms doubling up to 8 s), honouring
//     Retry-After (capped at 30 s); other 4xx answers are final. When all
//     attempts fail the error wraps ErrUnavailable, and for Cooldown
//     (default 5 s) further calls fail at once instead of waiting again.
//   - Errors name the provider, the URL and the HTTP status with a short
//     body excerpt (*StatusError); the API key never appears in them.
//     Answers that are not valid (malformed JSON, wrong vector count,
//     repeated or missing openai "index", NaN/Inf) are ErrBadResponse.
//
// Environment fallbacks (Settings, provider "openai" only): OPENAI_API_KEY
// when no key is configured, OPENAI_BASE_URL when no base URL is.
//
// # The builtin embedder
//
// Builtin is SPEC §4.2's "deterministic multilingual hashed n-gram embedding,
// honest about being lexical". It needs no model download and no network. It
// maps text to a fixed-size vector by feature hashing:
//
//   - Normalisation: full-width and half-width forms are folded
//     (golang.org/x/text/width: "ＡＰＩ" → "api", U+3000 → space, half-width
//     katakana → katakana), then everything is lower-cased.
//   - Words: maximal runs of letters and digits (any script except CJK, with
//     combining marks kept inside the word). Each word is a feature (an
//     English word, a–z only, by its Snowball stem: "painted" and
//     "painting" are one feature), and so is every character trigram of the
//     word as written, padded with boundary markers ("^go", "go$" for "go"),
//     which lets "pool" and "pooling" or "LGBT" and "LGBTQ" share features.
//   - CJK runs (Han, kana, hangul, bopomofo letters): every character is a
//     feature and so is every adjacent pair in the run, so "数据库" and
//     "据库" overlap and a one-character query still matches. Traditional
//     characters are folded to Simplified first (package hanzi, OpenCC's
//     data), so "記憶" and "记忆" have the same features.
//   - English function words (about 80: articles, pronouns, auxiliaries,
//     prepositions, question words — "the", "did", "when", "what") and a
//     few Chinese particles ("的", "了" ...) and their n-grams are
//     down-weighted to a quarter; there is no IDF (there is no corpus), and
//     without this list the function words of a question decide its cosine.
//   - Each distinct feature is hashed (64-bit FNV-1a over code points with a
//     fixed seed, then a murmur3 finaliser) to one of Dims buckets and a sign
//     (±1, the "hashing trick" sign that makes collisions cancel out on
//     average rather than pile up), weighted by kind and by 1+ln(tf), and the
//     vector is L2-normalised.
//
// What it is not: it knows nothing about meaning. There are no synonyms
// ("car" and "automobile" are unrelated), no stemming outside English
// beyond what shared trigrams give, no IDF (a word found in every note
// weighs as much as a rare name), and cross-language similarity exists only
// where strings match (an identifier, a product name, a number). Hashing
// 100+ features of a chunk into 384 buckets also adds collision noise (768
// dims measure about 0.03 nDCG@10 better on LoCoMo's vector leg, at twice
// the storage). It is a fast lexical similarity that complements BM25 with
// fuzzy (sub-word, stem, CJK n-gram) matching, which is why the memory
// engine weighs it below the keyword leg (Lexical, and package memory);
// semantic search needs the ollama or openai providers. Measured quality is
// in docs/BENCHMARKS.md.
//
// Stability: the model name is "hashed-ngram-v3" (v1 had no stems and only
// 23 function words; v2 did not fold Traditional Chinese to Simplified) and
// the same text gives
// bit-identical vectors in every process and run (a golden test pins this),
// and across platforms: the hash has a fixed seed, and term weights are
// quantised so that all sums are exact (see tfWeight). Any change to features, hashing, weights or normalisation must
// ship under a new model name, because the index caches embeddings by
// (provider, model, content hash). Characters assigned in future Unicode
// versions may change class when Go's Unicode tables are upgraded.
package embed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/snowballstem"
	"github.com/blevesearch/snowballstem/english"
	"golang.org/x/text/width"

	"github.com/atrium-dev/atrium/backend/memory/hanzi"
)

// Embedder turns texts into vectors for the vector leg of memory search
// (SPEC §4.2). Implementations must be safe for concurrent use.
type Embedder interface {
	// Provider names the backend: "builtin", "ollama" or "openai".
	Provider() string
	// Model names the model within the provider; builtin: "hashed-ngram-v3".
	Model() string
	// Dims is the length of every returned vector. An HTTP provider
	// configured without dims reports 0 until its first answer (see
	// Prober); from then on it is fixed.
	Dims() int
	// MaxInputTokens is the largest chunk.EstimateTokens of one input that
	// the provider accepts; callers size chunks and batches with it.
	// Builtin: 8192 (it embeds longer inputs too, without truncation);
	// ollama/openai: HTTPOptions.MaxInputTokens (default 512).
	MaxInputTokens() int
	// Embed returns one vector of Dims float32s per input, in input order,
	// each L2-normalised (unit length). An input with no features (empty,
	// blank, or punctuation only) yields the zero vector, which callers
	// must not store as a cosine-searchable vector. On error no vectors are
	// returned; a cancelled ctx yields an error wrapping ctx.Err().
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// ErrDimsMismatch reports that a provider returned vectors whose length
// differs from its declared Dims (SPEC §4.2: vectors of two dimensions never
// mix). Providers wrap it with the expected and actual sizes.
var ErrDimsMismatch = errors.New("embed: embedding dimensions mismatch")

// Builtin provider constants (SPEC §4.2).
const (
	// BuiltinProvider is Builtin.Provider().
	BuiltinProvider = "builtin"
	// BuiltinModel is Builtin.Model(); see the package doc on stability.
	BuiltinModel = "hashed-ngram-v3"
	// DefaultBuiltinDims is the vector length when BuiltinOptions.Dims <= 0.
	DefaultBuiltinDims = 384
	// BuiltinMaxInputTokens is Builtin.MaxInputTokens().
	BuiltinMaxInputTokens = 8192
)

// BuiltinOptions configures NewBuiltin.
type BuiltinOptions struct {
	// Dims is the vector length (number of hash buckets). Values <= 0 mean
	// DefaultBuiltinDims (384).
	Dims int
}

// Builtin is the offline hashed n-gram embedder described in the package
// doc. It is safe for concurrent use, and its vectors depend on the text
// alone; the zero value is ready to use and embeds as
// NewBuiltin(BuiltinOptions{}) does. NewBuiltin's embedder also remembers
// the word-feature hashes of the English words it has stemmed (at most
// maxStemMemo words, shared by concurrent calls): stemming was a quarter of
// its time, and words repeat.
type Builtin struct {
	dims  int
	stems *stemMemo // nil: each call keeps its own
}

// maxStemMemo bounds Builtin's memo of word-feature hashes: at most that
// many words of at most maxStemMemoLen bytes (under 100 bytes each).
const (
	maxStemMemo    = 1 << 17
	maxStemMemoLen = 48
)

// stemMemo maps an English word to its word-feature hash.
type stemMemo struct {
	mu    sync.RWMutex
	words map[string]uint64
}

func (m *stemMemo) get(w []byte) (uint64, bool) {
	m.mu.RLock()
	h, ok := m.words[string(w)]
	m.mu.RUnlock()
	return h, ok
}

func (m *stemMemo) put(w []byte, h uint64) {
	if len(w) > maxStemMemoLen {
		return
	}
	m.mu.Lock()
	if len(m.words) < maxStemMemo {
		m.words[string(w)] = h
	}
	m.mu.Unlock()
}

var _ Embedder = (*Builtin)(nil)

// NewBuiltin returns a builtin embedder producing opts.Dims-dimensional
// vectors.
func NewBuiltin(opts BuiltinOptions) *Builtin {
	d := opts.Dims
	if d <= 0 {
		d = DefaultBuiltinDims
	}
	return &Builtin{dims: d, stems: &stemMemo{words: map[string]uint64{}}}
}

// Lexical reports that the builtin embedder measures shared strings, not
// meaning (see the package doc); the memory engine weighs a lexical vector
// leg lower in hybrid search. Providers without this method are semantic.
func (b *Builtin) Lexical() bool { return true }

// Local reports that the builtin embedder computes its vectors in process,
// deterministically, in about 0.2 ms a chunk: faster than the memory index
// can store them in its embedding cache and read them back, so the memory
// engine does not cache them (index.Options.NoEmbeddingCache). Providers
// without this method are cached.
func (b *Builtin) Local() bool { return true }

// Provider returns "builtin".
func (b *Builtin) Provider() string { return BuiltinProvider }

// Model returns "hashed-ngram-v3".
func (b *Builtin) Model() string { return BuiltinModel }

// Dims returns the vector length.
func (b *Builtin) Dims() int {
	if b.dims <= 0 {
		return DefaultBuiltinDims
	}
	return b.dims
}

// MaxInputTokens returns 8192. Builtin embeds longer inputs as well; the
// budget only keeps batching uniform across providers.
func (b *Builtin) MaxInputTokens() int { return BuiltinMaxInputTokens }

// Embed implements Embedder. It checks ctx before every input, so a large
// batch stops promptly when ctx is cancelled. The returned vectors share one
// backing array but have capped capacity, so appending to one never
// overwrites another.
func (b *Builtin) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	d := b.Dims()
	out := make([][]float32, len(texts))
	backing := make([]float32, len(texts)*d)
	sc := scratch{acc: make([]float64, d), stems: map[string]uint64{}, shared: b.stems, env: snowballstem.NewEnv("")}
	for i, t := range texts {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("embed: builtin: stopped after %d of %d texts: %w", i, len(texts), err)
		}
		v := backing[i*d : (i+1)*d : (i+1)*d]
		sc.embed(t, v)
		out[i] = v
	}
	return out, nil
}

// scratch holds buffers reused across the inputs of one Embed call.
type scratch struct {
	feats []uint64  // feature hashes with kind flags in the low bits
	word  []rune    // current word, normalised
	wbuf  []byte    // current word as UTF-8, for the stopword check
	acc   []float64 // per-bucket accumulator, len == dims
	// stems caches the word-feature hash of each English word seen in
	// this Embed call (stemming allocates; a batch repeats its words).
	stems  map[string]uint64
	shared *stemMemo // the embedder's memo, if it has one
	env    *snowballstem.Env
}

// Feature kinds, stored in the low 2 bits of a feature; bit 2 marks a
// down-weighted (stopword) feature.
const (
	kindWord    = 0
	kindTrigram = 1
	kindCJKUni  = 2
	kindCJKBi   = 3
	flagStop    = 4
	flagMask    = 7
)

// kindWeight is the weight of one occurrence of each feature kind.
func kindWeight(flags uint64) float64 {
	var w float64
	switch flags & 3 {
	case kindWord:
		w = 1.0
	case kindTrigram:
		w = 0.5
	case kindCJKUni:
		w = 0.5
	default: // kindCJKBi
		w = 1.0
	}
	if flags&flagStop != 0 {
		w *= 0.25
	}
	return w
}

// tfWeight is 1+ln(tf) rounded to a multiple of 1/4096. The rounding makes
// the result independent of the last-bit accuracy of math.Log on different
// platforms (a test checks no tf up to 10^6 lies near a rounding boundary),
// and, since every kind weight is a power of two, keeps all accumulator sums
// exact and therefore independent of summation order and FMA.
func tfWeight(tf int) float64 {
	return math.Round((1+math.Log(float64(tf)))*4096) / 4096
}

// Hash parameters of hashed-ngram-v1 and v2. Never change them (see package doc).
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
	// Markers outside the rune range: feature-kind salts and word boundaries.
	saltBase  = 0x110000
	markBegin = 0x110010
	markEnd   = 0x110011
)

func mix(h uint64, r rune) uint64 { return (h ^ uint64(uint32(r))) * fnvPrime }

// finish applies the murmur3 64-bit finaliser so that every output bit
// depends on every input bit, then stores the kind flags in the low bits.
func finish(h, flags uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h&^flagMask | flags
}

func seed(kind uint64) uint64 { return mix(fnvOffset, rune(saltBase+kind)) }

// fold applies width folding and lower-casing to one rune.
func fold(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r
	}
	// Only U+3000 and U+FF01–U+FFEE have width foldings (checked by a test
	// over every rune), so skip the table lookup elsewhere.
	if r == 0x3000 || (r >= 0xFF01 && r <= 0xFFEF) {
		if f := width.LookupRune(r).Folded(); f != 0 {
			r = f
		}
		if r < utf8.RuneSelf {
			return fold(r)
		}
	}
	return unicode.ToLower(r)
}

// isCJKLetter reports whether r (already folded) is a Han, kana, hangul or
// bopomofo letter: the runes that form CJK runs.
func isCJKLetter(r rune) bool {
	switch {
	case r < 0x1100:
		return false
	case r >= 0x4E00 && r <= 0x9FFF, r >= 0x3400 && r <= 0x4DBF, r >= 0xAC00 && r <= 0xD7A3,
		r >= 0x3041 && r <= 0x3096, r >= 0x30A1 && r <= 0x30FA, r >= 0x30FC && r <= 0x30FF:
		return true
	}
	return unicode.IsLetter(r) && unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul, unicode.Bopomofo)
}

// isWordRune reports whether r (already folded, not CJK) continues a word;
// combining marks continue a word but do not start one.
func isWordRune(r rune, inWord bool) bool {
	if r < utf8.RuneSelf {
		return ('a' <= r && r <= 'z') || ('0' <= r && r <= '9')
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || (inWord && unicode.IsMark(r))
}

// isStopWord reports whether w (a lower-cased word) is an English function
// word (stopWords) that is down-weighted.
func isStopWord(w []byte) bool {
	return stopWords[string(w)]
}

// stopWords are the English function words (articles, pronouns, auxiliaries,
// prepositions, question words) of hashed-ngram-v2. Questions are full of
// them ("When did she go to the ..."), and without IDF they would decide
// the cosine: down-weighting them lifted LoCoMo vector-leg nDCG@10 from 0.22
// to 0.30 (docs/BENCHMARKS.md). Never change the list without a new model
// name.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an and are as at be been but by can could did do does for from
		had has have he her him his how i if in into is it its me my no not of on or our s she so t that the
		their them then there they this to too us was we were what when where which who whom why will with
		would you your`) {
		m[w] = true
	}
	return m
}()

// isStopCJK reports whether r is one of the very frequent Chinese function
// characters that are down-weighted (alone and in bigrams), in simplified
// and traditional forms (与/與, 这/這, 们/們 ...), with the question
// characters 什 and 哪 (什么/什麼, 哪个/哪個): hashed-ngram-v2 added the
// traditional forms and question characters, which lifted the zh-Hant DRCD
// vector leg's nDCG@10 from 0.69 to 0.71.
func isStopCJK(r rune) bool {
	switch r {
	case '的', '了', '是', '在', '和', '与', '及', '也', '都', '着', '之', '把', '被', '就', '而',
		'與', '著', '這', '这', '個', '个', '們', '们', '嗎', '吗', '麼', '么', '什', '哪':
		return true
	}
	return false
}

// embed writes the unit vector of text into v (len(v) == len(sc.acc)).
func (sc *scratch) embed(text string, v []float32) {
	sc.feats = sc.feats[:0]
	sc.word = sc.word[:0]
	var prevCJK rune // previous rune of the current CJK run (script-folded), 0 = none
	prevStop := false
	for _, r := range text {
		r = fold(r)
		if isCJKLetter(r) {
			sc.endWord()
			stop := isStopCJK(r)
			// One script for both (hashed-ngram-v3): 記憶 and 记忆 are the
			// same features. The stop test reads the rune as written.
			r = hanzi.FoldRune(r)
			sc.add(mix(seed(kindCJKUni), r), kindCJKUni, stop)
			if prevCJK != 0 {
				sc.add(mix(mix(seed(kindCJKBi), prevCJK), r), kindCJKBi, stop || prevStop)
			}
			prevCJK, prevStop = r, stop
			continue
		}
		prevCJK = 0
		if isWordRune(r, len(sc.word) > 0) {
			sc.word = append(sc.word, r)
			continue
		}
		sc.endWord()
	}
	sc.endWord()

	for i := range sc.acc {
		sc.acc[i] = 0
	}
	if len(sc.feats) == 0 {
		clear(v)
		return
	}
	slices.Sort(sc.feats)
	d := uint64(len(sc.acc))
	for i := 0; i < len(sc.feats); {
		f := sc.feats[i]
		j := i + 1
		for j < len(sc.feats) && sc.feats[j] == f {
			j++
		}
		w := kindWeight(f & flagMask)
		if tf := j - i; tf > 1 {
			w *= tfWeight(tf)
		}
		if f&(1<<31) != 0 {
			w = -w
		}
		sc.acc[((f>>32)*d)>>32] += w
		i = j
	}
	var norm float64
	for _, x := range sc.acc {
		norm += float64(x * x) // explicit conversion: no fused multiply-add
	}
	if norm == 0 { // every feature cancelled out: practically impossible
		clear(v)
		return
	}
	inv := 1 / math.Sqrt(norm)
	for i, x := range sc.acc {
		v[i] = float32(x * inv)
	}
}

// add records one occurrence of a feature whose hash state is h.
func (sc *scratch) add(h uint64, kind uint64, stop bool) {
	flags := kind
	if stop {
		flags |= flagStop
	}
	sc.feats = append(sc.feats, finish(h, flags))
}

// endWord emits the features of the current word, if any, and resets it.
func (sc *scratch) endWord() {
	w := sc.word
	if len(w) == 0 {
		return
	}
	sc.wbuf = sc.wbuf[:0]
	h := seed(kindWord)
	for _, r := range w {
		h = mix(h, r)
		sc.wbuf = utf8.AppendRune(sc.wbuf, r)
	}
	stop := isStopWord(sc.wbuf)
	if isASCIILetters(sc.wbuf) {
		h = sc.stemHash(sc.wbuf)
	}
	sc.add(h, kindWord, stop)
	// Trigrams of "^" + w + "$": len(w) of them.
	ts := seed(kindTrigram)
	prev2, prev1 := rune(markBegin), w[0]
	for i := 1; i <= len(w); i++ {
		cur := rune(markEnd)
		if i < len(w) {
			cur = w[i]
		}
		sc.add(mix(mix(mix(ts, prev2), prev1), cur), kindTrigram, stop)
		prev2, prev1 = prev1, cur
	}
	sc.word = sc.word[:0]
}

// stemHash returns the word-feature hash of an English word: the hash of
// its Snowball stem, so "paint", "painted" and "painting" share the word
// feature (their trigrams, of the surface form, overlap only in part).
func (sc *scratch) stemHash(w []byte) uint64 {
	if h, ok := sc.stems[string(w)]; ok {
		return h
	}
	if sc.shared != nil {
		if h, ok := sc.shared.get(w); ok {
			sc.stems[string(w)] = h
			return h
		}
	}
	sc.env.SetCurrent(string(w))
	english.Stem(sc.env)
	h := seed(kindWord)
	for _, r := range sc.env.Current() {
		h = mix(h, r)
	}
	sc.stems[string(w)] = h
	if sc.shared != nil {
		sc.shared.put(w, h)
	}
	return h
}

// isASCIILetters reports whether b is a non-empty run of a–z.
func isASCIILetters(b []byte) bool {
	for _, c := range b {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return len(b) > 0
}
