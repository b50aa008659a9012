package plugin_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/ceremony/fleet/plan"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
)

// One target at a time, as a pod of the fleet's Job runs it, through the
// built binary: `fleet apply --wave W --index I` with the kubeconfig from
// a directory moves that target alone and reads it back; a plan other
// than the pinned digest is tamper (5), an index out of the wave invalid
// (2). And `fleet job` prints the wave's ConfigMap (the files laid out by
// items) and Indexed Job, or with --rbac the namespace's RBAC.
func TestCLIFleetOneTargetAndJob(t *testing.T) {
	dir, file := cliFleet(t)
	mustRunOK(t, "fleet", "lock", file, "--version", "3.0.0")
	mustRunOK(t, "fleet", "preflight", file)
	planPath := filepath.Join(dir, "plan", "plan.json")
	p, err := plan.Parse(planPath, []byte(read(t, planPath)))
	if err != nil {
		t.Fatal(err)
	}
	kdir := t.TempDir()
	testkit.WriteFile(t, filepath.Join(kdir, "t1"), []byte(read(t, cp.AdminKubeconfig)), 0o600)

	zero := "sha256:" + strings.Repeat("0", 64)
	if _, stderr, code := run(t, nil, "fleet", "apply", file, "--wave", "second", "--index", "0", "--plan-digest", zero, "--kubeconfig-dir", kdir); code != 5 || !strings.Contains(stderr, "--plan-digest") {
		t.Fatalf("a plan other than the pinned one: exit %d, want 5\n%s", code, stderr)
	}
	if _, stderr, code := run(t, nil, "fleet", "apply", file, "--wave", "second", "--index", "1"); code != 2 || !strings.Contains(stderr, "--index 1: wave second has 1 target(s)") {
		t.Fatalf("an index out of the wave: exit %d, want 2\n%s", code, stderr)
	}
	mustRunOK(t, "fleet", "apply", file, "--wave", "second", "--index", "0", "--plan-digest", p.SelfDigest, "--kubeconfig-dir", kdir)
	out, _, _ := run(t, nil, "fleet", "status", file)
	if !regexp.MustCompile(`t1\s+second\s+\S+\s+at plan`).MatchString(out) || !regexp.MustCompile(`t0\s+first\s+\S+\s+absent`).MatchString(out) {
		t.Fatalf("after one target (t1): want t1 at plan, t0 absent:\n%s", out)
	}
	mustRunOK(t, "receipt", "audit", filepath.Join(dir, "receipts", "t1"))

	if _, stderr, code := run(t, nil, "fleet", "job", file, "--wave", "first", "--image", "x"); code != 2 || !strings.Contains(stderr, "--namespace") {
		t.Fatalf("fleet job without -n: exit %d, want 2\n%s", code, stderr)
	}
	image := "registry.example/kubectl-ql3:v0.1.0@sha256:" + strings.Repeat("a", 64)
	for _, args := range [][]string{{"fleet", "job", file, "--wave", "second"}, {"fleet", "apply", file, "--via-job"}} {
		tagged := append(args, "-n", "ql3-fleet", "--image", "registry.example/kubectl-ql3:v0.1.0")
		if out, stderr, code := run(t, nil, tagged...); code != 2 || out != "" || !strings.Contains(stderr, `--image "registry.example/kubectl-ql3:v0.1.0" is not pinned by digest`) {
			t.Fatalf("%s with a tagged image: exit %d, want 2 naming --image\n%s%s", args[1], code, out, stderr)
		}
	}
	printed := mustRunOK(t, "fleet", "job", file, "--wave", "second", "-n", "ql3-fleet", "--image", image)
	docs := strings.Split(printed, "\n---\n")
	var cm corev1.ConfigMap
	var job batchv1.Job
	if len(docs) != 2 || yaml.UnmarshalStrict([]byte(docs[0]), &cm) != nil || yaml.UnmarshalStrict([]byte(docs[1]), &job) != nil {
		t.Fatalf("fleet job: want a ConfigMap and a Job:\n%s", printed)
	}
	checkJobFiles(t, dir, &cm, &job)
	args := strings.Join(job.Spec.Template.Spec.Containers[0].Args, " ")
	if want := "fleet apply /ql3/fleet/fleet.yaml --plan /ql3/plan/plan.json --plan-digest " + p.SelfDigest +
		" --wave second --index $(JOB_COMPLETION_INDEX) --kubeconfig-dir /kubeconfigs --receipts-dir /receipts"; args != want {
		t.Fatalf("the pod's args:\n%s\nwant\n%s", args, want)
	}
	rbac := mustRunOK(t, "fleet", "job", "--rbac", "-n", "ql3-fleet", "--bind-user", "ci-bot")
	for _, want := range []string{"kind: ServiceAccount", "automountServiceAccountToken: false", "kind: Role\n", "kind: RoleBinding", "name: ci-bot"} {
		if !strings.Contains(rbac, want) {
			t.Errorf("fleet job --rbac lacks %q:\n%s", want, rbac)
		}
	}
	if strings.Contains(rbac, "ClusterRole") {
		t.Errorf("fleet job --rbac prints something cluster-wide:\n%s", rbac)
	}
}

// checkJobFiles: every item of the Job's files volume is a key of the
// ConfigMap whose content is the file at that path (fleet/… under the
// fleet's directory, plan/… under the plan's), and the wave's files are
// all there: the fleet file, t1's release, the plan, t1's record.
func checkJobFiles(t *testing.T, dir string, cm *corev1.ConfigMap, job *batchv1.Job) {
	t.Helper()
	var items []corev1.KeyToPath
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == cm.Name {
			items = v.ConfigMap.Items
		}
	}
	paths := map[string]bool{}
	for _, it := range items {
		paths[it.Path] = true
		rel, ok := strings.CutPrefix(it.Path, "fleet/")
		if !ok {
			rel = "plan/" + strings.TrimPrefix(it.Path, "plan/")
		}
		if got, want := cm.Data[it.Key], read(t, filepath.Join(dir, filepath.FromSlash(rel))); got != want {
			t.Errorf("item %s -> %s: the ConfigMap holds %d bytes, the file %d", it.Key, it.Path, len(got), len(want))
		}
	}
	entries, err := os.ReadDir(filepath.Join(dir, "releases", "second"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"fleet/fleet.yaml", "plan/plan.json", "plan/preflights/t1.json"}
	for _, e := range entries {
		want = append(want, "fleet/releases/second/"+e.Name())
	}
	for _, w := range want {
		if !paths[w] {
			t.Errorf("the Job's files lack %s (have %v)", w, paths)
		}
	}
	if len(paths) != len(want) || paths["fleet/releases/first/kustomization.yaml"] {
		t.Errorf("the Job's files: %v, want exactly %v", paths, want)
	}
}
