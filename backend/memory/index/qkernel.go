package index

import "math/bits"

// The two inner loops of the quantized vector leg (quant.go), in portable
// Go. They are the reference: on amd64 with AVX2 and POPCNT the same
// functions run in assembly (qkernel_amd64.s), and TestQuantKernels checks
// that both give identical integers.
//
// Layouts:
//
//   - sign codes: words uint64 per vector, vector after vector;
//   - query planes (qplanes): for each word i, qPlanes+1 words — the
//     query's sign bits, then its magnitude bit planes 0..3 — so that one
//     vector's scan reads the planes in order;
//   - int8 codes: dims bytes per vector; the query as int16.

// qplaneStride is the number of query words per code word: the signs and
// the qPlanes magnitude planes.
const qplaneStride = 1 + qPlanes

// scanSignsGo writes, for each of the n vectors whose sign codes start at
// codes (words words each), the first-stage score
//
//	Σ_i Σ_b 2^b · popcount(agree_i ∧ plane_b,i),  agree_i = ¬(code_i ⊕ sign_i)
//
// into score[0:n]. qp holds words·qplaneStride words (see above). A score
// is at most 15·64·words, so it fits uint16 for up to 4,369 words (279,616
// dims).
func scanSignsGo(codes []uint64, words int, qp []uint64, score []uint16) {
	qp = qp[:qplaneStride*words]
	for s := range score {
		b := codes[s*words : s*words+words : s*words+words]
		sc := 0
		for i, x := range b {
			p := qp[qplaneStride*i : qplaneStride*i+qplaneStride : qplaneStride*i+qplaneStride]
			a := ^(x ^ p[0])
			sc += bits.OnesCount64(a&p[1]) + 2*bits.OnesCount64(a&p[2]) +
				4*bits.OnesCount64(a&p[3]) + 8*bits.OnesCount64(a&p[4])
		}
		score[s] = uint16(sc)
	}
}

// dotBlock is the most dimensions one int32 dot product may cover: with
// |q| ≤ 32767 and |c| ≤ 127 each product is below 2²², so the sum of 512
// of them stays below 2³¹ (TestQuantKernels checks the worst case).
const dotBlock = 512

// dotInt8Go returns Σ q[i]·c[i] over len(c) ≤ dotBlock dimensions.
func dotInt8Go(c []int8, q []int16) int32 {
	q = q[:len(c)]
	var a0, a1, a2, a3 int32
	i := 0
	for ; i+4 <= len(c); i += 4 {
		cc := c[i : i+4 : i+4]
		qq := q[i : i+4 : i+4]
		a0 += int32(qq[0]) * int32(cc[0])
		a1 += int32(qq[1]) * int32(cc[1])
		a2 += int32(qq[2]) * int32(cc[2])
		a3 += int32(qq[3]) * int32(cc[3])
	}
	for ; i < len(c); i++ {
		a0 += int32(q[i]) * int32(c[i])
	}
	return a0 + a1 + a2 + a3
}

// dotInt8 returns Σ q[i]·c[i] for codes c of any length (len(q) ≥ len(c)),
// summing blocks of dotBlock dimensions in 64 bits. next, when not nil, is
// the codes of a vector that will be scored soon: the assembly prefetches
// them into the cache meanwhile (a shortlist's vectors lie scattered over
// the whole copy, so each one is otherwise a wait on memory).
func dotInt8(c []int8, q []int16, next []int8) int64 {
	var sum int64
	for len(c) > 0 {
		n := min(len(c), dotBlock)
		var pf []int8
		if len(next) >= n {
			pf, next = next[:n], next[n:]
		}
		sum += int64(dotInt8Block(c[:n], q[:n], pf))
		c, q = c[n:], q[n:]
	}
	return sum
}
