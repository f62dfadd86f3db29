package chat

import (
	"fmt"

	"github.com/atrium-dev/atrium/backend/memory/hanzi"
)

// The offline answer in the script the person wrote in (issue 14 item 13).
//
// A question in Chinese is answered in Chinese; one written in Traditional
// characters (hanzi.Detect) gets the answer's own words in Traditional,
// converted from the Simplified wording by OpenCC (s2tw) once, on the first
// such question. What the answer repeats is left as it was written: the
// question echoed in the "found" line, and the quoted snippets, which are
// quotes of the notes (a Simplified note stays Simplified inside a
// Traditional answer, and the reverse).

// wording picks the answer's wording for question q: English without Han
// characters, else Chinese in q's script: Simplified when the script cannot
// be told, or if OpenCC's embedded data could not be loaded (a build
// defect; the answer is then still right, in the other script).
func (o *Offline) wording(q string) offlineText {
	if !hasHan(q) {
		return offlineEnglish
	}
	if hanzi.Detect(q) == hanzi.Traditional && o.traditional != nil {
		if t, err := o.traditional(); err == nil {
			return t
		}
	}
	return offlineChinese
}

// offlineTraditional converts offlineChinese's wording to Traditional.
func offlineTraditional() (offlineText, error) {
	c := offlineChinese
	var err error
	conv := func(s string) string {
		if err != nil {
			return s
		}
		var out string
		out, err = hanzi.ToTraditional(s)
		return out
	}
	t := offlineText{
		noModel:   conv(c.noModel),
		failed:    conv(c.failed),
		nothing:   conv(c.nothing),
		passage:   conv(c.passage),
		configure: conv(c.configure),
		found:     chineseFound(conv(offlineChineseFound)),
	}
	if err != nil {
		return offlineText{}, fmt.Errorf("offline answer in traditional: %w", err)
	}
	return t, nil
}
