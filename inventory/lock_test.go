package inventory

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

func fixtureLock(t testing.TB, name, version string) (*Lock, *Release) {
	t.Helper()
	r := mustRender(t, fixtureFS(t, name), Options{})
	l, err := NewLock(r, version, testClusterIdentity, "v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	return l, r
}

func TestLockRoundTrip(t *testing.T) {
	l, r := fixtureLock(t, "v3.0.0", "3.0.0")
	if err := VerifyLock(l, r); err != nil {
		t.Fatalf("verify own lock: %v", err)
	}
	data, err := l.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseLock(data)
	if err != nil {
		t.Fatalf("parse:\n%s\n%v", data, err)
	}
	if diff := cmp.Diff(l, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	d1, _ := l.Digest()
	d2, _ := back.Digest()
	if d1 != d2 || !IsDigest(d1) {
		t.Errorf("digests %s %s", d1, d2)
	}
	if again, _ := back.Marshal(); string(again) != string(data) {
		t.Error("re-encoding is not stable")
	}
	// The lock digest is over canonical JSON: YAML layout does not count.
	reflowed := strings.ReplaceAll(string(data), "  roles: [admin, control, control-ai, worker]", "  roles:\n  - admin\n  - control\n  - control-ai\n  - worker")
	reflowed = "# a comment\n" + reflowed
	back, err = ParseLock([]byte(reflowed))
	if err != nil {
		t.Fatal(err)
	}
	if d3, _ := back.Digest(); d3 != d1 {
		t.Error("layout changed the lock digest")
	}
	if l.Tool.Constraint != ">=0.1.0-0 <1.0.0-0" || l.Tool.FieldManager != FieldManager || l.Target.Namespace != "ql3-demo" {
		t.Errorf("lock = %+v", l)
	}
}

func TestParseLockErrors(t *testing.T) {
	l, _ := fixtureLock(t, "v3.0.0", "3.0.0")
	good, err := l.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	sub := func(old, new string) func(string) string {
		return func(s string) string {
			if !strings.Contains(s, old) {
				t.Fatalf("lock has no %q", old)
			}
			return strings.Replace(s, old, new, 1)
		}
	}
	fileLine := "    - {path: admin.yaml, digest: '" + l.Source.Files[0].Digest + "'}\n"
	tests := []struct {
		name string
		edit func(string) string
		want []string
	}{
		{"empty", func(string) string { return "" }, []string{"the document is empty"}},
		{"not yaml", func(string) string { return "schema: [\n" }, []string{"not valid YAML"}},
		{"not a mapping", func(string) string { return "- a\n" }, []string{"(document): want a mapping, got a list"}},
		{"two documents", func(s string) string { return s + "---\nschema: other\n" }, []string{"want one YAML document, got 2"}},
		{"duplicate key", func(s string) string { return s + "schema: again\n" }, []string{"not valid YAML", "schema"}},
		{"unknown top-level field", func(s string) string { return s + "extra: 1\n" }, []string{"extra: unknown field"}},
		{"unknown nested field", sub("  count: 16\n", "  count: 16\n  counted: 16\n"), []string{"render.counted: unknown field"}},
		{"unknown identity field", sub("namespace: \"\", name: ql3-demo}", "namespace: \"\", name: ql3-demo, uid: x}"), []string{"render.inventory[11].uid: unknown field"}},
		{"count type", sub("count: 16", "count: sixteen"), []string{"render.count: want an integer, got a string"}},
		{"count fraction", sub("count: 16", "count: 16.5"), []string{"render.count: 16.5 is not an integer"}},
		{"count mismatch", sub("count: 16", "count: 15"), []string{"render.count: 15 is not the number of render.inventory entries (16)"}},
		{"bool type", sub("secretValuesCovered: true", "secretValuesCovered: \"yes\""), []string{"render.secretValuesCovered: want a boolean, got a string"}},
		{"images type", sub("images:\n  - ", "images: x\nz:\n  - "), []string{"images: want a list, got a string"}},
		{"leading v", sub("version: 3.0.0", "version: v3.0.0"), []string{`release.version: "v3.0.0" is not strict SemVer 2.0.0`}},
		{"short version", sub("version: 3.0.0", "version: \"3.0\""), []string{`release.version: "3.0" is not strict SemVer`}},
		{"missing version", sub("  version: 3.0.0\n", ""), []string{"release.version: required"}},
		{"roles", sub("[admin, control, control-ai, worker]", "[admin, control, worker]"), []string{"release.roles:", "production role surface"}},
		{"roles order", sub("[admin, control, control-ai, worker]", "[control, admin, control-ai, worker]"), []string{"release.roles:"}},
		{"schema", sub("kubectl-ql3/lock@v1", "kubectl-ql3/lock@v2"), []string{`schema: "kubectl-ql3/lock@v2" is not "kubectl-ql3/lock@v1"`}},
		{"cluster identity", sub(testClusterIdentity, "sha256:abc"), []string{`target.clusterIdentity: "sha256:abc" is not a digest`}},
		{"namespace", sub("namespace: ql3-demo\n", "namespace: Ql3_Demo\n"), []string{`target.namespace: "Ql3_Demo" is not a namespace name`}},
		{"tool name", sub("name: kubectl-ql3", "name: kubectl-ql2"), []string{`tool.name: "kubectl-ql2"`}},
		{"field manager", sub("fieldManager: kubectl-ql3", "fieldManager: kubectl"), []string{`tool.fieldManager: "kubectl" is not "kubectl-ql3"`}},
		{"head field manager", sub("fieldManager: kubectl-ql3", "fieldManager: "+HeadFieldManager), []string{`tool.fieldManager: "kubectl-ql3-head" is reserved for the Head's own writes`}},
		{"head in inventory", sub("name: ql3-config}", "name: "+HeadName+"}"), []string{`render.inventory[10]: "v1/ConfigMap/ql3-demo/qinglong3-deployment-head" is the Head`}},
		{"one object under two apiVersions", sub("name: ql3-default}\n", "name: ql3-default}\n    - {apiVersion: demo.qinglong.io/v1beta1, kind: Widget, namespace: ql3-demo, name: ql3-default}\n"),
			[]string{"render.inventory: identities demo.qinglong.io/v1/Widget/ql3-demo/ql3-default and demo.qinglong.io/v1beta1/Widget/ql3-demo/ql3-default are the same object"}},
		{"constraint", sub("'>=0.1.0-0 <1.0.0-0'", "'>=> 1'"), []string{`tool.constraint: ">=> 1" is not a SemVer constraint`}},
		{"tag-only image", sub("registry.k8s.io/pause:3.10@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a", "registry.k8s.io/pause:3.10"), []string{`images[0]: "registry.k8s.io/pause:3.10" is not pinned by digest`}},
		{"images repeated", sub("images:\n  - "+testImage+"\n", "images:\n  - "+testImage+"\n  - "+testImage+"\n"), []string{"images[1]:", "out of order or repeated"}},
		{"source digest", sub(l.Source.Digest, testClusterIdentity), []string{"source.digest:", "is not the digest of source.files"}},
		{"source file digest", sub(l.Source.Files[0].Digest, "md5:x"), []string{`source.files[0].digest: "md5:x" is neither`}},
		{"source file path", sub("{path: admin.yaml,", "{path: /etc/admin.yaml,"), []string{`source.files[0].path: "/etc/admin.yaml" is not a clean relative`}},
		{"source file removed", sub(fileLine, ""), []string{"source.digest:"}},
		{"source files order", func(s string) string {
			return strings.Replace(sub(fileLine, "")(s), "    - {path: worker.yaml", strings.TrimSuffix(fileLine, "\n")+"\n    - {path: worker.yaml", 1)
		}, []string{"source.files[9].path: \"admin.yaml\" is out of order or repeated after \"widget.yaml\""}},
		{"inventory order", sub("name: ql3-admin}\n", "name: ql3-zzz}\n"), []string{"render.inventory:", "out of order"}},
		{"inventory digest", sub(l.Render.InventoryDigest, testClusterIdentity), []string{"render.inventoryDigest:", "is not the digest of render.inventory"}},
		{"redacted but covered", sub(l.Source.Files[0].Digest, RedactedMarker), []string{"render.secretValuesCovered: true, but source.files has \"<redacted>\" entries"}},
		{"several", func(s string) string {
			return strings.Replace(strings.Replace(s, "version: 3.0.0", "version: v3", 1), "fieldManager: kubectl-ql3", "fieldManager: x", 1)
		}, []string{"invalid lock:\n", "release.version:", "tool.fieldManager:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseLock([]byte(tt.edit(string(good))))
			wantInvalid(t, err, tt.want...)
		})
	}
}

func TestVerifyLockReportsEveryField(t *testing.T) {
	l, _ := fixtureLock(t, "v3.0.0", "3.0.0")
	r := mustRender(t, fixtureFS(t, "v3.1.0"), Options{})
	err := VerifyLock(l, r)
	wantInvalid(t, err,
		`release "/rel" does not match its lock:`,
		`images: "`+testImage2+`" is in the release but not in the lock`,
		`source.files["features.yaml"]: read by the kustomization but not in the lock`,
		`source.files["worker.yaml"]: changed`,
		"source.digest: lock "+l.Source.Digest,
		`render.inventory: "v1/ConfigMap/ql3-demo/ql3-features" is in the release but not in the lock`,
		`render.inventory: "v1/Service/ql3-demo/ql3-control-ai" is in the release but not in the lock`,
		"render.count: lock 16, release 18",
		"render.inventoryDigest:",
		"render.digest:",
	)
	var le *LockError
	if !errors.As(err, &le) || len(le.Fields) != 11 {
		t.Fatalf("fields: %+v", le)
	}

	// Drop, namespace and role drift.
	l, _ = fixtureLock(t, "v3.1.0", "3.1.0")
	r = mustRender(t, fixtureFS(t, "v3.1.0-drop"), Options{})
	wantInvalid(t, VerifyLock(l, r), `render.inventory: "v1/Service/ql3-demo/ql3-admin" is in the lock but no longer in the release`)

	files := minimalRelease()
	r = mustRender(t, memFS(t, files), Options{})
	l, err = NewLock(r, "1.0.0", testClusterIdentity, "v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	files["/rel/kustomization.yaml"] = strings.Replace(files["/rel/kustomization.yaml"], "namespace: demo", "namespace: demo2", 1)
	files["/rel/namespace.yaml"] = strings.Replace(files["/rel/namespace.yaml"], "name: demo", "name: demo2", 1)
	files["/rel/app.yaml"] = strings.Replace(files["/rel/app.yaml"], "qinglong.io/role: worker", "qinglong.io/role: batch", 1)
	r = mustRender(t, memFS(t, files), Options{})
	wantInvalid(t, VerifyLock(l, r),
		`release.roles: no workload is labelled qinglong.io/role=<role> for roles ["worker"], and workloads ["apps/v1/Deployment/demo2/ql3-worker (qinglong.io/role=batch)"] carry roles outside`,
		`target.namespace: lock "demo", release "demo2"`)
}

func TestLoadRelease(t *testing.T) {
	fs := fixtureFS(t, "v3.0.0")
	_, _, err := LoadRelease(fs, "/rel", Options{})
	wantInvalid(t, err, `release "/rel" has no ql3.lock.yaml`)

	l, _ := fixtureLock(t, "v3.0.0", "3.0.0")
	data, _ := l.Marshal()
	if err := fs.WriteFile("/rel/"+LockFile, data); err != nil {
		t.Fatal(err)
	}
	r, got, err := LoadRelease(fs, "/rel", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(l, got); diff != "" || r.RenderDigest != l.Render.Digest {
		t.Errorf("loaded lock (-want +got):\n%s", diff)
	}
	// The lock is not a source file: rewriting it does not change the release.
	for _, f := range r.Sources {
		if f.Path == LockFile {
			t.Error("the lock is in the source digest")
		}
	}

	if err := fs.WriteFile("/rel/"+LockFile, append(data, "bogus: 1\n"...)); err != nil {
		t.Fatal(err)
	}
	_, _, err = LoadRelease(fs, "/rel", Options{})
	wantInvalid(t, err, "/rel/ql3.lock.yaml: invalid lock: bogus: unknown field")

	if err := fs.WriteFile("/rel/"+LockFile, data); err != nil {
		t.Fatal(err)
	}
	if err := fs.WriteFile("/rel/config.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ql3-config\ndata: {log-level: debug}\n")); err != nil {
		t.Fatal(err)
	}
	_, _, err = LoadRelease(fs, "/rel", Options{})
	wantInvalid(t, err, `source.files["config.yaml"]: changed`, "render.digest:")
}

// A hand-written lock that lists the Head, otherwise consistent (count and
// inventory digest recomputed), is refused by LoadRelease, which the
// preflight and the apply load every release through.
func TestLoadReleaseRefusesALockListingTheHead(t *testing.T) {
	fs := fixtureFS(t, "v3.0.0")
	l, _ := fixtureLock(t, "v3.0.0", "3.0.0")
	head := Identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: l.Target.Namespace, Name: HeadName}
	l.Render.Inventory = append(l.Render.Inventory, head)
	SortIdentities(l.Render.Inventory)
	l.Render.Count = len(l.Render.Inventory)
	var err error
	if l.Render.InventoryDigest, err = InventoryDigest(l.Render.Inventory); err != nil {
		t.Fatal(err)
	}
	data, err := l.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.WriteFile("/rel/"+LockFile, data); err != nil {
		t.Fatal(err)
	}
	_, _, err = LoadRelease(fs, "/rel", Options{})
	wantInvalid(t, err, "/rel/ql3.lock.yaml: invalid lock: render.inventory[", `"v1/ConfigMap/ql3-demo/qinglong3-deployment-head" is the Head`)
	var le *LockError
	if !errors.As(err, &le) || len(le.Fields) != 1 {
		t.Errorf("want exactly the Head refused, got %+v", le)
	}
}

// The lock binds exact apiVersions: a release that moved an object to
// another version does not match its lock, though the object is the same.
func TestVerifyLockComparesExactVersions(t *testing.T) {
	files := minimalRelease()
	files["/rel/hpa.yaml"] = "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: web\nspec:\n  maxReplicas: 2\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: ql3-worker}\n"
	files["/rel/kustomization.yaml"] += "- hpa.yaml\n"
	l, err := NewLock(mustRender(t, memFS(t, files), Options{}), "1.0.0", testClusterIdentity, "v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	files["/rel/hpa.yaml"] = strings.Replace(files["/rel/hpa.yaml"], "autoscaling/v1", "autoscaling/v2", 1)
	wantInvalid(t, VerifyLock(l, mustRender(t, memFS(t, files), Options{})),
		`render.inventory: "autoscaling/v1/HorizontalPodAutoscaler/demo/web" is in the lock but no longer in the release`,
		`render.inventory: "autoscaling/v2/HorizontalPodAutoscaler/demo/web" is in the release but not in the lock`,
		"render.inventoryDigest:")
}

func TestNewLockErrors(t *testing.T) {
	r := mustRender(t, fixtureFS(t, "v3.0.0"), Options{})
	_, err := NewLock(r, "v3.0.0", testClusterIdentity, "v0.1.0")
	wantInvalid(t, err, `release.version: "v3.0.0" is not strict SemVer`)
	_, err = NewLock(r, "3.0.0", "cluster-1", "v0.1.0")
	wantInvalid(t, err, "target.clusterIdentity")
	_, err = NewLock(r, "3.0.0", testClusterIdentity, "dev")
	wantInvalid(t, err, `tool version "dev" is not SemVer`)
}

func TestToolConstraint(t *testing.T) {
	for v, want := range map[string]string{
		"v0.1.0":      ">=0.1.0-0 <1.0.0-0",
		"0.1.7":       ">=0.1.0-0 <1.0.0-0",
		"v0.0.0-dev":  ">=0.0.0-0 <1.0.0-0",
		"v1.4.2-rc.1": ">=1.4.0-0 <2.0.0-0",
	} {
		got, err := ToolConstraint(v)
		if err != nil || got != want {
			t.Errorf("ToolConstraint(%q) = %q, %v; want %q", v, got, err, want)
		}
	}
	l := &Lock{Tool: LockTool{Constraint: ">=0.1.0-0 <1.0.0-0"}}
	for v, ok := range map[string]bool{
		"v0.1.0": true, "0.1.0": true, "v0.1.0-test": true, "v0.9.3": true, "v0.2.0-rc.1": true,
		"v0.0.9": false, "v1.0.0": false, "v1.0.0-rc.1": false, "v0.0.0-dev": false,
	} {
		err := CheckToolConstraint(l, v)
		if (err == nil) != ok {
			t.Errorf("CheckToolConstraint(%q) = %v, want ok=%t", v, err, ok)
		}
		if err != nil && (!fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), `tool.constraint ">=0.1.0-0 <1.0.0-0"`)) {
			t.Errorf("CheckToolConstraint(%q): %v", v, err)
		}
	}
	wantInvalid(t, CheckToolConstraint(l, "latest"), `plugin version "latest" is not SemVer`)
	// An unstamped source build is told how to stamp itself; a release
	// that is merely too old is not.
	for _, v := range []string{"v0.0.0-dev", "v0.0.0-20261201152555-940eba1f0c3a+dirty"} {
		wantInvalid(t, CheckToolConstraint(l, v), "unstamped build from source: build it with `make build`")
	}
	if err := CheckToolConstraint(l, "v0.0.9"); err == nil || strings.Contains(err.Error(), "unstamped") {
		t.Errorf("CheckToolConstraint(v0.0.9) = %v; want a refusal without the source-build hint", err)
	}
}
