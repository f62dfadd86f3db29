//go:build !amd64

package index

func scanSigns(codes []uint64, words int, qp []uint64, score []uint16) {
	scanSignsGo(codes, words, qp, score)
}

func dotInt8Block(c []int8, q []int16, next []int8) int32 { return dotInt8Go(c, q) }

// quantKernels names the implementation of the kernels in use.
func quantKernels() string { return "go" }
