package index

import "testing"

// BenchmarkAnalyzeCorpora analyses every paragraph of the corpora's
// workspaces and the first CMRC 2018 and DRCD passages as PutFile does
// (analyzeText, with the script fold); the figure is bytes a second.
func BenchmarkAnalyzeCorpora(b *testing.B) {
	texts := corpusTexts(b)
	s, err := Open(testOpts(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	n := 0
	for _, t := range texts {
		n += len(t)
	}
	b.SetBytes(int64(n))
	for b.Loop() {
		for _, t := range texts {
			s.analyzeText(t)
		}
	}
}
