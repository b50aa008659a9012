package manifestaudit

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func obj(apiVersion, kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// subject of the test rules: the objects.
type objs []*unstructured.Unstructured

var table = []Rule[objs]{
	NewRule("first", "one finding per object", func(s objs) []Finding {
		var out []Finding
		for _, u := range s {
			out = append(out, At(u, "spec", "x", Quote("")))
		}
		return out
	}),
	NewRule("quiet", "never finds", func(objs) []Finding { return nil }),
	NewRule("file", "a finding about a file", func(objs) []Finding {
		return []Finding{InFile("a/kustomization.yaml", "resources[0]", "y", Quote("z"))}
	}),
}

// The report bytes both audits print: rules in table order, findings named
// by their rule, a nil NotChecked left out, an empty one printed.
func TestRunReportBytes(t *testing.T) {
	s := objs{obj("apps/v1", "Deployment", "ns", "d"), obj("v1", "Namespace", "", "n")}
	for _, c := range []struct {
		name string
		res  Result
		want string
	}{
		{"run", Run(table, s), `{"checked":["first","quiet","file"],` +
			`"findings":[{"rule":"first","object":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"ns","name":"d"},"path":"spec","expected":"x","found":"\u003cunset\u003e"},` +
			`{"rule":"first","object":{"apiVersion":"v1","kind":"Namespace","namespace":"","name":"n"},"path":"spec","expected":"x","found":"\u003cunset\u003e"},` +
			`{"rule":"file","file":"a/kustomization.yaml","path":"resources[0]","expected":"y","found":"\"z\""}]}`},
		{"some", RunSome(table, objs{}, func(r Rule[objs]) (Rule[objs], bool) { return r, r.Name != "quiet" }),
			`{"checked":["first","file"],"notChecked":["quiet"],"findings":[{"rule":"file","file":"a/kustomization.yaml","path":"resources[0]","expected":"y","found":"\"z\""}]}`},
		{"some, all run", RunSome(table[:2], objs{}, func(r Rule[objs]) (Rule[objs], bool) { return r, true }),
			`{"checked":["first","quiet"],"notChecked":[],"findings":[]}`},
		{"run, nothing", Run([]Rule[objs]{}, nil), `{"checked":[],"findings":[]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(c.res)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, string(b)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestAtWithoutObject(t *testing.T) {
	want := Finding{Path: "p", Expected: "e", Found: "f"}
	if diff := cmp.Diff(want, At(nil, "p", "e", "f")); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestWorkload(t *testing.T) {
	for _, c := range []struct {
		apiVersion, kind string
		want             bool
	}{
		{"apps/v1", "Deployment", true},
		{"v1", "Pod", true},
		{"v1", "ReplicationController", true},
		{"apps/v1", "StatefulSet", true},
		{"apps/v1", "DaemonSet", true},
		{"apps/v1", "ReplicaSet", true},
		{"batch/v1", "Job", true},
		{"batch/v1beta1", "CronJob", true},
		{"v1", "Service", false},
		{"example.com/v1", "Deployment", false},
		{"v1", "Deployment", false},
	} {
		if got := Workload(obj(c.apiVersion, c.kind, "", "x")); got != c.want {
			t.Errorf("Workload(%s %s) = %t, want %t", c.apiVersion, c.kind, got, c.want)
		}
	}
}
