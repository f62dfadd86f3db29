package gwid

import "strings"

// FingerprintWords renders the first 64 bits of a certificate fingerprint as
// four proquints joined by spaces, e.g. "lusab babad gutih tugad": the
// phone's page and the desktop show it and the person checks that both say
// the same.
//
// Why proquints (A. Wilkerson, "A Proposal for Proquints", 2009,
// arXiv:0901.4016): each 16 bits become one five-letter
// consonant-vowel-consonant-vowel-consonant word from two short alphabets
// (16 consonants, 4 vowels), so the encoding is deterministic, reversible,
// pronounceable, needs no word table (the BIP-39 or PGP lists would mean a
// 2048- or 512-word table to ship or a dependency), and reads the same to
// an English or a Chinese speaker spelling it letter by letter. 64 bits
// leave an attacker who wants a certificate with the same words about 2^63
// key generations on average, far beyond an attack on a pairing that lasts
// minutes.
func FingerprintWords(fp [32]byte) string {
	words := make([]string, 4)
	for i := range words {
		words[i] = proquint(uint16(fp[2*i])<<8 | uint16(fp[2*i+1]))
	}
	return strings.Join(words, " ")
}

const (
	pqConsonants = "bdfghjklmnprstvz"
	pqVowels     = "aiou"
)

// proquint is the five-letter word for 16 bits (most significant first:
// consonant 4 bits, vowel 2, consonant 4, vowel 2, consonant 4).
func proquint(x uint16) string {
	return string([]byte{
		pqConsonants[x>>12],
		pqVowels[(x>>10)&3],
		pqConsonants[(x>>6)&15],
		pqVowels[(x>>4)&3],
		pqConsonants[x&15],
	})
}
