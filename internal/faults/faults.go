// Package faults wraps a client's transport to inject the faults the CAS
// kernel must settle, against a real API server: an answer lost after the
// server carried the request out, and an answer held back past the
// client's timeout (--request-timeout). The request always reaches the
// server; only what the client learns changes. A Recorder notes what a
// client asked, for the tests that prove what it never sends.
package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// Match selects the requests a fault applies to; body is the request body.
type Match func(r *http.Request, body []byte) bool

// Fault is an installed fault: it fires for the first Times matching
// requests (default 1; negative: every one).
type Fault struct {
	next    http.RoundTripper
	match   Match
	hold    time.Duration // 0: drop the answer
	late    time.Duration // >0: forward the request only this long after the client gave up
	Times   int32
	matched atomic.Int32
	fired   atomic.Int32
	// LateErr is the late request's own outcome (nil: answered 2xx), set
	// before Landed is closed.
	LateErr error
	once    sync.Once
	landed  chan struct{}
}

// Fired is how many matching requests the fault changed.
func (f *Fault) Fired() int { return int(f.fired.Load()) }

// Drop installs on cfg a fault that lets matching requests reach the
// server, then throws the answer away and reports a broken connection.
func Drop(cfg *rest.Config, match Match) *Fault { return install(cfg, NewDrop(match)) }

// Delay installs on cfg a fault that lets matching requests reach the
// server and holds the answer back for hold (or until the request's
// context ends, as a client-side timeout ends it), then delivers it if the
// client still waits. With hold above cfg.Timeout, the client gives up
// while the write has been carried out.
func Delay(cfg *rest.Config, match Match, hold time.Duration) *Fault {
	return install(cfg, NewDelay(match, hold))
}

func install(cfg *rest.Config, f *Fault) *Fault {
	cfg.Wrap(f.Wrap)
	return f
}

func (f *Fault) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	switch {
	case req.Body != nil && req.GetBody != nil:
		if rc, err := req.GetBody(); err == nil {
			body, _ = io.ReadAll(rc)
			rc.Close()
		}
	case req.Body != nil && req.Body != http.NoBody:
		// A proxied request's body is the incoming stream: read it once and
		// send the same bytes on.
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	if f.late > 0 && f.match(req, body) {
		if n := f.matched.Add(1); f.Times < 0 || n <= f.Times {
			f.fired.Add(1)
			return f.forwardLate(req, body)
		}
	}
	resp, err := f.next.RoundTrip(req)
	if err != nil || !f.match(req, body) || f.late > 0 {
		return resp, err
	}
	if n := f.matched.Add(1); f.Times >= 0 && n > f.Times {
		return resp, err
	}
	f.fired.Add(1)
	if f.hold == 0 {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, errors.New("injected fault: response lost after the server executed the request")
	}
	// Read the answer now (the server has answered), deliver it late.
	data, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	select {
	case <-req.Context().Done():
		return nil, req.Context().Err()
	case <-time.After(f.hold):
	}
	if rerr != nil {
		return nil, rerr
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return resp, nil
}

// Write matches writes (POST, PUT, PATCH without dryRun, DELETE) whose
// path contains pathPart and whose body contains every one of needles.
func Write(method, pathPart string, needles ...string) Match {
	return func(r *http.Request, body []byte) bool {
		if r.Method != method || !bytes.Contains([]byte(r.URL.Path), []byte(pathPart)) || r.URL.Query().Get("dryRun") != "" {
			return false
		}
		for _, n := range needles {
			if !bytes.Contains(body, []byte(n)) {
				return false
			}
		}
		return true
	}
}

// Proxy is a plain-HTTP reverse proxy on loopback in front of the API
// server that target reaches, so a built binary (which cannot be handed a
// transport) meets the same faults: its kubeconfig names URL and no
// credentials, and the proxy forwards as target's user through wrap
// (faults installed on it act on every request that passes).
type Proxy struct {
	URL    string
	server *http.Server
	ln     net.Listener
}

// NewProxy starts a proxy forwarding through target's transport, wrapped
// by wrap (nil: as it is).
func NewProxy(target *rest.Config, wrap func(http.RoundTripper) http.RoundTripper) (*Proxy, error) {
	rt, err := rest.TransportFor(target)
	if err != nil {
		return nil, err
	}
	if wrap != nil {
		rt = wrap(rt)
	}
	u, err := url.Parse(target.Host)
	if err != nil {
		return nil, err
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = rt
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		// A fault that lost the answer: cut the client's connection, as a
		// broken network would, instead of answering 502.
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, herr := hj.Hijack(); herr == nil {
				c.Close()
				return
			}
		}
		http.Error(w, err.Error(), http.StatusBadGateway)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{URL: "http://" + ln.Addr().String(), ln: ln, server: &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}}
	go p.server.Serve(ln)
	return p, nil
}

// Close stops the proxy.
func (p *Proxy) Close() { p.server.Close() }

// Kubeconfig writes a kubeconfig for the proxy to path (context "proxy",
// namespace ns, no credentials: the proxy authenticates).
func (p *Proxy) Kubeconfig(path, ns string) error {
	data := "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster:\n    server: " + p.URL +
		"\ncontexts:\n- name: proxy\n  context:\n    cluster: proxy\n    user: proxy\n    namespace: " + ns +
		"\nusers:\n- name: proxy\n  user: {}\ncurrent-context: proxy\n"
	return os.WriteFile(path, []byte(data), 0o600)
}

// CancelRequest is the old cancellation hook client-go still calls on
// timeouts; the request's context does the work, so it only silences
// client-go's "unable to cancel request" warnings.
func (f *Fault) CancelRequest(*http.Request) {}

// Wrap returns a wrapper for NewProxy that installs f on the transport.
func (f *Fault) Wrap(rt http.RoundTripper) http.RoundTripper { f.next = rt; return f }

// NewLate builds a fault that holds a matching request back until the
// client gives up (its timeout ends the request's context), answers it
// nothing, and forwards the very same request to the server only after
// another `after`: the write commits after the client has already read the
// object to settle it — the order in which an unanswered write is hardest
// to settle truthfully.
func NewLate(match Match, after time.Duration) *Fault {
	return &Fault{match: match, late: after, Times: 1}
}

// Late installs NewLate on cfg.
func Late(cfg *rest.Config, match Match, after time.Duration) *Fault {
	return install(cfg, NewLate(match, after))
}

// Landed is closed once a late request has been forwarded and answered.
func (f *Fault) Landed() <-chan struct{} {
	f.once.Do(func() { f.landed = make(chan struct{}) })
	return f.landed
}

func (f *Fault) forwardLate(req *http.Request, body []byte) (*http.Response, error) {
	<-req.Context().Done()
	late := req.Clone(context.Background())
	late.Cancel = nil //nolint:staticcheck // the client's timeout set it: the late request outlives the client
	late.Body = io.NopCloser(bytes.NewReader(body))
	late.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	late.ContentLength = int64(len(body))
	f.Landed()
	landed := f.landed
	go func() {
		defer close(landed)
		time.Sleep(f.late)
		resp, err := f.next.RoundTrip(late)
		if err == nil {
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode >= 300 {
				err = fmt.Errorf("late request answered %s: %s", resp.Status, data)
			}
		}
		f.LateErr = err
	}()
	return nil, req.Context().Err()
}

// NewDrop and NewDelay build faults for a proxy (NewProxy(cfg, f.Wrap)).
func NewDrop(match Match) *Fault { return &Fault{match: match, Times: 1} }

// NewDelay: see Delay.
func NewDelay(match Match, hold time.Duration) *Fault {
	return &Fault{match: match, hold: hold, Times: 1}
}

// Gate holds matching requests before they are sent, so a test can put two
// writers' requests in a known order: Reached is closed when the first
// matching request arrives, and every matching request waits (or its
// context ends) until Release. A request held this way has not reached the
// server.
type Gate struct {
	next    http.RoundTripper
	match   Match
	reached chan struct{}
	reach   sync.Once
	release chan struct{}
	free    sync.Once
}

// Hold installs a Gate on cfg.
func Hold(cfg *rest.Config, match Match) *Gate {
	g := &Gate{match: match, reached: make(chan struct{}), release: make(chan struct{})}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { g.next = rt; return g })
	return g
}

// Reached is closed once a matching request is held.
func (g *Gate) Reached() <-chan struct{} { return g.reached }

// Release lets held requests (and all later ones) through.
func (g *Gate) Release() { g.free.Do(func() { close(g.release) }) }

func (g *Gate) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil && req.GetBody != nil {
		if rc, err := req.GetBody(); err == nil {
			body, _ = io.ReadAll(rc)
			rc.Close()
		}
	}
	if g.match(req, body) {
		g.reach.Do(func() { close(g.reached) })
		select {
		case <-g.release:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return g.next.RoundTrip(req)
}
