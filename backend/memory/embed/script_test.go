package embed

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/liuzl/gocc"
)

// TestBuiltinScriptsEmbedAlike: a Traditional text and its Simplified form
// (the pairs of issue 15, and real Traditional notes against OpenCC's
// conversion of them) get the same vector, bit for bit, while the stop
// characters keep their weight in either script.
func TestBuiltinScriptsEmbedAlike(t *testing.T) {
	pairs := [][2]string{
		{"產業類別", "产业类别"},
		{"刪除決定權屬於誰？", "删除决定权属于谁？"},
		{"記憶", "记忆"},
		{"我們的資料庫連線池設定是什麼", "我们的资料库连线池设定是什么"},
	}
	dir := "/work/shared/corpora/workspaces/scchin-openclaw-workspace"
	if b, err := os.ReadFile(filepath.Join(dir, "MEMORY.md")); err == nil {
		// The same note written the Simplified way (OpenCC's t2s) must
		// embed as the note does.
		pairs = append(pairs, [2]string{string(b), toSimplified(t, string(b))})
	} else {
		t.Logf("corpus note absent, real-note pair skipped: %v", err)
	}
	e := NewBuiltin(BuiltinOptions{})
	for _, p := range pairs {
		v, err := e.Embed(context.Background(), []string{p[0], p[1]})
		if err != nil {
			t.Fatal(err)
		}
		if vecHash(v[0]) != vecHash(v[1]) {
			t.Errorf("%.40q and %.40q embed differently (cosine %.3f)", p[0], p[1], cosine(v[0], v[1]))
		}
	}
	// Unrelated Chinese text stays apart.
	v, err := e.Embed(context.Background(), []string{"產業類別", "天气预报"})
	if err != nil {
		t.Fatal(err)
	}
	if c := cosine(v[0], v[1]); c > 0.1 {
		t.Errorf("unrelated texts have cosine %.3f", c)
	}
}

// toSimplified converts s with OpenCC's own t2s conversion (phrase-aware,
// not the rune table the embedder folds with).
func toSimplified(t *testing.T, s string) string {
	t.Helper()
	cc, err := gocc.New("t2s")
	if err != nil {
		t.Fatal(err)
	}
	out, err := cc.Convert(s)
	if err != nil {
		t.Fatal(err)
	}
	if out == s {
		t.Fatal("the Traditional note did not change when converted")
	}
	return out
}
