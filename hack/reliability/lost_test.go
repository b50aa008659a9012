package main

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// The messages the lost-response row must never see for a write that
// landed, and the ones it must let pass.
func TestNothingWritten(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		want int
	}{
		{"cas unchanged", "head ns/qinglong3-deployment-head: the write did not land (timeout) and the object is unchanged: nothing was written; rerunning is safe", 1},
		{"cas moved", "head ns/h: another writer won: the Head was removed; nothing of ours was written", 1},
		{"case-insensitive, one per line", "a\nNothing was written\nb\nnothing was written", 2},
		{"settled", "head ns/h: the answer to the write did not arrive (after 1s: context deadline exceeded); re-reading to decide\nhead ns/h: the write had landed (exact replay of our intent)", 0},
		{"empty", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nothingWritten(tc.text); len(got) != tc.want {
				t.Errorf("nothingWritten(%q) = %q, want %d line(s)", tc.text, got, tc.want)
			}
		})
	}
}

// Each kind recognises only its own reason for an answer that did not
// arrive.
func TestReported(t *testing.T) {
	for _, tc := range []struct {
		name       string
		text       string
		lost, held int
	}{
		{"cas, context", "head ns/h: the answer to the write did not arrive (after 1.001s: Put \"https://x\": context deadline exceeded); re-reading to decide", 0, 1},
		{"apply, http client", "apply: Deployment/x: the answer did not arrive (after 1s: Patch \"https://x\": net/http: request canceled (Client.Timeout exceeded while awaiting headers)); applying again", 0, 1},
		{"apply, lost", "apply: Deployment/x: the answer did not arrive (after 3ms: Patch \"https://x\": injected fault: response lost after the server executed the request); applying again", 1, 0},
		{"two lines", "a: the answer to the write did not arrive (after 2ms: injected fault: response lost after the server executed the request)\nb: the answer did not arrive (after 2ms: injected fault: response lost after the server executed the request)", 2, 0},
		{"deadline without a lost answer", "converge: context deadline exceeded", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lost.reported(tc.text); got != tc.lost {
				t.Errorf("lost.reported = %d, want %d", got, tc.lost)
			}
			if got := held.reported(tc.text); got != tc.held {
				t.Errorf("held.reported = %d, want %d", got, tc.held)
			}
		})
	}
}

// Both kinds hide the answer of exactly the picked mutations, which reach
// the server; only the picked ones that the server accepted (2xx) count as
// landed; reads and dry-runs are never picked.
func TestFaultKinds(t *testing.T) {
	var hits struct{ post, put, get int }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			hits.post++
			w.WriteHeader(http.StatusCreated)
		case http.MethodPut:
			hits.put++
			w.WriteHeader(http.StatusConflict)
		default:
			hits.get++
		}
		w.Write([]byte("{}"))
	}))
	defer srv.Close()
	for _, kind := range []faultKind{lost, held} {
		t.Run(kind.String(), func(t *testing.T) {
			hits.post, hits.put, hits.get = 0, 0, 0
			cfg := &rest.Config{Host: srv.URL}
			f, rec := kind.install(cfg, func(*http.Request, []byte) bool { return true })
			if kind == held && cfg.Timeout != heldClientTimeout {
				t.Fatalf("held: client timeout %s, want %s", cfg.Timeout, heldClientTimeout)
			}
			hc, err := rest.HTTPClientFor(cfg)
			if err != nil {
				t.Fatal(err)
			}
			do := func(method, path string) error {
				req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader("{}"))
				resp, err := hc.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				return err
			}
			start := time.Now()
			if err := do(http.MethodPost, "/api/v1/namespaces/a/configmaps"); err == nil {
				t.Error("POST: the answer arrived, want it hidden")
			}
			if kind == held && time.Since(start) >= heldFor {
				t.Errorf("held: the client waited %s, want it to give up at its timeout %s", time.Since(start), heldClientTimeout)
			}
			if err := do(http.MethodPut, "/api/v1/namespaces/a/configmaps/b"); err == nil {
				t.Error("PUT: the answer arrived, want it hidden")
			}
			if err := do(http.MethodPost, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"); err == nil {
				t.Error("review: the answer arrived, want it hidden")
			}
			if err := do(http.MethodPatch, "/api/v1/namespaces/a/configmaps/b?dryRun=All"); err != nil {
				t.Errorf("dry-run PATCH: %v, want its answer", err)
			}
			if err := do(http.MethodGet, "/api/v1/namespaces/a/configmaps/b"); err != nil {
				t.Errorf("GET: %v, want its answer", err)
			}
			if hits.post != 2 || hits.put != 1 || hits.get != 2 {
				t.Errorf("server saw %+v, want every request once", hits)
			}
			if f.Fired() != 3 {
				t.Errorf("fired %d, want 3 (POST, PUT and the review)", f.Fired())
			}
			writes, reviews, landed := rec.counts()
			if writes != 2 || reviews != 1 {
				t.Errorf("hidden: %d writes, %d reviews; want 2 and 1", writes, reviews)
			}
			if want := []string{"POST /api/v1/namespaces/a/configmaps (201)"}; !reflect.DeepEqual(landed, want) {
				t.Errorf("landed %q, want %q (the PUT was refused 409)", landed, want)
			}
		})
	}
}
