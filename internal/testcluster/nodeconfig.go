package testcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/qinglong/kubectl-ql3/internal/testcluster/nodeimage"
)

// cniBinDir is where Debian's containernetworking-plugins installs them.
const cniBinDir = "/usr/lib/cni"

// containerdConfig is containerd 1.6's configuration for the node: its own
// root, state, socket and runc root under the node's directory, the CRI
// plugin with the local pause image and the node's CNI directory. The
// machines lack CAP_SYS_RESOURCE, so runc cannot set the negative
// oom_score_adj the kubelet asks for: restrict_oom_score_adj clamps it.
func (n *node) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q
`, n.path("containerd", "root"), n.path("containerd", "state"), n.sock, n.sock+".ttrpc",
		nodeimage.Pause, n.path("containerd", "runc"), cniBinDir, n.path("cni"), n.path("containerd", "opt"))
}

// cniConfig is a bridge network with host-local addresses from the node's
// own subnet: no gateway and no masquerade, so the host's routes and
// ip_forward stay untouched (containerd adds the loopback itself).
func (n *node) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": %q,
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": false,
    "ipMasq": false,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "dataDir": %q}
  }]
}
`, n.netName, n.bridge, n.subnet, n.path("cni-ipam"))
}

// kubeletConfig is the KubeletConfiguration these machines need: cgroup
// v1 with the cgroupfs driver, no swap check, its own cgroup root, webhook
// authorization and x509 client certificates (the API server's kubelet
// client), no read-only port, eviction and image GC that never fire on a
// shared disk, and no iptables chains on the host (nothing here runs
// kube-proxy, which would want them).
func (n *node) kubeletConfig(ca string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
healthzPort: 0
readOnlyPort: 0
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: %s
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%s
podLogsDir: %s
staticPodPath: ""
resolvConf: /etc/resolv.conf
evictionHard: {memory.available: 1Mi, nodefs.available: 1%%, nodefs.inodesFree: 1%%, imagefs.available: 1%%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
makeIPTablesUtilChains: false
nodeStatusReportFrequency: 10s
`, n.ip, n.port, n.path("pki", "kubelet.crt"), n.path("pki", "kubelet.key"), ca,
		n.cgroupRoot, n.sock, n.path("pod-logs"))
}

// writeConfigs writes containerd's, CNI's and the kubelet's configuration
// and the kubelet's serving certificate for the node IP.
func (n *node) writeConfigs(cp *ControlPlane) error {
	for _, d := range []string{"pki", "cni", "cni-ipam", "pod-logs", "kubelet", "images", "containerd"} {
		if err := os.MkdirAll(n.path(d), 0o700); err != nil {
			return err
		}
	}
	crt, key, err := cp.ca.issueFor("system:node:"+n.name, []string{"system:nodes"}, true, n.ipAddr())
	if err != nil {
		return err
	}
	if err := writePair(n.path("pki", "kubelet"), crt, key); err != nil {
		return err
	}
	files := map[string]string{
		n.path("containerd", "config.toml"): n.containerdConfig(),
		n.path("cni", "10-ql3.conflist"):    n.cniConfig(),
		n.path("kubelet", "config.yaml"):    n.kubeletConfig(cp.path("pki", "ca.crt")),
	}
	for p, body := range files {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// nodePrereqs names what `make test` (hack/node-packages.sh and
// hack/controlplane.sh) installs for the node and is missing.
func nodePrereqs(bin string) error {
	if runtime.GOOS != "linux" {
		return errors.New("the test node runs on Linux only")
	}
	if os.Geteuid() != 0 {
		return errors.New("the test node runs containerd and a kubelet: it needs root")
	}
	var missing []string
	for _, b := range []string{"kubelet", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			missing = append(missing, filepath.Join(bin, b)+" (make controlplane)")
		}
	}
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b+" (hack/node-packages.sh)")
		}
	}
	if _, err := os.Stat(filepath.Join(cniBinDir, "bridge")); err != nil {
		missing = append(missing, filepath.Join(cniBinDir, "bridge")+" (hack/node-packages.sh)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("the test node needs: %s", strings.Join(missing, ", "))
	}
	return nil
}
