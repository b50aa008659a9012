package plugin_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/faults"
)

// refusal is an API server answer of code (401, 403 or 500) to r as
// client-go decodes it: a Status object; r never reaches the server.
func refusal(t *testing.T, r *http.Request, code int) *http.Response {
	t.Helper()
	var st metav1.Status
	switch code {
	case http.StatusUnauthorized:
		st = apierrors.NewUnauthorized("the exec credential expired").ErrStatus
	case http.StatusForbidden:
		st = apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, path.Base(r.URL.Path), errors.New("denied by a webhook")).ErrStatus
	default:
		st = apierrors.NewInternalError(errors.New("etcd is unreachable")).ErrStatus
	}
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Request: r, ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": []string{"application/json"}}, Body: io.NopCloser(strings.NewReader(string(data))), ContentLength: int64(len(data))}
}

// lostThenRefused forwards every request, except that the first write
// matching lose reaches the server and its answer is lost (a broken
// connection), and every later request of method settle to that same path
// is then answered code without reaching the server: the request that was
// to settle the write is refused. seen reports the lost write's path and
// how many settling requests were refused.
func lostThenRefused(t *testing.T, lose faults.Match, settle string, code int) (wrap func(http.RoundTripper) http.RoundTripper, seen func() (string, int)) {
	var (
		mu       sync.Mutex
		lostPath string
		refused  int
	)
	wrap = func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			done := lostPath != ""
			if done && r.Method == settle && r.URL.Path == lostPath && r.URL.Query().Get("dryRun") == "" {
				refused++
				mu.Unlock()
				return refusal(t, r, code), nil
			}
			mu.Unlock()
			if done || r.Method == http.MethodGet || r.URL.Query().Get("dryRun") != "" || !lose(r, readBody(t, r)) {
				return next.RoundTrip(r)
			}
			resp, err := next.RoundTrip(r)
			if err != nil {
				return nil, err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mu.Lock()
			lostPath = r.URL.Path
			mu.Unlock()
			return nil, errors.New("injected fault: response lost after the server executed the request")
		})
	}
	return wrap, func() (string, int) { mu.Lock(); defer mu.Unlock(); return lostPath, refused }
}

// A write whose answer was lost reached the server; the request that was
// to settle it (the Head's re-read, the object's re-apply) is then refused
// — 401 as after an exec credential expired, 403 as from a webhook. The
// built binary reports the outcome unknown (exit 4) naming the object,
// never invalid input (exit 2), and a rerun with access converges.
func TestRefusedSettlementIsUnknown(t *testing.T) {
	deployments := func(ns string) faults.Match { return faults.Write(http.MethodPatch, "/namespaces/"+ns+"/deployments/") }
	for _, tt := range []struct {
		name   string
		code   int
		lose   func(ns string) faults.Match
		settle string // the method of the settling request
	}{
		{"head commit, re-read 401", http.StatusUnauthorized, func(ns string) faults.Match { return headWrite(ns, http.MethodPut, "committed") }, http.MethodGet},
		{"head commit, re-read 403", http.StatusForbidden, func(ns string) faults.Match { return headWrite(ns, http.MethodPut, "committed") }, http.MethodGet},
		{"object apply, re-apply 401", http.StatusUnauthorized, deployments, http.MethodPatch},
		{"object apply, re-apply 403", http.StatusForbidden, deployments, http.MethodPatch},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ns := controlNamespace(t)
			rdir := filepath.Join(t.TempDir(), "receipts")
			dir := releaseCopy(t, "v3.0.0", ns, "")
			pf := filepath.Join(t.TempDir(), "pf.json")
			mustRun(t, nil, "preflight", dir, "--transition", "install", "--expected-head", headToken(t, nil, ns), "--out", pf)
			wrap, seen := lostThenRefused(t, tt.lose(ns), tt.settle, tt.code)
			_, stderr, code := run(t, proxied(t, ns, wrap), "apply", "--preflight", pf, "--receipts-dir", rdir)
			lost, refused := seen()
			if lost == "" || refused == 0 {
				t.Fatalf("answer lost of %q, %d settling requests refused: the test exercised nothing\n%s", lost, refused, stderr)
			}
			name := lost[strings.LastIndex(lost, "/")+1:]
			if code != 4 || !strings.Contains(stderr, name) || !strings.Contains(stderr, "outcome is unknown") || !strings.Contains(stderr, "refused") {
				t.Fatalf("apply whose settling request was refused %d: exit %d, want 4 naming %q with the outcome unknown\n%s", tt.code, code, name, stderr)
			}
			verb := "apply"
			if h := headOf(t, ns); h.Phase == deploy.PhaseApplying {
				verb = "resume"
			}
			mustRun(t, nil, verb, "--preflight", pf, "--receipts-dir", rdir)
			if h := headOf(t, ns); h.Phase != deploy.PhaseCommitted || h.Generation != 1 {
				t.Fatalf("after the rerun: generation %d %s, want 1 committed", h.Generation, h.Phase)
			}
			mustRun(t, nil, "receipt", "audit", rdir)
		})
	}
}
