#include "textflag.h"

// func scanSignsAsm(codes *uint64, n, words int, qp *uint64, score *uint16)
//
// For each vector: sc = Σ_i Σ_b 2^b·POPCNT(agree ∧ plane_b), agree =
// ¬(code ⊕ sign); see scanSignsGo.
TEXT ·scanSignsAsm(SB), NOSPLIT, $0-40
	MOVQ codes+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ words+16(FP), DX
	MOVQ qp+24(FP), R8
	MOVQ score+32(FP), DI

slot:
	XORQ AX, AX
	MOVQ R8, R9
	MOVQ DX, R10

word:
	MOVQ    (SI), R11
	XORQ    (R9), R11
	NOTQ    R11
	MOVQ    R11, R12
	ANDQ    8(R9), R12
	POPCNTQ R12, R12
	ADDQ    R12, AX
	MOVQ    R11, R13
	ANDQ    16(R9), R13
	POPCNTQ R13, R13
	LEAQ    (AX)(R13*2), AX
	MOVQ    R11, R12
	ANDQ    24(R9), R12
	POPCNTQ R12, R12
	LEAQ    (AX)(R12*4), AX
	ANDQ    32(R9), R11
	POPCNTQ R11, R11
	LEAQ    (AX)(R11*8), AX
	ADDQ    $8, SI
	ADDQ    $40, R9
	DECQ    R10
	JNZ     word

	MOVW AX, (DI)
	ADDQ $2, DI
	DECQ CX
	JNZ  slot
	RET

// func dotInt8Asm(c *int8, q *int16, n int, next *int8) int32
//
// Σ q[i]·c[i] over n dimensions, n a multiple of 32: VPMOVSXBW widens 16
// codes to int16, VPMADDWD multiplies them with the query and adds
// neighbouring products into 8 int32 lanes. The n bytes at next (the codes
// of a vector to be scored soon) are prefetched meanwhile.
TEXT ·dotInt8Asm(SB), NOSPLIT, $0-36
	MOVQ  c+0(FP), SI
	MOVQ  q+8(FP), DI
	MOVQ  n+16(FP), CX
	MOVQ  next+24(FP), R8
	MOVQ  CX, R9
	ADDQ  R8, R9

fetch:
	PREFETCHT0 (R8)
	ADDQ       $64, R8
	CMPQ       R8, R9
	JB         fetch

	SHRQ  $5, CX
	VPXOR Y0, Y0, Y0
	VPXOR Y3, Y3, Y3

loop:
	VPMOVSXBW (SI), Y1
	VPMADDWD  (DI), Y1, Y1
	VPADDD    Y1, Y0, Y0
	VPMOVSXBW 16(SI), Y2
	VPMADDWD  32(DI), Y2, Y2
	VPADDD    Y2, Y3, Y3
	ADDQ      $32, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       loop

	VPADDD       Y3, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0x4E, X0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0xB1, X0, X1
	VPADDD       X1, X0, X0
	VMOVD        X0, AX
	VZEROUPPER
	MOVL         AX, ret+32(FP)
	RET
