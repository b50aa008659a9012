package approval

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
)

// installApproval is the install vector of testdata/vectors/approval as
// the API server would answer it (with a uid and resourceVersion), and
// its parsed data.
func installApproval(t *testing.T) (*corev1.ConfigMap, record.Approval) {
	t.Helper()
	root, err := testkit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "testdata", "vectors", "approval", "install.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(data, &cm); err != nil {
		t.Fatal(err)
	}
	cm.UID, cm.ResourceVersion = "5d1e4a2c-8f3b-4e6a-9c7d-2b1f0e3a4c5d", "4711"
	a, err := gate.Parse(&cm)
	if err != nil {
		t.Fatal(err)
	}
	return &cm, a
}

// docs/approval.md §3 shows exactly what `approval status -o json` prints
// for a namespace with no Head and a pending install proposal: seven keys
// of the object's data (no schema), and matchesHead true — the approval's
// expectedHead is ql3h1-0-none, the token of no Head.
func TestStatusDoc(t *testing.T) {
	want := testkit.DocExamples(t, "approval.md", "approval-status")["approval-status"]
	cm, a := installApproval(t)
	got, err := json.MarshalIndent(statusOf(cm.Namespace, cm, a, true, nil), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("approval status -o json prints\n%s\ndocs/approval.md §3 says\n%s", got, want)
	}
}

// matchesHead (docs/approval.md §3): the approval's expectedHead is the
// token of the Head now and the Head is committed or absent.
func TestStatusMatchesHead(t *testing.T) {
	cm, install := installApproval(t)
	head := func(phase string) *deploy.Head {
		h := &deploy.Head{Generation: 2, Phase: phase, DeploymentDigest: "sha256:" + hex64("a"), StateDigest: "sha256:" + hex64("b")}
		h.Current.LockDigest = "sha256:" + hex64("c")
		return h
	}
	committed, applying := head(deploy.PhaseCommitted), head(deploy.PhaseApplying)
	against := func(h *deploy.Head) record.Approval {
		a := install
		a.ExpectedHead = h.Expected().String()
		return a
	}
	for _, tt := range []struct {
		name    string
		a       record.Approval
		present bool
		h       *deploy.Head
		want    bool
	}{
		{"no Head, an install's approval", install, true, nil, true},
		{"no Head, nothing proposed", record.Approval{}, false, nil, false},
		{"no Head, an approval against a Head that is gone", against(committed), true, nil, false},
		{"a committed Head, an install's approval", install, true, committed, false},
		{"a committed Head, an approval against it", against(committed), true, committed, true},
		{"an applying Head, an approval against it (a supersede)", against(applying), true, applying, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rep := statusOf(cm.Namespace, cm, tt.a, tt.present, tt.h)
			if rep.MatchesHead != tt.want || rep.Head != tt.h.Expected().String() {
				t.Fatalf("matchesHead %v head %s, want %v and %s", rep.MatchesHead, rep.Head, tt.want, tt.h.Expected())
			}
		})
	}
}

// hex64 is 64 hex digits made of c.
func hex64(c string) string {
	out := ""
	for len(out) < 64 {
		out += c
	}
	return out
}
