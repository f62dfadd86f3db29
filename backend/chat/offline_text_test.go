package chat

import (
	"context"
	"strings"
	"testing"
)

// TestOfflineAnswerPointsToSettings (issue 24 item 10): the offline answer
// sends the person to Settings, which applies a model at once, and no
// longer tells them to restart Atrium — in English, Simplified and
// Traditional Chinese alike.
func TestOfflineAnswerPointsToSettings(t *testing.T) {
	off := NewOffline(OfflineOptions{Memory: &fakeSearcher{}})
	for _, c := range []struct{ q, settings, noRestart string }{
		{"What is QK-7731?", "Settings → Model", "Then restart Atrium"},
		{"启动代码是什么？", "设置 → 模型", "然后重启"},
		{"啟動代碼是什麼？", "設置 → 模型", "然後重啟"},
	} {
		resp, _, err := off.Answer(context.Background(), c.q, nil)
		if err != nil {
			t.Fatalf("%q: %v", c.q, err)
		}
		if !strings.Contains(resp.Content, c.settings) {
			t.Errorf("%q: answer does not point to %q:\n%s", c.q, c.settings, resp.Content)
		}
		if strings.Contains(resp.Content, c.noRestart) {
			t.Errorf("%q: answer still says %q:\n%s", c.q, c.noRestart, resp.Content)
		}
	}
}
