package index

import "golang.org/x/sys/cpu"

// useAsmKernels: the assembly kernels need POPCNT (scanSignsAsm) and AVX2
// (dotInt8Asm); use512 says scanSigns512 may run (AVX-512 F and VPOPCNTDQ,
// as on recent Xeons).
var (
	useAsmKernels = cpu.X86.HasPOPCNT && cpu.X86.HasAVX2
	use512        = useAsmKernels && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VPOPCNTDQ
)

// scanSigns512 is scanSignsAsm for words ≤ 8 with AVX-512; qz is the
// query in 5 rows of 8 words (signs, planes 0..3), mask = 2^words − 1.
//
//go:noescape
func scanSigns512(codes *uint64, n, words int, qz *uint64, mask int, score *uint16)

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
	if use512 && words <= 8 {
		var qz [qplaneStride * 8]uint64
		for i := 0; i < words; i++ {
			for r := 0; r < qplaneStride; r++ {
				qz[8*r+i] = qp[qplaneStride*i+r]
			}
		}
		scanSigns512(&codes[0], len(score), words, &qz[0], 1<<words-1, &score[0])
		return
	}
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
	if use512 {
		return "amd64 AVX-512 VPOPCNTQ+AVX2"
	}
	if useAsmKernels {
		return "amd64 POPCNT+AVX2"
	}
	return "go"
}
