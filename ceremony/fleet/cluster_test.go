package fleet_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/fleetfile"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// Three real API servers, each its own etcd and so its own cluster
// identity: a fleet's claims are about clusters, not namespaces.
var cps []*testcluster.ControlPlane

func TestMain(m *testing.M) {
	if file := os.Getenv(driverEnv); file != "" {
		os.Exit(driver(file, os.Getenv(driverPlanEnv)))
	}
	testcluster.MainMany(m, testcluster.Options{ControllerManager: true, AuditLog: true}, 3, &cps)
}

const toolVersion = "v0.1.0-test"

var fixtures = filepath.Join("..", "..", "testdata", "releases")

var nsSerial atomic.Int64

// bed is a fleet on disk: its directory, one kubeconfig per cluster
// (copied in, as a fleet file's paths stay inside its directory), and its
// targets' namespaces.
type bed struct {
	dir     string
	targets []tgt
}

type tgt struct {
	name, ns, ring string
	cluster        int
}

// newBed makes perCluster namespaces on each cluster and the fleet
// directory; rings[i] labels target i.
func newBed(t *testing.T, perCluster int, rings []string) *bed {
	t.Helper()
	b := &bed{dir: t.TempDir()}
	if err := os.MkdirAll(filepath.Join(b.dir, "kubeconfigs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for c, cp := range cps {
		data, err := os.ReadFile(cp.AdminKubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(b.dir, "kubeconfigs", fmt.Sprintf("c%d.yaml", c)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i := range perCluster * len(cps) {
		c := i % len(cps)
		ns := fmt.Sprintf("fl%d-c%d", nsSerial.Add(1), c)
		if _, err := cps[c].Clientset().CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		b.targets = append(b.targets, tgt{name: fmt.Sprintf("t%02d", i), ns: ns, ring: rings[i], cluster: c})
	}
	return b
}

// release writes target g's release directory from fixture, in g's
// namespace, relabelled version (the fixture's own when "").
func (b *bed) release(t *testing.T, g tgt, fixture, version string) {
	t.Helper()
	dir := filepath.Join(b.dir, "releases", g.name)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(fixtures, fixture))); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(filepath.Join(dir, inventory.LockFile))
	kpath := filepath.Join(dir, "kustomization.yaml")
	k, err := os.ReadFile(kpath)
	if err != nil {
		t.Fatal(err)
	}
	ks := strings.Replace(string(k), "namespace: ql3-demo", "namespace: "+g.ns, 1)
	if version != "" {
		ks = regexp.MustCompile(`app.kubernetes.io/version: .*`).ReplaceAllString(ks, "app.kubernetes.io/version: "+version)
	}
	if err := os.WriteFile(kpath, []byte(ks), 0o644); err != nil {
		t.Fatal(err)
	}
}

// file writes the fleet file: targets by label ring, and waves.
func (b *bed) file(t *testing.T, waves string) *fleetfile.Fleet {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString("schema: kubectl-ql3/fleet@v1\ntargets:\n")
	for _, g := range b.targets {
		fmt.Fprintf(&buf, "- name: %s\n  labels: {ring: %s}\n  kubeconfig: kubeconfigs/c%d.yaml\n  namespace: %s\n  release: releases/%s\n", g.name, g.ring, g.cluster, g.ns, g.name)
	}
	buf.WriteString("waves:\n" + waves)
	path := filepath.Join(b.dir, "fleet.yaml")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := fleetfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// options are the driver's: each target through its own kubeconfig.
func options(_ *testing.T, progress *bytes.Buffer) *fleet.Options {
	return &fleet.Options{
		Connect: func(f *fleetfile.Fleet, tg fleetfile.Target) (deploy.Cluster, error) {
			cfg, err := clientcmd.BuildConfigFromFlags("", f.Path(tg.Kubeconfig))
			if err != nil {
				return nil, err
			}
			cfg.QPS, cfg.Burst = 2000, 4000 // as the plugin sets them: client-go's 5/10 would pace a deploy
			return deploy.NewKubeCluster(cfg)
		},
		Deploy:   deploy.Options{FS: filesys.MakeFsOnDisk(), ToolVersion: toolVersion, Timeout: 2 * time.Minute},
		Parallel: 4,
		Progress: progress,
	}
}

// writesIn counts the completed writes the API server of cluster c logged
// in namespace ns.
func writesIn(t *testing.T, c int, ns string) int {
	t.Helper()
	evs, err := cps[c].Writes(func(e testcluster.AuditEvent) bool { return e.ObjectRef.Namespace == ns })
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

func headOf(t *testing.T, c int, ns string) *deploy.Head {
	t.Helper()
	cl, err := deploy.NewKubeCluster(cps[c].RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	h, err := deploy.ReadHead(context.Background(), cl, ns)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
