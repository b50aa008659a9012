package envbundle

import (
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/envbundle/envcarrier"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// The canary: no error of this package may show it.
const (
	canaryName  = "QLCANARY_ENVB_K3"
	canaryValue = "canaryValue9pQw4Z"
)

func bundle(t testing.TB, value string) *envcarrier.Bundle {
	t.Helper()
	b, err := envcarrier.New([]envcarrier.Entry{{Name: canaryName, Value: value}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func noCanary(t *testing.T, text string) {
	t.Helper()
	for _, s := range []string{canaryName, canaryValue, canaryValue[2:12]} {
		if strings.Contains(text, s) {
			t.Fatalf("%q shows a secret (%q)", text, s)
		}
	}
}

// Check's rules, one table row each: a managed Secret that breaks one is
// tamper, an unmanaged one invalid, and no error shows a data key, a label
// value or the data.
func TestCheck(t *testing.T) {
	b := bundle(t, canaryValue)
	good := SecretFor("ns", "task-env", b, nil)
	yes := true
	for _, tt := range []struct {
		name  string
		mod   func(s *corev1.Secret)
		class fail.Class
		want  string
	}{
		{"valid", func(*corev1.Secret) {}, 0, ""},
		{"extra labels and annotations are kept, not judged", func(s *corev1.Secret) {
			s.Labels["team"] = "a"
			s.Annotations = map[string]string{"note": "b"}
		}, 0, ""},
		{"unmanaged", func(s *corev1.Secret) { delete(s.Labels, LabelManagedBy) }, fail.Invalid, "cannot be adopted"},
		{"managed by another tool", func(s *corev1.Secret) { s.Labels[LabelManagedBy] = canaryName }, fail.Invalid, "cannot be adopted"},
		{"role label missing", func(s *corev1.Secret) { delete(s.Labels, LabelRole) }, fail.Tamper, "label " + LabelRole},
		{"role label changed", func(s *corev1.Secret) { s.Labels[LabelRole] = canaryValue }, fail.Tamper, "label " + LabelRole},
		{"being deleted", func(s *corev1.Secret) { s.DeletionTimestamp = &metav1.Time{} }, fail.Tamper, "being deleted"},
		{"immutable", func(s *corev1.Secret) { s.Immutable = &yes }, fail.Tamper, "immutable"},
		{"other type", func(s *corev1.Secret) { s.Type = corev1.SecretTypeBasicAuth }, fail.Tamper, "type"},
		{"no data", func(s *corev1.Secret) { s.Data = nil }, fail.Tamper, "holds 0 keys"},
		{"another key", func(s *corev1.Secret) { s.Data = map[string][]byte{canaryName: b.Bytes()} }, fail.Tamper, "holds 1 keys"},
		{"an extra key", func(s *corev1.Secret) { s.Data[canaryName] = []byte(canaryValue) }, fail.Tamper, "holds 2 keys"},
		{"not canonical", func(s *corev1.Secret) {
			s.Data[Key] = []byte(strings.Replace(string(b.Bytes()), ",", ", ", 1))
		}, fail.Tamper, "not a valid environment bundle"},
		{"not JSON", func(s *corev1.Secret) { s.Data[Key] = []byte(canaryName + "=" + canaryValue) }, fail.Tamper, "not a valid environment bundle"},
		{"empty", func(s *corev1.Secret) { s.Data[Key] = []byte{} }, fail.Tamper, "not a valid environment bundle"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := good.DeepCopy()
			tt.mod(s)
			got, err := Check(s)
			if tt.want == "" {
				if err != nil || got == nil || string(got.Bytes()) != string(b.Bytes()) {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if !fail.Is(err, tt.class) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check: %v, want class %v naming %q", err, tt.class, tt.want)
			}
			noCanary(t, err.Error())
			if Holds(s, b) {
				t.Fatal("Holds accepts a Secret that fails Check")
			}
		})
	}
}

// SecretFor writes exactly the carrier under Key with publish's labels,
// nothing about the content in the metadata, and on an update keeps the
// rest of the current Secret.
func TestSecretFor(t *testing.T) {
	b := bundle(t, canaryValue)
	s := SecretFor("ns", "task-env", b, nil)
	if s.Name != "task-env" || s.Namespace != "ns" || s.Type != corev1.SecretTypeOpaque || len(s.Data) != 1 ||
		string(s.Data[Key]) != string(b.Bytes()) || !maps.Equal(s.Labels, Labels()) || len(s.Annotations) != 0 || s.ResourceVersion != "" {
		t.Fatalf("new Secret: %+v", s.ObjectMeta)
	}
	if !Holds(s, b) || Holds(s, bundle(t, canaryValue+"2")) {
		t.Fatal("Holds does not compare the carrier")
	}
	cur := s.DeepCopy()
	cur.ResourceVersion = "41"
	cur.Labels["team"] = "a"
	cur.Annotations = map[string]string{"note": "b"}
	cur.Finalizers = []string{"example.com/keep"}
	cur.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x"}}
	next := bundle(t, canaryValue+"2")
	u := SecretFor("ns", "task-env", next, cur)
	if u.ResourceVersion != "41" || u.Labels["team"] != "a" || u.Annotations["note"] != "b" || len(u.Finalizers) != 1 ||
		u.ManagedFields != nil || string(u.Data[Key]) != string(next.Bytes()) || len(u.Data) != 1 {
		t.Fatalf("update: %+v", u.ObjectMeta)
	}
	if string(cur.Data[Key]) != string(b.Bytes()) {
		t.Fatal("SecretFor changed the current Secret")
	}
	meta := strings.Join(append(append(mapText(u.Labels), mapText(u.Annotations)...), u.Name), " ")
	noCanary(t, meta)
}

func mapText(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

func TestValidateName(t *testing.T) {
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"task-env", true},
		{"a", true},
		{strings.Repeat("a", 253), true},
		{strings.Repeat("a", 254), false},
		{"", false},
		{"Task", false},
		{"task_env", false},
		{"-task", false},
	} {
		err := ValidateName("--name", tt.name)
		if (err == nil) != tt.ok || (err != nil && !fail.Is(err, fail.Invalid)) {
			t.Errorf("ValidateName(%q): %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

// The printed Role: get and update by name, create unlimited with the
// note saying so; no other verb; the binding names the subject.
func TestRBAC(t *testing.T) {
	objs, err := RBAC("ns", "task-env", Subject{User: "u", Group: "g"})
	if err != nil || len(objs) != 2 {
		t.Fatalf("RBAC: %v, %d objects", err, len(objs))
	}
	role := objs[0].(*rbacv1.Role)
	if role.Name != "ql3-env-bundle-task-env" || role.Annotations[AnnotationNote] != CreateNote || !strings.Contains(CreateNote, "cannot be limited by name") {
		t.Fatalf("role %+v", role.ObjectMeta)
	}
	verbs := map[string][]string{}
	for _, r := range role.Rules {
		for _, v := range r.Verbs {
			verbs[v] = r.ResourceNames
		}
		if len(r.Resources) != 1 || r.Resources[0] != "secrets" {
			t.Fatalf("rule %+v", r)
		}
	}
	if len(verbs) != 3 || len(verbs["get"]) != 1 || verbs["get"][0] != "task-env" || len(verbs["update"]) != 1 || verbs["create"] != nil {
		t.Fatalf("verbs %v", verbs)
	}
	rb := objs[1].(*rbacv1.RoleBinding)
	if rb.RoleRef.Name != role.Name || len(rb.Subjects) != 2 {
		t.Fatalf("binding %+v", rb)
	}
	if objs, _ := RBAC("ns", "task-env", Subject{}); len(objs) != 1 {
		t.Fatal("a binding without a subject")
	}
	if rb.Name != access.BindingName(role.Name, rb.Subjects) {
		t.Fatalf("binding name %q: not the role's plus the subjects' hash", rb.Name)
	}
	// The longest bundle name whose Role leaves room for its binding's name.
	longest := access.MaxRoleName - len(RolePrefix)
	if _, err := RBAC("ns", strings.Repeat("a", longest), Subject{User: "u"}); err != nil {
		t.Fatalf("a Role name of %d characters: %v", access.MaxRoleName, err)
	}
	if _, err := RBAC("ns", strings.Repeat("a", longest+1), Subject{}); !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "--name") {
		t.Fatalf("a Role name too long for its binding's: %v", err)
	}
	if n := Needs("ns", "task-env"); len(n) != 3 || n[2].Name != "" || n[0].Name != "task-env" {
		t.Fatalf("Needs %v", n)
	}
}

// FuzzCheck: any bytes under the key, in a managed Secret, are accepted
// only when they are a valid carrier (Holds then its own bundle), and an
// error never repeats a byte run of the input.
func FuzzCheck(f *testing.F) {
	b := bundle(f, canaryValue)
	f.Add(b.Bytes())
	f.Add([]byte(canaryName + "=" + canaryValue))
	f.Add([]byte(`{"entries":[{"name":"` + canaryName + `","value":1}],"schema":"qinglong/environment-bundle@v1"}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := SecretFor("ns", "task-env", b, nil)
		s.Data[Key] = data
		got, err := Check(s)
		if err != nil {
			if !fail.Is(err, fail.Tamper) {
				t.Fatalf("class of %v", err)
			}
			if len(data) >= 16 && strings.Contains(err.Error(), string(data)) {
				t.Fatalf("error repeats the data: %v", err)
			}
			return
		}
		if string(got.Bytes()) != string(data) || !Holds(s, got) {
			t.Fatal("an accepted Secret does not hold its own bundle")
		}
	})
}
