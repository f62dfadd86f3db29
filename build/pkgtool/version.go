package main

import (
	"fmt"
	"regexp"
	"strconv"
)

// describeRE matches `git describe` output with a release tag: v1.2.3, v1.2.3-4-gabc1234,
// v1.2-dirty (v, up to three numbers, then the count of commits since the tag). The v is
// required: `git describe --always` without tags prints a bare hash, which can be all digits.
var describeRE = regexp.MustCompile(`^v(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-(\d+)-g[0-9a-f]+)?(?:-dirty)?$`)

// Numeric is the version as the four 16-bit numbers Windows' VERSIONINFO and manifest
// want (major, minor, patch, commits since the tag): "v1.2.3-4-gabc" -> 1.2.3.4. A
// version without a release tag (a bare commit "4b89b15" or "1234567", "dev") is 0.0.0.0; numbers
// above 65535 are an error.
func Numeric(version string) ([4]uint16, error) {
	var n [4]uint16
	m := describeRE.FindStringSubmatch(version)
	if m == nil {
		return n, nil
	}
	for i, s := range m[1:] {
		if s == "" {
			continue
		}
		v, err := strconv.ParseUint(s, 10, 16)
		if err != nil {
			return n, fmt.Errorf("version %q: part %q does not fit in 16 bits", version, s)
		}
		n[i] = uint16(v)
	}
	return n, nil
}

// dotted writes the first k numbers of n joined by dots.
func dotted(n [4]uint16, k int) string {
	s := strconv.Itoa(int(n[0]))
	for _, v := range n[1:k] {
		s += "." + strconv.Itoa(int(v))
	}
	return s
}
