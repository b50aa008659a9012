// Package testcluster starts a real Kubernetes control plane on loopback for
// tests: etcd and kube-apiserver (and optionally kube-controller-manager) built
// from the Go module proxy by hack/controlplane.sh. It hands tests an admin
// kubeconfig, restricted-user kubeconfigs for RBAC tests (client certificates,
// and with Options.OIDC tokens of a test issuer through an exec credential
// plugin: docs/test-identities.md), and fresh namespaces.
//
// There are no fakes here: resourceVersion compare-and-swap, server-side apply,
// dry-run, admission and RBAC are kube-apiserver's own.
package testcluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/qinglong/kubectl-ql3/internal/testkit"
)

// Options choose what to run besides etcd and kube-apiserver.
type Options struct {
	// ControllerManager also starts kube-controller-manager, so namespaces
	// finish deleting, ServiceAccounts get tokens and workloads converge.
	ControllerManager bool
	// AuditLog makes kube-apiserver log every write (Metadata level) to
	// AuditLogPath, the server-side record of who wrote what.
	AuditLog bool
	// ServiceCIDR overrides the Service cluster IP range (default 10.96.0.0/16).
	ServiceCIDR string
	// Node also starts a node on this machine — containerd, kube-scheduler
	// and a kubelet — so pods run (it implies ControllerManager). It needs
	// root and what `make controlplane` and hack/node-packages.sh install;
	// the images it offers are nodeimage's local tags.
	Node bool
	// OIDC also starts a test OpenID Connect issuer in the test process and
	// configures kube-apiserver's JWT authenticator (--authentication-config)
	// to trust it next to client certificates; OIDCUser gives a kubeconfig
	// whose user gets its tokens by an exec credential plugin.
	OIDC bool
}

// ControlPlane is a running etcd + kube-apiserver (+ kube-controller-manager).
type ControlPlane struct {
	Dir             string // certificates, data, logs and kubeconfigs
	BinDir          string // where the binaries came from
	URL             string // https://127.0.0.1:PORT
	AdminKubeconfig string // path to a kubeconfig for a system:masters user
	AuditLogPath    string // set when Options.AuditLog

	opts       Options
	ca         *authority
	etcdURL    string
	peerURL    string
	mu         sync.Mutex
	procs      []*proc // in start order
	stoppedAPI *proc   // the kube-apiserver StopAPIServer stopped
	admin      *rest.Config
	nsSerial   int
	node       *node // when Options.Node

	oidc      *oidcIssuer // when Options.OIDC
	oidcLogin string      // the exec credential plugin, when Options.OIDC
}

type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

// BinDir finds the control plane binaries: $QL3_CONTROLPLANE_DIR, or
// bin/controlplane at the root of the module that holds the working directory.
func BinDir() (string, error) {
	if d := os.Getenv("QL3_CONTROLPLANE_DIR"); d != "" {
		return d, nil
	}
	root, err := testkit.ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin", "controlplane"), nil
}

// Start builds nothing: it runs the binaries that `make controlplane` built,
// and fails with the reason if they are missing or do not come up.
func Start(opts Options) (*ControlPlane, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kubectl"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return nil, fmt.Errorf("control plane binary %s missing in %s: run `make controlplane` (or `make test`, which builds it)", b, bin)
		}
	}
	if opts.Node {
		opts.ControllerManager = true
		if err := nodePrereqs(bin); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "ql3-controlplane-")
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{Dir: dir, BinDir: bin, opts: opts}
	if err := cp.start(); err != nil {
		cp.Stop(false)
		return nil, fmt.Errorf("start control plane (logs kept in %s): %w", dir, err)
	}
	return cp, nil
}

func (cp *ControlPlane) path(p ...string) string {
	return filepath.Join(append([]string{cp.Dir}, p...)...)
}

func (cp *ControlPlane) start() error {
	var err error
	if cp.ca, err = newAuthority(); err != nil {
		return err
	}
	for _, d := range []string{"pki", "etcd", "logs", "kubeconfigs"} {
		if err := os.MkdirAll(cp.path(d), 0o700); err != nil {
			return err
		}
	}
	if err := os.WriteFile(cp.path("pki", "ca.crt"), cp.ca.certPEM, 0o600); err != nil {
		return err
	}
	crt, key, err := cp.ca.issue("kube-apiserver", nil, true)
	if err != nil {
		return err
	}
	if err := writePair(cp.path("pki", "apiserver"), crt, key); err != nil {
		return err
	}
	if err := serviceAccountKey(cp.path("pki", "sa.key")); err != nil {
		return err
	}
	if cp.opts.OIDC {
		if err := cp.startOIDC(); err != nil {
			return err
		}
	}
	if err := cp.startEtcd(); err != nil {
		return err
	}
	if err := cp.startAPIServer(); err != nil {
		return err
	}
	if cp.AdminKubeconfig, err = cp.Kubeconfig("ql3-admin", "system:masters"); err != nil {
		return err
	}
	if cp.admin, err = clientcmd.BuildConfigFromFlags("", cp.AdminKubeconfig); err != nil {
		return err
	}
	if err := cp.waitReady(90 * time.Second); err != nil {
		return err
	}
	if cp.opts.OIDC {
		if err := cp.waitOIDC(60 * time.Second); err != nil {
			return err
		}
	}
	if cp.opts.ControllerManager {
		if err := cp.startControllerManager(); err != nil {
			return err
		}
	}
	if cp.opts.Node {
		return cp.startNode()
	}
	return nil
}

func (cp *ControlPlane) startEtcd() error {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		client, peer := freePort(), freePort()
		cp.etcdURL = "http://127.0.0.1:" + strconv.Itoa(client)
		cp.peerURL = "http://127.0.0.1:" + strconv.Itoa(peer)
		p, err := cp.run("etcd", filepath.Join(cp.BinDir, "etcd"),
			"--name=default",
			"--data-dir="+cp.path("etcd"),
			"--listen-client-urls="+cp.etcdURL,
			"--advertise-client-urls="+cp.etcdURL,
			"--listen-peer-urls="+cp.peerURL,
			"--initial-advertise-peer-urls="+cp.peerURL,
			"--initial-cluster=default="+cp.peerURL,
			"--unsafe-no-fsync",
			"--log-level=warn",
		)
		if err != nil {
			return err
		}
		if lastErr = waitHTTP(cp.etcdURL+"/health", nil, 30*time.Second, p); lastErr == nil {
			return nil
		}
		cp.stopProc(p)
	}
	return fmt.Errorf("etcd: %w", lastErr)
}

func (cp *ControlPlane) startAPIServer() error {
	cidr := cp.opts.ServiceCIDR
	if cidr == "" {
		cidr = "10.96.0.0/16"
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port := freePort()
		cp.URL = "https://127.0.0.1:" + strconv.Itoa(port)
		args := []string{
			"--etcd-servers=" + cp.etcdURL,
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
			"--cert-dir=" + cp.path("pki"),
			"--tls-cert-file=" + cp.path("pki", "apiserver.crt"),
			"--tls-private-key-file=" + cp.path("pki", "apiserver.key"),
			"--client-ca-file=" + cp.path("pki", "ca.crt"),
			"--authorization-mode=RBAC",
			"--service-account-key-file=" + cp.path("pki", "sa.key"),
			"--service-account-signing-key-file=" + cp.path("pki", "sa.key"),
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-cluster-ip-range=" + cidr,
			// A loopback advertise address cannot be reconciled into the
			// kubernetes Service's endpoints; nothing here needs them.
			"--endpoint-reconciler-type=none",
			"--allow-privileged=true",
		}
		if !cp.opts.ControllerManager {
			// Without the controller manager nobody creates the default
			// ServiceAccount, and the admission plugin would reject pods.
			args = append(args, "--disable-admission-plugins=ServiceAccount")
		}
		if cp.opts.Node {
			kubelet, err := cp.kubeletClientArgs()
			if err != nil {
				return err
			}
			args = append(args, kubelet...)
		}
		if cp.opts.OIDC {
			args = append(args, "--authentication-config="+cp.path("authentication-config.yaml"))
		}
		if cp.opts.AuditLog {
			policy := cp.path("audit-policy.yaml")
			if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
				return err
			}
			cp.AuditLogPath = cp.path("logs", "audit.log")
			args = append(args, "--audit-policy-file="+policy, "--audit-log-path="+cp.AuditLogPath,
				"--audit-log-format=json", "--audit-log-mode=blocking", "--audit-log-maxsize=0")
		}
		p, err := cp.run("kube-apiserver", filepath.Join(cp.BinDir, "kube-apiserver"), args...)
		if err != nil {
			return err
		}
		tr, err := cp.caTransport()
		if err != nil {
			return err
		}
		// /livez answers anonymous requests once the server listens.
		if lastErr = waitHTTP(cp.URL+"/livez", tr, 90*time.Second, p); lastErr == nil {
			return nil
		}
		cp.stopProc(p)
	}
	return fmt.Errorf("kube-apiserver: %w", lastErr)
}

// auditPolicy records every mutating request at Metadata level (who, what
// verb, which object, which response code); deletes at Request level, so a
// test can read their DeleteOptions (preconditions); and the reads (get,
// list, watch) of every user but the control plane's own components at
// Metadata level, so that "never read X" and "no list or watch" are
// proven from the API server's own record (Reads).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Request
  verbs: ["delete"]
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
  users: ["system:kube-controller-manager", "system:apiserver", "system:kube-scheduler"]
- level: None
  userGroups: ["system:serviceaccounts", "system:nodes"]
- level: Metadata
  verbs: ["get", "list", "watch"]
- level: None
`

func (cp *ControlPlane) startControllerManager() error {
	// system:masters: with one identity for every controller, the bootstrap
	// role of system:kube-controller-manager is not enough.
	kc, err := cp.Kubeconfig("system:kube-controller-manager", "system:masters")
	if err != nil {
		return err
	}
	// Only what tests need: workloads converge, namespaces delete; with a
	// node, the node lifecycle controller lifts the not-ready taint the
	// kubelet registers it with, and the persistent volume binder binds
	// the claims pods mount to the volumes a test creates (there is no
	// dynamic provisioner).
	controllers := "deployment-controller,replicaset-controller,statefulset-controller,daemonset-controller,job-controller,cronjob-controller,disruption-controller,namespace-controller,garbage-collector-controller,serviceaccount-controller,serviceaccount-token-controller,root-ca-certificate-publisher-controller,endpointslice-controller"
	if cp.opts.Node {
		controllers += ",node-lifecycle-controller,persistentvolume-binder-controller"
	}
	p, err := cp.run("kube-controller-manager", filepath.Join(cp.BinDir, "kube-controller-manager"),
		"--kubeconfig="+kc,
		"--authentication-kubeconfig="+kc,
		"--authorization-kubeconfig="+kc,
		"--leader-elect=false",
		"--secure-port=0",
		"--service-account-private-key-file="+cp.path("pki", "sa.key"),
		"--root-ca-file="+cp.path("pki", "ca.crt"),
		"--use-service-account-credentials=false",
		"--controllers="+controllers,
		"--concurrent-deployment-syncs=10",
		"--v=0",
	)
	if err != nil {
		return err
	}
	// The serviceaccount controller creates "default" in every namespace:
	// once it exists, the controller manager is working.
	cs, err := kubernetes.NewForConfig(cp.admin)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-p.done:
			return fmt.Errorf("kube-controller-manager exited: %v (see %s)", p.err, p.log.Name())
		default:
		}
		if _, err := cs.CoreV1().ServiceAccounts("default").Get(context.Background(), "default", metav1.GetOptions{}); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("kube-controller-manager not working after 60s (no default ServiceAccount): %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (cp *ControlPlane) caTransport() (*http.Transport, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cp.ca.certPEM) {
		return nil, errors.New("bad CA certificate")
	}
	return &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}, nil
}

// waitReady waits for /readyz as admin and for the default namespace and
// the bootstrap RBAC roles, which the server creates after it first listens.
func (cp *ControlPlane) waitReady(timeout time.Duration) error {
	cs, err := kubernetes.NewForConfig(cp.admin)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		var body []byte
		body, last = cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if last == nil {
			if _, last = cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); last == nil {
				if _, last = cs.RbacV1().ClusterRoles().Get(ctx, "admin", metav1.GetOptions{}); last == nil {
					return nil
				}
			}
		} else if len(body) > 0 {
			last = fmt.Errorf("%v: %s", last, bytes.TrimSpace(body))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready after %s: %v", timeout, last)
}

// Kubeconfig mints a client certificate for user (with the given groups,
// none for a restricted user) and writes a kubeconfig for it. Its context is
// named after the user.
func (cp *ControlPlane) Kubeconfig(user string, groups ...string) (string, error) {
	crt, key, err := cp.ca.issue(user, groups, false)
	if err != nil {
		return "", err
	}
	name := strings.NewReplacer(":", "_", "/", "_").Replace(user)
	path := cp.path("kubeconfigs", name+".yaml")
	return path, cp.writeKubeconfig(path, user, &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key})
}

// writeKubeconfig writes a kubeconfig for this control plane whose one
// user, named user, authenticates by auth; its context is named user too.
func (cp *ControlPlane) writeKubeconfig(path, user string, auth *clientcmdapi.AuthInfo) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["ql3-test"] = &clientcmdapi.Cluster{Server: cp.URL, CertificateAuthorityData: cp.ca.certPEM}
	cfg.AuthInfos[user] = auth
	cfg.Contexts[user] = &clientcmdapi.Context{Cluster: "ql3-test", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = user
	return clientcmd.WriteToFile(*cfg, path)
}

// UserConfig is a client configuration for user (with the given groups):
// each simulated operator its own identity, told apart in the audit log.
func (cp *ControlPlane) UserConfig(user string, groups ...string) (*rest.Config, error) {
	path, err := cp.Kubeconfig(user, groups...)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 500, 1000
	return cfg, nil
}

// RESTConfig is a fresh copy of the admin client configuration.
func (cp *ControlPlane) RESTConfig() *rest.Config { return rest.CopyConfig(cp.admin) }

// Clientset is a typed admin client.
func (cp *ControlPlane) Clientset() *kubernetes.Clientset {
	return kubernetes.NewForConfigOrDie(cp.RESTConfig())
}

// Namespace creates a fresh namespace for one test and deletes it when the
// test ends.
func (cp *ControlPlane) Namespace(t testing.TB) string {
	t.Helper()
	cp.mu.Lock()
	cp.nsSerial++
	n := cp.nsSerial
	cp.mu.Unlock()
	name := fmt.Sprintf("t%d-%s", n, sanitize(t.Name()))
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-")
	}
	cs := cp.Clientset()
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		err := cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	return name
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

// Stop ends every process (newest first) by PID and removes the working
// directory unless keepLogs is set, in which case it says where the logs are.
func (cp *ControlPlane) Stop(keepLogs bool) {
	if cp == nil {
		return
	}
	cp.stopNode()
	for {
		cp.mu.Lock()
		n := len(cp.procs)
		var p *proc
		if n > 0 {
			p = cp.procs[n-1]
		}
		cp.mu.Unlock()
		if p == nil {
			break
		}
		cp.stopProc(p)
	}
	if cp.oidc != nil {
		cp.oidc.stop()
	}
	if keepLogs {
		fmt.Fprintf(os.Stderr, "testcluster: control plane logs kept in %s\n", cp.path("logs"))
		return
	}
	_ = os.RemoveAll(cp.Dir)
}

// Main is the body of a TestMain: it starts one control plane for the test
// package, runs the tests, and stops it. A control plane that cannot start
// fails the package with the reason; it never skips.
func Main(m *testing.M, opts Options, into **ControlPlane) {
	if !NeedsCluster(os.Args[1:]) {
		os.Exit(m.Run())
	}
	cp, err := Start(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: testcluster: %v\n", err)
		os.Exit(1)
	}
	*into = cp
	code := m.Run()
	cp.Stop(code != 0)
	os.Exit(code)
}

// NeedsCluster reports whether a test binary run with args starts the
// control plane. Fuzzing (`go test -fuzz`, both the coordinator and its
// workers) runs only a fuzz target, and a Fuzz target never needs a cluster,
// so `make fuzz` works on a clone with no control plane built; -list runs
// nothing.
func NeedsCluster(args []string) bool {
	return !hasFlag(args, "-test.fuzz") && !hasFlag(args, "-test.fuzzworker") && !hasFlag(args, "-test.list")
}

// hasFlag reports whether args hold the flag name (as `name`,
// `name=value`, or `name value`; `--name` too).
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		a = strings.Replace(a, "--", "-", 1)
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

func writePair(base string, crt, key []byte) error {
	if err := os.WriteFile(base+".crt", crt, 0o600); err != nil {
		return err
	}
	return os.WriteFile(base+".key", key, 0o600)
}
