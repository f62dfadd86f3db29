package index

import (
	"math/rand"
	"testing"
)

// The kernels in use (assembly on amd64 with POPCNT and AVX2) give the
// same integers as the portable Go ones, for every layout the copy can
// have: dims not a multiple of 64 or 32, one word, extreme codes and query
// values, long vectors split into dot blocks.
func TestQuantKernels(t *testing.T) {
	t.Logf("kernels: %s", quantKernels())
	rng := rand.New(rand.NewSource(7))
	for _, words := range []int{1, 2, 6, 7, 8, 9, 12, 48} { // ≤ 8: the AVX-512 scan where the CPU has it
		n := 1 + rng.Intn(300)
		codes := make([]uint64, n*words)
		for i := range codes {
			codes[i] = rng.Uint64()
		}
		codes[0] = 0
		if len(codes) > 1 {
			codes[1] = ^uint64(0)
		}
		qp := make([]uint64, qplaneStride*words)
		for i := range qp {
			qp[i] = rng.Uint64()
		}
		qp[1], qp[2], qp[3], qp[4] = ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0) // level 15 everywhere in word 0
		want, got := make([]uint16, n), make([]uint16, n)
		scanSignsGo(codes, words, qp, want)
		scanSigns(codes, words, qp, got)
		for s := range want {
			if want[s] != got[s] {
				t.Fatalf("words %d, vector %d: scanSigns %d, portable %d", words, s, got[s], want[s])
			}
		}
	}
	for _, dims := range []int{1, 31, 32, 33, 64, 100, 384, 768, 1536, 3072, 4096, 4097, 9000} {
		c := make([]int8, dims)
		q := make([]int16, dims)
		next := make([]int8, dims)
		for trial := 0; trial < 20; trial++ {
			for i := range c {
				switch trial {
				case 0: // the largest magnitudes: the sum's worst case
					c[i], q[i] = 127, 32767
				case 1:
					c[i], q[i] = -127, 32767
				default:
					c[i], q[i] = int8(rng.Intn(255)-127), int16(rng.Intn(65535)-32767)
				}
			}
			var want int64
			for i := range c {
				want += int64(c[i]) * int64(q[i])
			}
			if got := dotInt8(c, q, nil); got != want {
				t.Fatalf("dims %d trial %d: dotInt8 %d, want %d", dims, trial, got, want)
			}
			if got := dotInt8(c, q, next); got != want {
				t.Fatalf("dims %d trial %d: dotInt8 with prefetch %d, want %d", dims, trial, got, want)
			}
		}
	}
}
