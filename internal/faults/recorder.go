package faults

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Recorder notes every request a client sends, as "METHOD URI" (path and
// query), in order: the client's own record of what it asked, beside the
// audit log, which holds writes only. Wrap installs it on a client
// (rest.Config.Wrap) or on a Proxy (NewProxy) in front of the binary.
type Recorder struct {
	mu   sync.Mutex
	reqs []string
}

// Wrap records each request, then sends it through rt.
func (r *Recorder) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		r.mu.Lock()
		r.reqs = append(r.reqs, req.Method+" "+req.URL.RequestURI())
		r.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// Requests is what was recorded so far.
func (r *Recorder) Requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

// ByName fails t unless a request was recorded and every one read or
// wrote an object by name: no watch, no patch, no delete, and no list of
// any of resources (a GET of a path ending in /RESOURCE).
func (r *Recorder) ByName(t testing.TB, resources ...string) {
	t.Helper()
	reqs := r.Requests()
	if len(reqs) == 0 {
		t.Fatal("no request recorded")
	}
	for _, q := range reqs {
		path, _, _ := strings.Cut(q, "?")
		list := strings.HasPrefix(q, "GET ") && slices.ContainsFunc(resources, func(res string) bool { return strings.HasSuffix(path, "/"+res) })
		if list || strings.Contains(q, "watch") || strings.HasPrefix(q, "PATCH ") || strings.HasPrefix(q, "DELETE ") {
			t.Fatalf("a list, watch, patch or delete was sent: %s", q)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
