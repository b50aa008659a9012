package inventory

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

func TestRenderFixtures(t *testing.T) {
	v300 := mustRender(t, fixtureFS(t, "v3.0.0"), Options{})
	v310 := mustRender(t, fixtureFS(t, "v3.1.0"), Options{})
	drop := mustRender(t, fixtureFS(t, "v3.1.0-drop"), Options{})

	for name, r := range map[string]*Release{"v3.0.0": v300, "v3.1.0": v310, "v3.1.0-drop": drop} {
		if r.ControlNamespace != "ql3-demo" {
			t.Errorf("%s: control namespace %q", name, r.ControlNamespace)
		}
		if err := r.CheckRoles(ProductionRoles()); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if err := CheckSortedUnique(r.Inventory); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if len(r.Objects) != len(r.Inventory) {
			t.Fatalf("%s: %d objects, %d identities", name, len(r.Objects), len(r.Inventory))
		}
		for i, o := range r.Objects {
			if id := (Identity{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}); id != r.Inventory[i] {
				t.Errorf("%s: object %d is %s, inventory says %s", name, i, id, r.Inventory[i])
			}
		}
		if !r.SecretValuesCovered {
			t.Errorf("%s: no Secrets, yet values not covered", name)
		}
		for _, d := range []string{r.SourceDigest, r.RenderDigest, r.InventoryDigest} {
			if !IsDigest(d) {
				t.Errorf("%s: bad digest %q", name, d)
			}
		}
	}
	if len(v300.Inventory) != 16 || len(v310.Inventory) != 18 || len(drop.Inventory) != 17 {
		t.Errorf("counts %d %d %d, want 16 18 17", len(v300.Inventory), len(v310.Inventory), len(drop.Inventory))
	}
	if got := Missing(v300.Inventory, v310.Inventory); len(got) != 0 {
		t.Errorf("v3.1.0 lacks %v from v3.0.0", got)
	}
	want := []Identity{{APIVersion: "v1", Kind: "Service", Namespace: "ql3-demo", Name: "ql3-admin"}}
	if diff := cmp.Diff(want, Missing(v300.Inventory, drop.Inventory)); diff != "" {
		t.Errorf("v3.1.0-drop omits (-want +got):\n%s", diff)
	}
	if v300.RenderDigest == v310.RenderDigest || v300.SourceDigest == v310.SourceDigest {
		t.Error("v3.0.0 and v3.1.0 render or source digests are equal")
	}
	if diff := cmp.Diff([]string{testImage}, v300.Images); diff != "" {
		t.Errorf("v3.0.0 images (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{testImage2, testImage}, v310.Images); diff != "" {
		t.Errorf("v3.1.0 images (-want +got):\n%s", diff)
	}

	// Rendering is deterministic.
	again := mustRender(t, fixtureFS(t, "v3.0.0"), Options{})
	if again.SourceDigest != v300.SourceDigest || again.RenderDigest != v300.RenderDigest || again.InventoryDigest != v300.InventoryDigest {
		t.Error("two renders of v3.0.0 differ")
	}
}

func TestRenderSourceFiles(t *testing.T) {
	files := minimalRelease()
	// An overlay whose base lives outside the release directory.
	files["/base/kustomization.yaml"] = files["/rel/kustomization.yaml"]
	files["/base/namespace.yaml"] = files["/rel/namespace.yaml"]
	files["/base/app.yaml"] = files["/rel/app.yaml"]
	files["/rel/kustomization.yaml"] = "resources:\n- ../base\n"
	delete(files, "/rel/namespace.yaml")
	delete(files, "/rel/app.yaml")
	files["/rel/unreferenced.yaml"] = "not: read\n"
	files["/rel/"+LockFile] = "schema: whatever\n"
	r := mustRender(t, memFS(t, files), Options{})
	var paths []string
	for _, f := range r.Sources {
		paths = append(paths, f.Path)
		if f.Digest != FileDigest([]byte(files["/"+strings.TrimPrefix(strings.ReplaceAll("rel/"+f.Path, "rel/../", ""), "/")])) {
			t.Errorf("%s: digest %s", f.Path, f.Digest)
		}
	}
	want := []string{"../base/app.yaml", "../base/kustomization.yaml", "../base/namespace.yaml", "kustomization.yaml"}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Errorf("source paths (-want +got):\n%s", diff)
	}
	d, _ := SourceDigest(r.Sources)
	if d != r.SourceDigest {
		t.Errorf("source digest %s, recomputed %s", r.SourceDigest, d)
	}
}

func TestRenderBadInput(t *testing.T) {
	tests := []struct {
		name string
		edit func(files map[string]string)
		want []string
	}{
		{"no kustomization", func(f map[string]string) { delete(f, "/rel/kustomization.yaml") },
			[]string{`release "/rel" has no kustomization`}},
		{"invalid kustomization field", func(f map[string]string) { f["/rel/kustomization.yaml"] += "resourcez: [x]\n" },
			[]string{`release "/rel"`, "resourcez"}},
		{"invalid yaml", func(f map[string]string) { f["/rel/namespace.yaml"] = "apiVersion: v1\nkind: [Namespace\n" },
			[]string{`release "/rel"`, "namespace.yaml"}},
		{"missing resource", func(f map[string]string) { f["/rel/kustomization.yaml"] += "- gone.yaml\n" },
			[]string{`kustomization "kustomization.yaml": resources entry "gone.yaml" does not exist in the release tree`}},
		{"remote url", func(f map[string]string) {
			f["/rel/kustomization.yaml"] += "- https://raw.githubusercontent.com/example/x/main/deploy.yaml\n"
		}, []string{`resources entry "https://raw.githubusercontent.com/example/x/main/deploy.yaml" is remote`}},
		{"git base", func(f map[string]string) {
			f["/rel/kustomization.yaml"] += "- github.com/example/repo//deploy?ref=v1\n"
		},
			[]string{`resources entry "github.com/example/repo//deploy?ref=v1"`}},
		{"remote patch", func(f map[string]string) {
			f["/rel/kustomization.yaml"] += "patches:\n- path: https://example.com/p.yaml\n"
		}, []string{`patches entry "https://example.com/p.yaml" is remote`}},
		{"helm chart", func(f map[string]string) {
			f["/rel/kustomization.yaml"] += "helmCharts:\n- name: x\n  repo: https://charts.example.com\n"
		}, []string{`helmCharts[0]: chart "x" is fetched from a repository`, "helm pull x --repo https://charts.example.com --untar --untardir charts"}},
		{"lock as input", func(f map[string]string) {
			f["/rel/"+LockFile] = "x: y\n"
			f["/rel/kustomization.yaml"] += "configMapGenerator:\n- name: c\n  files: [" + LockFile + "]\n"
		}, []string{`reads "ql3.lock.yaml"`}},
		{"tag-only image", func(f map[string]string) {
			f["/rel/app.yaml"] = strings.Replace(f["/rel/app.yaml"], testImage, "nginx:1.27", 1)
		}, []string{`"apps/v1/Deployment/demo/ql3-admin"`, `container "main"`, `image "nginx:1.27" is not pinned`, `(in ["app.yaml"])`}},
		{"unpinned init container", func(f map[string]string) {
			f["/rel/app.yaml"] = strings.Replace(f["/rel/app.yaml"], "      containers:\n", "      initContainers:\n      - name: init\n        image: busybox@sha256:abc\n      containers:\n", 1)
		}, []string{`init container "init": image "busybox@sha256:abc" is not pinned`}},
		{"unpinned image volume", func(f map[string]string) {
			f["/rel/app.yaml"] = strings.Replace(f["/rel/app.yaml"], "      containers:\n", "      volumes:\n      - name: tools\n        image: {reference: busybox:latest}\n      containers:\n", 1)
		}, []string{`image volume "tools": image "busybox:latest" is not pinned`}},
		{"image volume without a reference", func(f map[string]string) {
			f["/rel/app.yaml"] = strings.Replace(f["/rel/app.yaml"], "      containers:\n", "      volumes:\n      - name: tools\n        image: {pullPolicy: Always}\n      containers:\n", 1)
		}, []string{`image volume "tools" has no reference`}},
		{"cronjob image", func(f map[string]string) {
			f["/rel/job.yaml"] = "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: nightly\nspec:\n  schedule: '@daily'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          containers:\n          - name: run\n            image: busybox:latest\n"
			f["/rel/kustomization.yaml"] += "- job.yaml\n"
		}, []string{`"batch/v1/CronJob/demo/nightly"`, `container "run": image "busybox:latest"`}},
		{"missing image", func(f map[string]string) {
			f["/rel/app.yaml"] = strings.Replace(f["/rel/app.yaml"], "        image: "+testImage+"\n", "", 1)
		}, []string{`container "main" has no image`}},
		{"duplicate identity", func(f map[string]string) {
			f["/rel/hpa.yaml"] = "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: web\nspec:\n  maxReplicas: 2\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: ql3-worker}\n---\napiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: web\nspec:\n  maxReplicas: 2\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: ql3-worker}\n"
			f["/rel/kustomization.yaml"] += "- hpa.yaml\n"
		}, []string{"web"}},
		{"head configmap", func(f map[string]string) {
			f["/rel/head.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: qinglong3-deployment-head\ndata: {head.json: '{}'}\n"
			f["/rel/kustomization.yaml"] += "- head.yaml\n"
		}, []string{`release "/rel": object "v1/ConfigMap/demo/qinglong3-deployment-head" (in ["head.yaml"]): the name "qinglong3-deployment-head" is reserved for the Head`}},
		{"head configmap made by a name prefix", func(f map[string]string) {
			f["/rel/sub/kustomization.yaml"] = "namePrefix: qinglong3-\nresources: [cm.yaml]\n"
			f["/rel/sub/cm.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deployment-head\n"
			f["/rel/kustomization.yaml"] += "- sub\n"
		}, []string{`release "/rel": object "v1/ConfigMap/demo/qinglong3-deployment-head": the name "qinglong3-deployment-head" is reserved`}},
		{"two control namespaces", func(f map[string]string) {
			f["/rel/other.yaml"] = deployment("ql3-control-2", "elsewhere", "control", testImage)
			f["/rel/kustomization.yaml"] = "resources:\n- namespace.yaml\n- app.yaml\n- other.yaml\n"
			f["/rel/app.yaml"] = strings.ReplaceAll(f["/rel/app.yaml"], "metadata:\n  name: ql3-", "metadata:\n  namespace: demo\n  name: ql3-")
		}, []string{`control workloads are in namespaces "demo" and "elsewhere"`}},
		{"namespaced without namespace", func(f map[string]string) {
			f["/rel/kustomization.yaml"] = strings.Replace(f["/rel/kustomization.yaml"], "namespace: demo\n", "", 1)
		}, []string{`"apps/v1/Deployment/-/ql3-admin" is namespaced but has no metadata.namespace`}},
		{"cluster-scoped with namespace", func(f map[string]string) {
			f["/rel/cr.yaml"] = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: reader\n  namespace: demo\nrules: []\n"
			f["/rel/kustomization.yaml"] += "- cr.yaml\n"
		}, []string{`"rbac.authorization.k8s.io/v1/ClusterRole/demo/reader" is cluster-scoped but has metadata.namespace "demo"`}},
		{"unknown kind offline", func(f map[string]string) {
			f["/rel/cert.yaml"] = "apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata:\n  name: web\nspec: {}\n"
			f["/rel/kustomization.yaml"] += "- cert.yaml\n"
		}, []string{`kind "Certificate" of "cert-manager.io/v1" is unknown offline`, "--context"}},
		{"cluster-scoped custom resource", func(f map[string]string) {
			f["/rel/crd.yaml"] = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gadgets.demo.qinglong.io\nspec:\n  group: demo.qinglong.io\n  scope: Cluster\n  names: {kind: Gadget, plural: gadgets}\n  versions: []\n---\napiVersion: demo.qinglong.io/v1\nkind: Gadget\nmetadata:\n  name: g\n"
			f["/rel/kustomization.yaml"] += "- crd.yaml\n"
		}, []string{`"demo.qinglong.io/v1/Gadget/demo/g" is cluster-scoped`}},
		{"bad crd scope", func(f map[string]string) {
			f["/rel/crd.yaml"] = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gadgets.demo.qinglong.io\nspec:\n  group: demo.qinglong.io\n  scope: Global\n  names: {kind: Gadget, plural: gadgets}\n  versions: []\n"
			f["/rel/kustomization.yaml"] += "- crd.yaml\n"
		}, []string{`spec.scope "Global"`}},
		{"secret data", func(f map[string]string) {
			f["/rel/secret.yaml"] = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: hunter2\n"
			f["/rel/kustomization.yaml"] += "- secret.yaml\n"
		}, []string{`Secret "v1/Secret/demo/db" carries data`, "--allow-secret-data"}},
		{"secret generator", func(f map[string]string) {
			f["/rel/kustomization.yaml"] += "secretGenerator:\n- name: api\n  literals: [token=s3cr3t]\n"
		}, []string{`v1/Secret/demo/api-`, "--allow-secret-data"}},
		{"generateName", func(f map[string]string) {
			f["/rel/job.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  generateName: x-\n"
			f["/rel/kustomization.yaml"] += "- job.yaml\n"
		}, []string{`release "/rel"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := minimalRelease()
			tt.edit(files)
			fs := memFS(t, files)
			_, err := Render(fs, "/rel", Options{})
			wantInvalid(t, err, tt.want...)
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("error shows a Secret value: %v", err)
			}
			// Rendering never writes: the file system holds what it held.
			for p, data := range files {
				got, err := fs.ReadFile(p)
				if err != nil || string(got) != data {
					t.Errorf("%s changed or vanished", p)
				}
			}
			if fs.Exists("/rel/"+LockFile) && files["/rel/"+LockFile] == "" {
				t.Errorf("a lock was written")
			}
		})
	}
}

func TestRenderNotADirectory(t *testing.T) {
	fs := memFS(t, minimalRelease())
	_, err := Render(fs, "/rel/app.yaml", Options{})
	wantInvalid(t, err, `release "/rel/app.yaml" is not a directory`)
	_, err = Render(fs, "/nowhere", Options{})
	wantInvalid(t, err, `release "/nowhere"`)
	_, err = Render(fs, "/rel", Options{SecretDigestKey: []byte("short")})
	wantInvalid(t, err, "secret digest key has 5 bytes; need at least 32")
}

func TestCheckRoles(t *testing.T) {
	files := minimalRelease()
	files["/rel/app.yaml"] = strings.Join([]string{
		deployment("a", "", "control", testImage),
		deployment("b", "", "worker", testImage),
		deployment("c", "", "scheduler", testImage),
	}, "---\n")
	r := mustRender(t, memFS(t, files), Options{})
	err := r.CheckRoles(ProductionRoles())
	if err == nil || !strings.Contains(err.Error(), `roles ["admin" "control-ai"]`) || !strings.Contains(err.Error(), "qinglong.io/role=scheduler") {
		t.Fatalf("CheckRoles = %v", err)
	}
	_, err = NewLock(r, "3.0.0", testClusterIdentity, "v0.1.0")
	wantInvalid(t, err, `release "/rel"`, `"admin"`, `"control-ai"`)
	// The label only counts on workloads.
	files = minimalRelease()
	files["/rel/app.yaml"] = strings.ReplaceAll(files["/rel/app.yaml"], "kind: Deployment\nmetadata:\n  name: ql3-admin", "kind: Deployment\nmetadata:\n  name: ql3-admin")
	files["/rel/svc.yaml"] = "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  labels: {qinglong.io/role: other}\nspec:\n  ports: [{port: 80}]\n"
	files["/rel/kustomization.yaml"] += "- svc.yaml\n"
	r = mustRender(t, memFS(t, files), Options{})
	if err := r.CheckRoles(ProductionRoles()); err != nil {
		t.Fatalf("a Service's role label counted: %v", err)
	}
}

func TestRenderScopeWithMapper(t *testing.T) {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}, meta.RESTScopeNamespace)

	files := minimalRelease()
	files["/rel/cert.yaml"] = "apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata:\n  name: web\nspec: {}\n"
	files["/rel/kustomization.yaml"] += "- cert.yaml\n"
	if _, err := Render(memFS(t, files), "/rel", Options{Mapper: m}); err != nil {
		t.Fatalf("online render: %v", err)
	}
	_, err := Render(memFS(t, files), "/rel", Options{})
	wantInvalid(t, err, "unknown offline")

	// A kind the cluster does not serve, and no CRD defines.
	files["/rel/cm.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"
	files["/rel/kustomization.yaml"] += "- cm.yaml\n"
	_, err = Render(memFS(t, files), "/rel", Options{Mapper: m})
	wantInvalid(t, err, `kind "ConfigMap" of "v1" is not served by the cluster`)

	// The fixture's Widget is not served yet; its CRD in the render decides.
	m.Add(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, meta.RESTScopeRoot)
	for _, k := range []string{"ConfigMap", "Service", "ServiceAccount"} {
		m.Add(schema.GroupVersionKind{Version: "v1", Kind: k}, meta.RESTScopeNamespace)
	}
	for _, k := range []string{"Role", "RoleBinding"} {
		m.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: k}, meta.RESTScopeNamespace)
	}
	m.Add(schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}, meta.RESTScopeNamespace)
	online := mustRender(t, fixtureFS(t, "v3.0.0"), Options{Mapper: m})
	offlineR := mustRender(t, fixtureFS(t, "v3.0.0"), Options{})
	if online.RenderDigest != offlineR.RenderDigest || online.InventoryDigest != offlineR.InventoryDigest {
		t.Error("scope source changed the render")
	}

	// A mapper that cannot answer is "unavailable", not "invalid".
	_, err = Render(fixtureFS(t, "v3.0.0"), "/rel", Options{Mapper: brokenMapper{m}})
	if !fail.Is(err, fail.Unavailable) {
		t.Fatalf("broken mapper: %v (%s)", err, fail.ClassOf(err))
	}
}

type brokenMapper struct{ meta.RESTMapper }

func (brokenMapper) RESTMapping(schema.GroupKind, ...string) (*meta.RESTMapping, error) {
	return nil, errors.New("discovery: connection refused")
}

func TestRenderRefusesWrites(t *testing.T) {
	rec := newRecorder(filesys.MakeFsInMemory(), "/")
	for name, err := range map[string]error{
		"WriteFile": rec.WriteFile("/x", nil),
		"MkdirAll":  rec.MkdirAll("/x"),
		"RemoveAll": rec.RemoveAll("/x"),
	} {
		if err == nil {
			t.Errorf("%s succeeded", name)
		}
	}
	if _, err := rec.Open("/x"); err == nil {
		t.Error("Open succeeded")
	}
}

func TestIsPinnedImage(t *testing.T) {
	hex := strings.Repeat("a", 64)
	for img, want := range map[string]bool{
		"nginx@sha256:" + hex:                                 true,
		"nginx:1.27@sha256:" + hex:                            true,
		"registry.example.com:5000/team/app:v1@sha256:" + hex: true,
		"localhost/app@sha256:" + hex:                         true,
		"nginx:1.27":                                          false,
		"nginx":                                               false,
		"nginx@sha256:" + strings.Repeat("A", 64):             false,
		"nginx@sha256:" + hex[:63]:                            false,
		"nginx@sha512:" + hex + hex:                           false,
		"Nginx@sha256:" + hex:                                 false,
		" nginx@sha256:" + hex:                                false,
		"nginx@sha256:" + hex + "\n":                          false,
	} {
		if got := IsPinnedImage(img); got != want {
			t.Errorf("IsPinnedImage(%q) = %t", img, got)
		}
	}
}

func TestRenderImagesEverywhere(t *testing.T) {
	hex := func(c string) string { return strings.Repeat(c, 64) }
	files := minimalRelease()
	files["/rel/more.yaml"] = `apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  initContainers: [{name: i, image: "a.example/init@sha256:` + hex("1") + `"}]
  containers: [{name: c, image: "a.example/main@sha256:` + hex("2") + `"}]
  ephemeralContainers: [{name: e, image: "a.example/debug@sha256:` + hex("3") + `"}]
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: cj
spec:
  schedule: "@daily"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: c, image: "a.example/cron@sha256:` + hex("4") + `"}]
---
apiVersion: v1
kind: PodTemplate
metadata:
  name: pt
template:
  spec:
    containers: [{name: c, image: "a.example/tmpl@sha256:` + hex("5") + `"}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: ss
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      containers: [{name: c, image: "a.example/sts@sha256:` + hex("6") + `"}]
      volumes: [{name: data, image: {reference: "a.example/data@sha256:` + hex("7") + `"}}, {name: scratch, emptyDir: {}}]
`
	files["/rel/kustomization.yaml"] += "- more.yaml\n"
	r := mustRender(t, memFS(t, files), Options{})
	want := []string{
		"a.example/cron@sha256:" + hex("4"), "a.example/data@sha256:" + hex("7"), "a.example/debug@sha256:" + hex("3"), "a.example/init@sha256:" + hex("1"),
		"a.example/main@sha256:" + hex("2"), "a.example/sts@sha256:" + hex("6"), "a.example/tmpl@sha256:" + hex("5"), testImage,
	}
	if diff := cmp.Diff(want, r.Images); diff != "" {
		t.Errorf("images (-want +got):\n%s", diff)
	}
	if !slices.IsSorted(r.Images) {
		t.Error("images not sorted")
	}
}
