package retrieval

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	"github.com/atrium-dev/atrium/backend/memory"
)

// What a caller gets with the product's defaults (issue 15): besides the
// ranking at Depth chunks with no floor, every query is searched as an
// agent's memory_search is, with the default mode (hybrid), the default
// maxResults (memory.DefaultMaxResults) and the default floor (MinScore 0:
// the query's default floor), and once more with the default maxResults and
// no floor. Hit@k is then the share of questions with a judged relevant
// document among the documents of the first k results; Empty the share
// answered with an empty list.
//
// Absent questions are questions whose answer is not in the index searched:
//
//   - a set with several partitions (LoCoMo's conversations, a workspaces
//     folder) asks each partition up to AbsentPerPartition questions of the
//     next partition that has questions (in partition order, wrapping
//     around): another conversation's questions, whose people, places and
//     events this one does not hold;
//   - a set with one partition (LongMemEval, CMRC, DRCD) holds out the
//     judged documents of every HoldOutEvery-th evaluated question (at most
//     MaxHeldOut questions): after the ranking pass, those documents are
//     deleted from the temporary workspace, the index is synced, and the
//     held-out questions are asked again. (Another document may still
//     answer one of them: the figures are an upper bound of the noise.)
//
// Split: a question belongs to the held-out half when the FNV-1a hash of
// its id is odd. The default floor was calibrated on the other half
// (docs/BENCHMARKS.md); DefaultsReport gives the figures of both.
const (
	AbsentPerPartition = 100
	HoldOutEvery       = 10
	MaxHeldOut         = 300
)

// DefaultsReport is what the defaults give: for the evaluated questions,
// and for the absent ones.
type DefaultsReport struct {
	// MaxResults is the default maxResults the searches used.
	MaxResults int `json:"maxResults"`
	// All covers every evaluated question; HeldOut those of the held-out
	// half (see the package doc of this file).
	All     Answered `json:"all"`
	HeldOut Answered `json:"heldOut"`
	// Absent covers the absent questions (AbsentSource says where they
	// come from); AbsentHeldOut those of the held-out half.
	AbsentSource  string `json:"absentSource,omitempty"`
	Absent        Absent `json:"absent"`
	AbsentHeldOut Absent `json:"absentHeldOut"`
	// Groups are the answered figures of the held-out half by question
	// group (a judged set's "paraphrase zh", "direct en", …); omitted when
	// the questions have no group.
	Groups map[string]Answered `json:"groups,omitempty"`
}

// Answered are the figures of questions whose answer is in the index.
type Answered struct {
	N int `json:"n"`
	// Hit1, Hit5 and HitK (k = MaxResults) with the default floor; Empty
	// the share of empty answers; MeanResults the mean number of results.
	Hit1        float64 `json:"hit@1"`
	Hit5        float64 `json:"hit@5"`
	HitK        float64 `json:"hit@k"`
	Empty       float64 `json:"empty"`
	MeanResults float64 `json:"meanResults"`
	// NoFloor*: the same with no floor (same maxResults).
	NoFloorHit1 float64 `json:"noFloorHit@1"`
	NoFloorHit5 float64 `json:"noFloorHit@5"`
	NoFloorHitK float64 `json:"noFloorHit@k"`
	// Low is the share answered with confidence "low" (memory.Confidence),
	// High the share with "high".
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// Absent are the figures of questions whose answer is not in the index.
type Absent struct {
	N int `json:"n"`
	// Empty is the share answered with nothing (the more the better);
	// MeanResults the mean number of results returned.
	Empty       float64 `json:"empty"`
	MeanResults float64 `json:"meanResults"`
	// TopP50 and TopP90 are percentiles of the first result's score over
	// the questions that got one; NoFloorTopP50 / P90 the same with no
	// floor (over all questions).
	TopP50        float64 `json:"topP50"`
	TopP90        float64 `json:"topP90"`
	NoFloorTopP50 float64 `json:"noFloorTopP50"`
	NoFloorTopP90 float64 `json:"noFloorTopP90"`
	// Low and High are the shares answered with confidence "low" and
	// "high" (the more low the better).
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// answer is one question searched with the defaults, with and without the
// floor.
type answer struct {
	group           string
	heldOut, absent bool
	// hits[i]: the first i+1 results hold a relevant document (floor);
	// noFloor the same without the floor.
	hits, noFloor []bool
	n             int
	top, topNF    float64
	confidence    string
}

// heldOutHalf reports whether the question id is in the held-out half.
func heldOutHalf(id string) bool {
	h := fnv.New32a()
	h.Write([]byte(id))
	return h.Sum32()&1 == 1
}

// prefixHits returns, for each prefix of results, whether its documents
// hold a relevant one.
func (part *partition) prefixHits(res []memory.SearchResult, rel Judgments) []bool {
	out := make([]bool, len(res))
	hit := false
	for i := range res {
		if !hit {
			for _, id := range part.rank(res[i : i+1]) {
				if rel[id] > 0 {
					hit = true
				}
			}
		}
		out[i] = hit
	}
	return out
}

// askDefaults searches q with the defaults and with no floor; rel nil
// marks an absent question. It writes a dump line when dump is set.
func askDefaults(ctx context.Context, m *memory.Manager, part *partition, q query, absent bool, dump *dumper) (answer, error) {
	a := answer{group: q.group, heldOut: heldOutHalf(q.id), absent: absent}
	def, err := m.Search(ctx, memory.SearchOptions{Query: q.text})
	if err != nil {
		return a, fmt.Errorf("bench retrieval: query %s (defaults): %w", q.id, err)
	}
	nf, err := m.Search(ctx, memory.SearchOptions{Query: q.text, MinScore: -1})
	if err != nil {
		return a, fmt.Errorf("bench retrieval: query %s (no floor): %w", q.id, err)
	}
	a.n = len(def.Results)
	a.confidence = def.Confidence.Level
	if a.n > 0 {
		a.top = def.Results[0].Score
	}
	if len(nf.Results) > 0 {
		a.topNF = nf.Results[0].Score
	}
	if !absent {
		a.hits = part.prefixHits(def.Results, q.rel)
		a.noFloor = part.prefixHits(nf.Results, q.rel)
	}
	if dump != nil {
		rec := dumpLine{Part: part.name, ID: q.id, Text: q.text, Absent: absent, HeldOut: a.heldOut,
			Terms: nf.Query.Terms, Content: nf.Query.Content, Length: nf.Query.Length, Floor: def.Query.Floor, AnswerFloor: def.Query.AnswerFloor, Results: a.n,
			Signals: def.Signals, NoFloorSignals: nf.Signals, Confidence: a.confidence}
		for i, r := range nf.Results {
			rec.Scores = append(rec.Scores, r.Score)
			rec.Rel = append(rec.Rel, !absent && a.noFloor[i] && (i == 0 || !a.noFloor[i-1]))
		}
		dump.write(rec)
	}
	return a, nil
}

// summarise turns the answers into a DefaultsReport.
func summarise(ans []answer, maxResults int, source string) *DefaultsReport {
	r := &DefaultsReport{MaxResults: maxResults, AbsentSource: source}
	r.All = answered(ans, func(a answer) bool { return !a.absent })
	r.HeldOut = answered(ans, func(a answer) bool { return !a.absent && a.heldOut })
	r.Absent = absentFigures(ans, func(a answer) bool { return a.absent })
	r.AbsentHeldOut = absentFigures(ans, func(a answer) bool { return a.absent && a.heldOut })
	for _, a := range ans {
		if a.absent || !a.heldOut || a.group == "" {
			continue
		}
		if r.Groups == nil {
			r.Groups = map[string]Answered{}
		}
		if _, done := r.Groups[a.group]; !done {
			g := a.group
			r.Groups[g] = answered(ans, func(a answer) bool { return !a.absent && a.heldOut && a.group == g })
		}
	}
	return r
}

func hitAt(h []bool, k int) float64 {
	if len(h) == 0 {
		return 0
	}
	if h[min(k, len(h))-1] {
		return 1
	}
	return 0
}

func answered(ans []answer, keep func(answer) bool) Answered {
	var x Answered
	for _, a := range ans {
		if !keep(a) {
			continue
		}
		x.N++
		x.Hit1 += hitAt(a.hits, 1)
		x.Hit5 += hitAt(a.hits, 5)
		x.HitK += hitAt(a.hits, len(a.hits))
		x.NoFloorHit1 += hitAt(a.noFloor, 1)
		x.NoFloorHit5 += hitAt(a.noFloor, 5)
		x.NoFloorHitK += hitAt(a.noFloor, len(a.noFloor))
		if a.n == 0 {
			x.Empty++
		}
		x.Low += b2f(a.confidence == memory.ConfidenceLow)
		x.High += b2f(a.confidence == memory.ConfidenceHigh)
		x.MeanResults += float64(a.n)
	}
	if x.N > 0 {
		n := float64(x.N)
		x.Low, x.High = x.Low/n, x.High/n
		x.Hit1, x.Hit5, x.HitK, x.Empty, x.MeanResults = x.Hit1/n, x.Hit5/n, x.HitK/n, x.Empty/n, x.MeanResults/n
		x.NoFloorHit1, x.NoFloorHit5, x.NoFloorHitK = x.NoFloorHit1/n, x.NoFloorHit5/n, x.NoFloorHitK/n
	}
	return x
}

func absentFigures(ans []answer, keep func(answer) bool) Absent {
	var x Absent
	var tops, topsNF []float64
	for _, a := range ans {
		if !keep(a) {
			continue
		}
		x.N++
		if a.n == 0 {
			x.Empty++
		} else {
			tops = append(tops, a.top)
		}
		x.MeanResults += float64(a.n)
		x.Low += b2f(a.confidence == memory.ConfidenceLow)
		x.High += b2f(a.confidence == memory.ConfidenceHigh)
		topsNF = append(topsNF, a.topNF)
	}
	if x.N > 0 {
		x.Low /= float64(x.N)
		x.High /= float64(x.N)
		x.Empty /= float64(x.N)
		x.MeanResults /= float64(x.N)
	}
	x.TopP50, x.TopP90 = quantile(tops, 0.5), quantile(tops, 0.9)
	x.NoFloorTopP50, x.NoFloorTopP90 = quantile(topsNF, 0.5), quantile(topsNF, 0.9)
	return x
}

// b2f is 1 for true, 0 for false.
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// quantile is the nearest-rank q-quantile of xs (0 when empty).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// assignAbsent gives each partition its absent questions (see above) and
// returns where they come from.
func (p *plan) assignAbsent() string {
	if p.kind == "judged" {
		return "the set's absent questions, asked in their workspace"
	}
	if len(p.parts) > 1 {
		for i, part := range p.parts {
			for j := 1; j < len(p.parts); j++ {
				other := p.parts[(i+j)%len(p.parts)]
				if len(other.queries) > 0 {
					part.absent = other.queries[:min(AbsentPerPartition, len(other.queries))]
					break
				}
			}
		}
		return "questions of the next partition"
	}
	if len(p.parts) == 1 && p.parts[0].workspace == "" {
		part := p.parts[0]
		for i := 0; i < len(part.queries) && len(part.absent) < MaxHeldOut; i += HoldOutEvery {
			part.absent = append(part.absent, part.queries[i])
		}
		part.holdOut = true
		return fmt.Sprintf("every %dth question, its judged documents deleted", HoldOutEvery)
	}
	return ""
}

// removeHeldOut deletes the judged documents of the partition's absent
// questions from its temporary workspace ws.
func (part *partition) removeHeldOut(ws string) error {
	byID := make(map[string]string, len(part.paths))
	for p, id := range part.paths {
		byID[id] = p
	}
	for _, q := range part.absent {
		for id := range q.rel {
			if p, ok := byID[id]; ok {
				if err := os.Remove(filepath.Join(ws, filepath.FromSlash(p))); err != nil && !os.IsNotExist(err) {
					return fmt.Errorf("bench retrieval: hold out %s: %w", id, err)
				}
			}
		}
	}
	return nil
}

// dumpLine is one question of the calibration dump (Options.Dump): the
// scores of its no-floor results (default maxResults), which of them is the
// first relevant one, and what the index made of the query.
type dumpLine struct {
	Set     string  `json:"set"`
	Part    string  `json:"part"`
	ID      string  `json:"id"`
	Text    string  `json:"text"`
	Absent  bool    `json:"absent"`
	HeldOut bool    `json:"heldOut"`
	Terms   int     `json:"terms"`
	Content int     `json:"content"`
	Length  float64 `json:"length"`
	Floor   float64 `json:"floor"`
	// AnswerFloor: the score the best result had to reach (index.QueryInfo).
	AnswerFloor float64   `json:"answerFloor"`
	Results     int       `json:"results"`
	Scores      []float64 `json:"scores"`
	Rel         []bool    `json:"rel"`
	// Signals and NoFloorSignals are what the confidence of the default
	// and of the no-floor search came from (memory.ConfidenceSignals);
	// Confidence the default search's level.
	Signals        memory.ConfidenceSignals `json:"signals"`
	NoFloorSignals memory.ConfidenceSignals `json:"noFloorSignals"`
	Confidence     string                   `json:"confidence"`
}

// dumper writes dump lines (JSON Lines) from several goroutines.
type dumper struct {
	mu  sync.Mutex
	w   io.Writer
	set string
	err error
}

func (d *dumper) write(l dumpLine) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return
	}
	l.Set = d.set
	b, err := json.Marshal(l)
	if err == nil {
		_, err = d.w.Write(append(b, '\n'))
	}
	d.err = err
}
