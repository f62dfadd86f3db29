package index

import "golang.org/x/sys/cpu"

// useAsmKernels: the assembly kernels need POPCNT (scanSignsAsm) and AVX2
// (dotInt8Asm).
var useAsmKernels = cpu.X86.HasPOPCNT && cpu.X86.HasAVX2

// scanSignsAsm is scanSignsGo for n ≥ 1 vectors of words ≥ 1 words.
//
//go:noescape
func scanSignsAsm(codes *uint64, n, words int, qp *uint64, score *uint16)

// dotInt8Asm is dotInt8Go over n dimensions, n a multiple of 32; it
// prefetches the n bytes at next.
//
//go:noescape
func dotInt8Asm(c *int8, q *int16, n int, next *int8) int32

func scanSigns(codes []uint64, words int, qp []uint64, score []uint16) {
	if !useAsmKernels || len(score) == 0 || words == 0 {
		scanSignsGo(codes, words, qp, score)
		return
	}
	_ = codes[len(score)*words-1] // bounds the assembly's reads
	_ = qp[qplaneStride*words-1]
	scanSignsAsm(&codes[0], len(score), words, &qp[0], &score[0])
}

func dotInt8Block(c []int8, q []int16, next []int8) int32 {
	n := len(c) &^ 31
	if !useAsmKernels || n == 0 {
		return dotInt8Go(c, q)
	}
	_ = q[len(c)-1]
	pf := &c[0]
	if len(next) >= n {
		pf = &next[0]
	}
	sum := dotInt8Asm(&c[0], &q[0], n, pf)
	if n < len(c) {
		sum += dotInt8Go(c[n:], q[n:len(c)])
	}
	return sum
}

// quantKernels names the implementation of the kernels in use.
func quantKernels() string {
	if useAsmKernels {
		return "amd64 POPCNT+AVX2"
	}
	return "go"
}
