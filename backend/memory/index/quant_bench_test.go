package index

import "testing"

// BenchmarkQuantShortlist times one quantized shortlist (first stage over
// every vector, int8 re-rank of the shortlist) at 100,000 vectors of 384
// dims, the scale benchmark's 100k size.
func BenchmarkQuantShortlist(b *testing.B) {
	const dims, n = 384, 100000
	vs := clustered(1, n+16, 200, dims, 3)
	q := loadedQuant(dims, vs[:n])
	size := shortlistSize(n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q.shortlist(vs[n+i%16], size, nil)
	}
}

// BenchmarkScanSigns times the first-stage kernel alone over 100,000
// vectors of 384 dims: the portable Go and the one in use.
func BenchmarkScanSigns(b *testing.B) {
	const dims, n = 384, 100000
	words := (dims + 63) / 64
	codes := make([]uint64, n*words)
	for i := range codes {
		codes[i] = uint64(i+1) * 0x9E3779B97F4A7C15
	}
	qp := make([]uint64, qplaneStride*words)
	for i := range qp {
		qp[i] = uint64(i+7) * 0xBF58476D1CE4E5B9
	}
	score := make([]uint16, n)
	b.Run("go", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			scanSignsGo(codes, words, qp, score)
		}
	})
	b.Run(quantKernels(), func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			scanSigns(codes, words, qp, score)
		}
	})
}
