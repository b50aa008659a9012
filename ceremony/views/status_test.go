package views

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/receipts"
)

func entry(manager string, op metav1.ManagedFieldsOperationType, sub, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Subresource: sub, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}

func TestDrift(t *testing.T) {
	const fm = "kubectl-ql3"
	deployer := entry(fm, metav1.ManagedFieldsOperationApply, "", `{"f:data":{"f:a":{},"f:b":{}},"f:spec":{"f:replicas":{}}}`)
	tests := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    []string // field@manager
	}{
		{"only the deployer", []metav1.ManagedFieldsEntry{deployer}, nil},
		{"another manager took a field", []metav1.ManagedFieldsEntry{
			entry(fm, metav1.ManagedFieldsOperationApply, "", `{"f:data":{"f:b":{}}}`),
			entry("hotfixer", metav1.ManagedFieldsOperationUpdate, "", `{"f:data":{"f:a":{}}}`),
		}, []string{".data.a@hotfixer"}},
		{"a field both own has the deployer's value", []metav1.ManagedFieldsEntry{deployer,
			entry("other", metav1.ManagedFieldsOperationApply, "", `{"f:data":{"f:a":{}}}`),
		}, nil},
		{"scale subresource counts", []metav1.ManagedFieldsEntry{
			entry(fm, metav1.ManagedFieldsOperationApply, "", `{"f:data":{"f:a":{}}}`),
			entry("scaler", metav1.ManagedFieldsOperationUpdate, "scale", `{"f:spec":{"f:replicas":{}}}`),
		}, []string{".spec.replicas@scaler"}},
		{"status subresource, status fields and system metadata are not drift", []metav1.ManagedFieldsEntry{deployer,
			entry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, "status", `{"f:status":{"f:replicas":{}}}`),
			entry("someone", metav1.ManagedFieldsOperationUpdate, "", `{"f:status":{"f:x":{}},"f:metadata":{"f:finalizers":{"v:\"x\"":{}},"f:annotations":{"f:deployment.kubernetes.io/revision":{}},"f:labels":{"f:kubernetes.io/metadata.name":{}}}}`),
			entry(deploy.HeadFieldManager, metav1.ManagedFieldsOperationUpdate, "", `{"f:data":{"f:z":{}}}`),
		}, nil},
		{"user labels and annotations are drift", []metav1.ManagedFieldsEntry{deployer,
			entry("someone", metav1.ManagedFieldsOperationUpdate, "", `{"f:metadata":{"f:annotations":{"f:team":{}},"f:labels":{"f:example.com/tier":{}}}}`),
		}, []string{".metadata.annotations.team@someone", ".metadata.labels.example.com/tier@someone"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c"}}}
			u.SetManagedFields(tt.entries)
			got, err := Drift(u, fm)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, d := range got {
				names = append(names, d.Field+"@"+d.Manager)
			}
			if d := cmp.Diff(tt.want, names); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestDriftRejectsBadFieldsV1(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "c"}}}
	u.SetManagedFields([]metav1.ManagedFieldsEntry{entry("x", metav1.ManagedFieldsOperationUpdate, "", `{"nope":{}}`)})
	if _, err := Drift(u, "kubectl-ql3"); fail.ClassOf(err) != fail.Invalid {
		t.Fatalf("err %v, want invalid", err)
	}
}

// The exit classes status documents: 0 in sync; 3 missing, drifted or
// applying; 4 only not Current.
func TestStatusErr(t *testing.T) {
	tests := []struct {
		name string
		rep  StatusReport
		want fail.Class
		ok   bool
	}{
		{"in sync", StatusReport{InSync: true}, 0, true},
		{"missing", StatusReport{Missing: 1, NotCurrent: 2}, fail.Conflict, false},
		{"drifted", StatusReport{Drifted: 1}, fail.Conflict, false},
		{"applying", StatusReport{Applying: &Applying{MutationID: "m"}}, fail.Conflict, false},
		{"not current only", StatusReport{NotCurrent: 1}, fail.Unavailable, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.rep.Err()
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if fail.ClassOf(err) != tt.want {
				t.Fatalf("err %v: class %v, want %v", err, fail.ClassOf(err), tt.want)
			}
		})
	}
}

func TestHistoryErr(t *testing.T) {
	if err := (&HistoryReport{Verdict: receipts.VerdictOK}).Err(); err != nil {
		t.Fatal(err)
	}
	rep := &HistoryReport{Dir: "r", Verdict: receipts.VerdictFail, Chain: receipts.ChainVerdict{Reasons: []string{"generation 1 is missing"}},
		Entries: []HistoryEntry{{File: "r/000002-upgrade-1.0.0.receipt.json", Verdict: receipts.VerdictFail, Reasons: []string{"selfDigest mismatch"}}}}
	err := rep.Err()
	if fail.ClassOf(err) != fail.Tamper || !strings.Contains(err.Error(), "generation 1 is missing") || !strings.Contains(err.Error(), "000002-upgrade-1.0.0.receipt.json: selfDigest mismatch") {
		t.Fatalf("err %v", err)
	}
	if _, err := History(t.TempDir(), nil, ""); fail.ClassOf(err) != fail.Invalid {
		t.Fatalf("empty directory: %v, want invalid", err)
	}
	if _, err := History(os.DevNull+"/nope", nil, ""); fail.ClassOf(err) != fail.Invalid {
		t.Fatalf("missing directory: %v, want invalid", err)
	}
}
