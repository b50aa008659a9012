// Package faults wraps a client's transport to inject the faults the CAS
// kernel must settle, against a real API server: an answer lost after the
// server carried the request out, and an answer held back past the
// client's timeout (--request-timeout). The request always reaches the
// server; only what the client learns changes.
package faults

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// Match selects the requests a fault applies to; body is the request body.
type Match func(r *http.Request, body []byte) bool

// Fault is an installed fault: it fires for the first Times matching
// requests (default 1; negative: every one).
type Fault struct {
	next  http.RoundTripper
	match Match
	hold  time.Duration // 0: drop the answer
	Times int32
	fired atomic.Int32
}

// Fired is how many matching requests the fault changed.
func (f *Fault) Fired() int { return int(f.fired.Load()) }

// Drop installs on cfg a fault that lets matching requests reach the
// server, then throws the answer away and reports a broken connection.
func Drop(cfg *rest.Config, match Match) *Fault {
	return install(cfg, &Fault{match: match, Times: 1})
}

// Delay installs on cfg a fault that lets matching requests reach the
// server and holds the answer back for hold (or until the request's
// context ends, as a client-side timeout ends it), then delivers it if the
// client still waits. With hold above cfg.Timeout, the client gives up
// while the write has been carried out.
func Delay(cfg *rest.Config, match Match, hold time.Duration) *Fault {
	return install(cfg, &Fault{match: match, hold: hold, Times: 1})
}

func install(cfg *rest.Config, f *Fault) *Fault {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { f.next = rt; return f })
	return f
}

func (f *Fault) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil && req.GetBody != nil {
		if rc, err := req.GetBody(); err == nil {
			body, _ = io.ReadAll(rc)
			rc.Close()
		}
	}
	resp, err := f.next.RoundTrip(req)
	if err != nil || !f.match(req, body) {
		return resp, err
	}
	if n := f.fired.Add(1); f.Times >= 0 && n > f.Times {
		return resp, err
	}
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
