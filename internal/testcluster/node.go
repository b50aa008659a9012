package testcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/qinglong/kubectl-ql3/internal/testcluster/nodeimage"
)

// node is the test cluster's one node, on this machine: containerd (with
// Debian's runc and CNI plugins), kube-scheduler and the kubelet. Every
// name it gives the host (cgroup root, bridge, CNI network) carries its
// own suffix, and Stop removes exactly those.
type node struct {
	name       string // the Node object's name
	ip         string // the machine's default-route address: the node IP
	port       int    // the kubelet's HTTPS port
	dir        string // configuration, state and images
	sock       string // containerd's socket
	suffix     string
	netName    string // CNI network name
	bridge     string // bridge interface
	subnet     string // the pods' addresses
	cgroupRoot string // the kubelet's --cgroup-root
	sysctls    map[string]string
	images     *nodeimage.Archive
	unlock     func() // releases the machine's test-node lock
	// ReadyAfter is how long the Node took to report Ready after the
	// kubelet started.
	readyAfter time.Duration
}

func (n *node) path(p ...string) string { return filepath.Join(append([]string{n.dir}, p...)...) }

func (n *node) ipAddr() net.IP { return net.ParseIP(n.ip) }

// NodeName is the name of the test node, "" without Options.Node.
func (cp *ControlPlane) NodeName() string {
	if cp.node == nil {
		return ""
	}
	return cp.node.name
}

// NodeReadyAfter is how long the node took to report Ready after its
// kubelet started.
func (cp *ControlPlane) NodeReadyAfter() time.Duration {
	if cp.node == nil {
		return 0
	}
	return cp.node.readyAfter
}

// Image is ref (one of nodeimage's tags) pinned by the digest the node
// imported it with: tag@sha256:…, as a locked release must name images.
func (cp *ControlPlane) Image(ref string) string {
	if cp.node == nil {
		return ""
	}
	return cp.node.images.Pinned(ref)
}

func newNode(dir string) (*node, error) {
	ip, err := defaultRouteIP()
	if err != nil {
		return nil, fmt.Errorf("node IP: %w", err)
	}
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	sfx := hex.EncodeToString(b)
	n := &node{
		name: "ql3-node-" + sfx, ip: ip.String(), port: freePort(), dir: dir, suffix: sfx,
		netName: "ql3-" + sfx, bridge: "ql3br" + sfx, cgroupRoot: "/ql3-" + sfx,
		subnet: fmt.Sprintf("10.%d.%d.0/24", 200+int(b[0])%40, b[1]),
	}
	n.sock = n.path("containerd", "containerd.sock")
	return n, nil
}

// kubeletClientArgs give kube-apiserver the client certificate it shows
// the kubelet (for logs, exec, port-forward; a system:masters member, which
// the kubelet's webhook authorization allows) and the CA of the kubelet's
// serving certificate, reached at the node's InternalIP.
func (cp *ControlPlane) kubeletClientArgs() ([]string, error) {
	crt, key, err := cp.ca.issue("kube-apiserver-kubelet-client", []string{"system:masters"}, false)
	if err != nil {
		return nil, err
	}
	if err := writePair(cp.path("pki", "kubelet-client"), crt, key); err != nil {
		return nil, err
	}
	return []string{
		"--kubelet-client-certificate=" + cp.path("pki", "kubelet-client.crt"),
		"--kubelet-client-key=" + cp.path("pki", "kubelet-client.key"),
		"--kubelet-certificate-authority=" + cp.path("pki", "ca.crt"),
		"--kubelet-preferred-address-types=InternalIP",
	}, nil
}

// startNode starts containerd, imports the local images, starts
// kube-scheduler and the kubelet, and waits until the Node is Ready.
func (cp *ControlPlane) startNode() error {
	n, err := newNode(cp.path("node"))
	if err != nil {
		return err
	}
	if n.unlock, err = lockHost(); err != nil {
		return err
	}
	cp.node = n
	if n.sysctls, err = readSysctls(); err != nil {
		return err
	}
	if err := n.writeConfigs(cp); err != nil {
		return err
	}
	if err := makeCgroupRoot(n.cgroupRoot); err != nil {
		return err
	}
	if err := cp.startContainerd(); err != nil {
		return err
	}
	if err := cp.bindNodes(); err != nil {
		return err
	}
	if err := cp.startScheduler(); err != nil {
		return err
	}
	return cp.startKubelet()
}

func (cp *ControlPlane) startContainerd() error {
	n := cp.node
	p, err := cp.run("containerd", "containerd", "--config", n.path("containerd", "config.toml"))
	if err != nil {
		return err
	}
	if n.images, err = nodeimage.Build(n.path("images")); err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) {
			select {
			case <-p.done:
				return false, fmt.Errorf("containerd exited: %v (see %s)", p.err, p.log.Name())
			default:
			}
			c, err := net.Dial("unix", n.sock)
			if err != nil {
				return false, nil
			}
			c.Close()
			return true, nil
		})
	if err != nil {
		return fmt.Errorf("containerd: %w", err)
	}
	return cp.ImportImage(n.images.Path)
}

// ImportImage imports the OCI image archive at path into the node's
// containerd, where the kubelet's CRI finds images (namespace k8s.io), as
// the node's own images are: a pod runs it with imagePullPolicy Never.
func (cp *ControlPlane) ImportImage(path string) error {
	if cp.node == nil {
		return errors.New("no node: start the control plane with Options.Node")
	}
	out, err := exec.Command("ctr", "--address", cp.node.sock, "-n", "k8s.io", "images", "import", path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images import %s: %v\n%s", path, err, out)
	}
	return nil
}

// bindNodes grants the group system:nodes the role system:node: the API
// server authorises by RBAC only (no Node authorizer).
func (cp *ControlPlane) bindNodes() error {
	cs, err := kubernetes.NewForConfig(cp.admin)
	if err != nil {
		return err
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "ql3-test:system:nodes"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:nodes"}},
	}
	_, err = cs.RbacV1().ClusterRoleBindings().Create(context.Background(), crb, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func (cp *ControlPlane) startScheduler() error {
	kc, err := cp.Kubeconfig("system:kube-scheduler", "system:masters")
	if err != nil {
		return err
	}
	_, err = cp.run("kube-scheduler", filepath.Join(cp.BinDir, "kube-scheduler"),
		"--kubeconfig="+kc,
		"--authentication-kubeconfig="+kc,
		"--authorization-kubeconfig="+kc,
		"--leader-elect=false",
		"--secure-port=0",
		"--v=0",
	)
	return err
}

func (cp *ControlPlane) startKubelet() error {
	n := cp.node
	kc, err := cp.Kubeconfig("system:node:"+n.name, "system:nodes")
	if err != nil {
		return err
	}
	started := time.Now()
	p, err := cp.run("kubelet", filepath.Join(cp.BinDir, "kubelet"),
		"--config="+n.path("kubelet", "config.yaml"),
		"--kubeconfig="+kc,
		"--root-dir="+n.path("kubelet", "root"),
		"--cert-dir="+n.path("pki"),
		"--hostname-override="+n.name,
		"--node-ip="+n.ip,
		"--v=1",
	)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cp.admin)
	if err != nil {
		return err
	}
	var last string
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 90*time.Second, true,
		func(ctx context.Context) (bool, error) {
			select {
			case <-p.done:
				return false, fmt.Errorf("kubelet exited: %v (see %s)", p.err, p.log.Name())
			default:
			}
			no, err := cs.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			return nodeSchedulable(no, &last), nil
		})
	if err != nil {
		return fmt.Errorf("node %s not Ready (%s): %w (see %s)", n.name, last, err, p.log.Name())
	}
	n.readyAfter = time.Since(started)
	return nil
}

// nodeSchedulable reports whether no is Ready and free of the not-ready
// taint (which the node lifecycle controller lifts), saying why not in last.
func nodeSchedulable(no *corev1.Node, last *string) bool {
	ready := false
	for _, c := range no.Status.Conditions {
		if c.Type == corev1.NodeReady {
			*last = fmt.Sprintf("Ready=%s: %s", c.Status, c.Message)
			ready = c.Status == corev1.ConditionTrue
		}
	}
	for _, t := range no.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady {
			*last += "; tainted " + t.Key
			return false
		}
	}
	return ready
}

// stopNode ends the node while the control plane still serves: the
// scheduler first (no new pod lands), then every pod on the node is
// deleted and the kubelet given time to stop it (containers, sandbox,
// network); then the kubelet and containerd stop and the host is put back:
// leftover processes and mounts, the bridge, the CNI results, the cgroups,
// and the sysctls the kubelet changed.
func (cp *ControlPlane) stopNode() {
	n := cp.node
	if n == nil {
		return
	}
	cp.stopNamed("kube-scheduler")
	if err := cp.drainNode(); err != nil {
		fmt.Fprintf(os.Stderr, "testcluster: drain node %s: %v\n", n.name, err)
	}
	cp.stopNamed("kubelet")
	n.killTasks()
	cp.stopNamed("containerd")
	n.cleanHost()
	cp.node = nil
}

// stopNamed stops the running process called name, if any.
func (cp *ControlPlane) stopNamed(name string) {
	cp.mu.Lock()
	var found *proc
	for _, p := range cp.procs {
		if p.name == name {
			found = p
		}
	}
	cp.mu.Unlock()
	if found != nil {
		cp.stopProc(found)
	}
}

// drainNode deletes every pod bound to the node and waits until the
// kubelet has stopped each one (the pod is gone from the API server only
// once the kubelet confirms).
func (cp *ControlPlane) drainNode() error {
	cs, err := kubernetes.NewForConfig(cp.admin)
	if err != nil {
		return err
	}
	sel := metav1.ListOptions{FieldSelector: "spec.nodeName=" + cp.node.name}
	grace := int64(1)
	return wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true,
		func(ctx context.Context) (bool, error) {
			pods, err := cs.CoreV1().Pods("").List(ctx, sel)
			if err != nil {
				return false, nil
			}
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil {
					_ = cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
				}
			}
			return len(pods.Items) == 0, nil
		})
}

// killTasks kills and deletes whatever task containerd still runs (a
// kubelet that died could not stop its pods), so every shim exits.
func (n *node) killTasks() {
	out, err := exec.Command("ctr", "--address", n.sock, "-n", "k8s.io", "tasks", "ls", "-q").Output()
	if err != nil {
		return
	}
	for _, id := range splitLines(string(out)) {
		_ = exec.Command("ctr", "--address", n.sock, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id).Run()
		_ = exec.Command("ctr", "--address", n.sock, "-n", "k8s.io", "tasks", "delete", "-f", id).Run()
	}
}
