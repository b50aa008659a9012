package deploy_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/inventory"
)

var cp *testcluster.ControlPlane

func TestMain(m *testing.M) {
	testcluster.Main(m, testcluster.Options{ControllerManager: true, AuditLog: true}, &cp)
}

const toolVersion = "v0.1.0-test"

var fixtures = func() string {
	p, err := filepath.Abs("../../testdata/releases")
	if err != nil {
		panic(err)
	}
	return p
}()

var nsSerial atomic.Int64

// targetNamespace creates the control namespace for one test (the Head
// lives there, so it must exist before the first deployment; the release's
// own Namespace object then adopts it). It is deleted at the end.
func targetNamespace(t *testing.T) string {
	n := nsSerial.Add(1)
	name := regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(t.Name()), "-")
	name = strings.Trim("c"+strconv.FormatInt(n, 10)+"-"+name, "-")
	if len(name) > 50 {
		name = strings.TrimRight(name[:50], "-")
	}
	if _, err := cp.Clientset().CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Clientset().CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// release copies fixture into a fresh directory targeting namespace ns,
// optionally relabels it as version, and locks it for the test cluster.
func release(t *testing.T, fixture, ns, version string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), fixture)
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(fixtures, fixture))); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, inventory.LockFile)); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	kpath := filepath.Join(dir, "kustomization.yaml")
	k, err := os.ReadFile(kpath)
	if err != nil {
		t.Fatal(err)
	}
	ks := strings.Replace(string(k), "namespace: ql3-demo", "namespace: "+ns, 1)
	if version != "" {
		ks = regexp.MustCompile(`app.kubernetes.io/version: .*`).ReplaceAllString(ks, "app.kubernetes.io/version: "+version)
	}
	if err := os.WriteFile(kpath, []byte(ks), 0o644); err != nil {
		t.Fatal(err)
	}
	if version == "" {
		version = strings.TrimPrefix(strings.SplitN(fixture, "-", 2)[0], "v")
	}
	lockRelease(t, dir, version)
	return dir
}

// editReleaseFile rewrites file of the release in dir with edit, which
// must change it, and locks the release again as version.
func editReleaseFile(t *testing.T, dir, file, version string, edit func(string) string) {
	t.Helper()
	path := filepath.Join(dir, file)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := edit(string(data))
	if edited == string(data) {
		t.Fatalf("fixture: %s unchanged", file)
	}
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	lockRelease(t, dir, version)
}

func lockRelease(t *testing.T, dir, version string) {
	t.Helper()
	fs := filesys.MakeFsOnDisk()
	rel, err := inventory.Render(fs, dir, inventory.Options{})
	if err != nil {
		t.Fatalf("render %s: %v", dir, err)
	}
	lock, err := inventory.NewLock(rel, version, clusterIdentity(t), toolVersion)
	if err != nil {
		t.Fatal(err)
	}
	data, err := lock.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, inventory.LockFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func clusterIdentity(t *testing.T) string {
	t.Helper()
	id, err := deploy.ReadClusterIdentity(context.Background(), deploy.NewIdentityReader(cp.Clientset()))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// userConfig is a client configuration for a distinct admin user, so the
// audit log can tell each simulated operator apart.
func userConfig(t *testing.T, user string, groups ...string) *rest.Config {
	t.Helper()
	path, err := cp.Kubeconfig(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	return cfg
}

func cluster(t *testing.T, cfg *rest.Config) deploy.Cluster {
	t.Helper()
	cl, err := deploy.NewKubeCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func options(t *testing.T, cl deploy.Cluster, receiptsDir string) deploy.Options {
	return deploy.Options{
		Cluster:     cl,
		FS:          filesys.MakeFsOnDisk(),
		ToolVersion: toolVersion,
		Timeout:     2 * time.Minute,
		ReceiptsDir: receiptsDir,
		Progress:    testWriter{t},
	}
}

func headOf(t *testing.T, ns string) *deploy.Head {
	t.Helper()
	h, err := deploy.ReadHead(context.Background(), cluster(t, cp.RESTConfig()), ns)
	if err != nil {
		t.Fatalf("read head: %v", err)
	}
	return h
}

// dropResponse lets matching requests reach the server, then throws the
// answer away and reports a broken connection: the mutation happened, the
// client cannot know.
type dropResponse struct {
	next  http.RoundTripper
	match func(*http.Request, []byte) bool
	times int32 // how many matching responses to drop
	fired atomic.Int32
	mu    sync.Mutex
}

func (d *dropResponse) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil && req.GetBody != nil {
		rc, err := req.GetBody()
		if err == nil {
			body, _ = io.ReadAll(rc)
			rc.Close()
		}
	}
	resp, err := d.next.RoundTrip(req)
	if err != nil || !d.match(req, body) {
		return resp, err
	}
	if d.fired.Add(1) > d.times {
		return resp, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil, errors.New("injected fault: response lost after the server executed the request")
}

func withDrop(cfg *rest.Config, match func(*http.Request, []byte) bool) (*rest.Config, *dropResponse) {
	d := &dropResponse{match: match, times: 1}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { d.next = rt; return d })
	return cfg, d
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
