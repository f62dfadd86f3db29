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

// func scanSigns512(codes *uint64, n, words int, qz *uint64, mask int, score *uint16)
//
// scanSignsAsm with AVX-512 for words ≤ 8: one vector's words in one ZMM
// register (lanes beyond words masked off), agree = ¬(code ⊕ sign) by
// VPTERNLOGQ, the four plane counts by VPOPCNTQ, weighted and summed
// across lanes. qz holds 5×8 words: the query's signs, then planes 0..3,
// zero beyond words.
TEXT ·scanSigns512(SB), NOSPLIT, $0-48
	MOVQ      codes+0(FP), SI
	MOVQ      n+8(FP), CX
	MOVQ      words+16(FP), DX
	MOVQ      qz+24(FP), R8
	MOVQ      mask+32(FP), AX
	MOVQ      score+40(FP), DI
	KMOVW     AX, K1
	VMOVDQU64 0(R8), Z16
	VMOVDQU64 64(R8), Z17
	VMOVDQU64 128(R8), Z18
	VMOVDQU64 192(R8), Z19
	VMOVDQU64 256(R8), Z20
	SHLQ      $3, DX

vec:
	VMOVDQU64.Z (SI), K1, Z0
	VPTERNLOGQ  $0xC3, Z16, Z16, Z0
	VPANDQ      Z17, Z0, Z1
	VPOPCNTQ    Z1, Z1
	VPANDQ      Z18, Z0, Z2
	VPOPCNTQ    Z2, Z2
	VPANDQ      Z19, Z0, Z3
	VPOPCNTQ    Z3, Z3
	VPANDQ      Z20, Z0, Z4
	VPOPCNTQ    Z4, Z4
	VPSLLQ      $1, Z4, Z4
	VPADDQ      Z4, Z3, Z3
	VPSLLQ      $1, Z3, Z3
	VPADDQ      Z3, Z2, Z2
	VPSLLQ      $1, Z2, Z2
	VPADDQ      Z2, Z1, Z1
	VEXTRACTI64X4 $1, Z1, Y2
	VPADDQ      Y2, Y1, Y1
	VEXTRACTI128 $1, Y1, X2
	VPADDQ      X2, X1, X1
	VPSHUFD     $0x4E, X1, X2
	VPADDQ      X2, X1, X1
	VMOVQ       X1, AX
	MOVW        AX, (DI)
	ADDQ        DX, SI
	ADDQ        $2, DI
	DECQ        CX
	JNZ         vec
	VZEROUPPER
	RET
