package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/agent"
)

// web_fetch defaults.
const (
	DefaultFetchTimeout  = 20 * time.Second
	DefaultFetchMaxBytes = 1 << 20
	DefaultMaxRedirects  = 5
	// FetchUserAgent is sent with every request.
	FetchUserAgent = "Atrium-agent/1 (web_fetch)"
)

// FetchOptions configure web_fetch (level L3).
type FetchOptions struct {
	// Timeout bounds one fetch, redirects and body included. Default
	// DefaultFetchTimeout (20 s).
	Timeout time.Duration
	// MaxBytes caps the body read (the rest is cut and said so). Default
	// DefaultFetchMaxBytes (1 MiB).
	MaxBytes int64
	// MaxRedirects caps redirects (each must stay http or https).
	// Default DefaultMaxRedirects (5).
	MaxRedirects int
	// AllowPrivate lets fetches reach loopback, private (RFC 1918, ULA),
	// link-local and unspecified addresses. Default false: those are
	// refused when dialling (after DNS, so a name cannot point there
	// either), which keeps agents off the gateway and the LAN.
	AllowPrivate bool
	// Transport is the base transport (tests); its DialContext is
	// replaced. Default: a clone of http.DefaultTransport without proxy.
	Transport *http.Transport
}

type fetchTool struct {
	e      *env
	o      FetchOptions
	client *http.Client
}

var errRedirectScheme = errors.New("redirect to a scheme other than http or https")

func newFetchTool(e *env, o FetchOptions) (*fetchTool, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultFetchTimeout
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultFetchMaxBytes
	}
	if o.MaxRedirects <= 0 {
		o.MaxRedirects = DefaultMaxRedirects
	}
	tr := o.Transport
	if tr == nil {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	} else {
		tr = tr.Clone()
	}
	tr.Proxy = nil // a proxy would dial for us and skip the address check
	d := &net.Dialer{Timeout: 10 * time.Second}
	if !o.AllowPrivate {
		d.Control = func(network, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			ip := net.ParseIP(host)
			if ip == nil || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
				ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() {
				return fmt.Errorf("%w: %s is a local or private address", agent.ErrDenied, host)
			}
			return nil
		}
	}
	tr.DialContext = d.DialContext
	f := &fetchTool{e: e, o: o}
	f.client = &http.Client{Transport: tr, Timeout: o.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > o.MaxRedirects {
				return fmt.Errorf("more than %d redirects", o.MaxRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return errRedirectScheme
			}
			return nil
		}}
	return f, nil
}

const fetchSchema = `{"type":"object","properties":{` +
	`"url":{"type":"string","minLength":1,"maxLength":8192,"description":"an http or https URL"},` +
	`"maxBytes":{"type":"integer","minimum":1,"description":"read at most this many bytes of the body"}` +
	`},"required":["url"],"additionalProperties":false}`

func (f *fetchTool) register(r *agent.Registry) error {
	return r.Register(agent.Spec{Name: WebFetch, Level: agent.L3, Timeout: f.o.Timeout + 5*time.Second, MaxRetries: 1, Schema: json.RawMessage(fetchSchema),
		Description: "Fetch a web page or file over http(s) (GET). Returns status, content type and the text of the body (cut at a size limit)."}, f.fetch)
}

type fetchResult struct {
	URL         string `json:"url"`
	Status      int    `json:"status"`
	ContentType string `json:"contentType"`
	Text        string `json:"text,omitempty"`
	Bytes       int    `json:"bytes"`
	Truncated   bool   `json:"truncated,omitempty"`
	Binary      bool   `json:"binary,omitempty"`
}

func (f *fetchTool) fetch(ctx context.Context, c agent.Call) (agent.Output, error) {
	var a struct {
		URL      string `json:"url"`
		MaxBytes int64  `json:"maxBytes"`
	}
	if err := json.Unmarshal(c.Args, &a); err != nil {
		return agent.Output{}, fmt.Errorf("web_fetch: %w", err)
	}
	u, err := url.Parse(a.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return agent.Output{}, f.e.deny(WebFetch, a.URL, "only absolute http and https URLs are fetched")
	}
	if u.User != nil {
		return agent.Output{}, f.e.deny(WebFetch, u.Redacted(), "URLs with credentials are not fetched")
	}
	max := f.o.MaxBytes
	if a.MaxBytes > 0 && a.MaxBytes < max {
		max = a.MaxBytes
	}
	if err := f.e.allow(WebFetch, u.String(), "L3 granted"); err != nil {
		return agent.Output{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return agent.Output{}, fmt.Errorf("web_fetch: %w", err)
	}
	req.Header.Set("User-Agent", FetchUserAgent)
	resp, err := f.client.Do(req)
	if err != nil {
		if errors.Is(err, agent.ErrDenied) {
			return agent.Output{}, f.e.deny(WebFetch, u.String(), err.Error())
		}
		if errors.Is(err, errRedirectScheme) {
			return agent.Output{}, f.e.deny(WebFetch, u.String(), err.Error())
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return agent.Output{}, fmt.Errorf("web_fetch %s: no complete answer within %s", u.Redacted(), f.o.Timeout)
		}
		return agent.Output{}, fmt.Errorf("web_fetch %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return agent.Output{}, fmt.Errorf("web_fetch %s: reading the body: %w", u.Redacted(), err)
	}
	res := fetchResult{URL: resp.Request.URL.String(), Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type")}
	if int64(len(body)) > max {
		body, res.Truncated = body[:max], true
	}
	res.Bytes = len(body)
	mt, _, _ := mime.ParseMediaType(res.ContentType)
	textual := strings.HasPrefix(mt, "text/") || mt == "" || strings.HasSuffix(mt, "json") || strings.HasSuffix(mt, "xml") || mt == "application/javascript"
	if !textual || strings.IndexByte(string(body), 0) >= 0 {
		res.Binary = true
	} else {
		if res.Truncated { // do not end inside a character
			for len(body) > 0 && !utf8.FullRune(body[lastStart(body):]) {
				body = body[:lastStart(body)]
			}
		}
		res.Text = strings.ToValidUTF8(string(body), "\uFFFD")
	}
	if resp.StatusCode >= 400 {
		return agent.Output{}, fmt.Errorf("web_fetch %s: HTTP %d: %s", u.Redacted(), resp.StatusCode, tail(res.Text, 300))
	}
	return agent.Output{Data: res, LogSummary: fmt.Sprintf("GET %s: HTTP %d, %d bytes", u.Redacted(), resp.StatusCode, res.Bytes)}, nil
}

// lastStart is the index of the start of b's last character.
func lastStart(b []byte) int {
	i := len(b) - 1
	for i > 0 && i > len(b)-utf8.UTFMax && !utf8.RuneStart(b[i]) {
		i--
	}
	return max(i, 0)
}
