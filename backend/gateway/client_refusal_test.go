package gateway

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestClientRefusalBeforeClose: a refused connect is answered with its
// error and then closed. Dial must report the error every time, never the
// close that follows it. The hook holds Call until the close has been read,
// so the response and the close are both ready when Call looks (what a
// busy machine does by chance); Call used to pick between them at random.
func TestClientRefusalBeforeClose(t *testing.T) {
	_, url := newTestServer(t, Options{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	waitClosed := func(done <-chan struct{}) {
		select {
		case <-done:
		case <-time.After(testTimeout): // the test then fails on the error below
		}
	}
	const n = 50
	for i := range n {
		_, err := Dial(ctx, ClientOptions{URL: url, Token: "wrong-token-0123456789", beforeWait: waitClosed})
		var ge *Error
		if !errors.As(err, &ge) || ge.Code != CodeUnauthorized {
			t.Fatalf("dial %d of %d with a wrong token: err = %v, want a *Error %s", i+1, n, err, CodeUnauthorized)
		}
	}
}
