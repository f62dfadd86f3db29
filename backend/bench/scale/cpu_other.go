//go:build !unix

package scale

// cpuTime is not measured on this platform (reported as 0).
func cpuTime() float64 { return 0 }
