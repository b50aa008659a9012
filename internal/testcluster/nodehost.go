package testcluster

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// The host state the node touches, each put back or removed on stop.

// kubeletSysctls are the kernel settings the kubelet changes at start.
var kubeletSysctls = []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"}

const cgroupFS = "/sys/fs/cgroup"

func readSysctls() (map[string]string, error) {
	out := map[string]string{}
	for _, k := range kubeletSysctls {
		b, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			return nil, err
		}
		out[k] = strings.TrimSpace(string(b))
	}
	return out, nil
}

func restoreSysctls(saved map[string]string) {
	for k, v := range saved {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "testcluster: restore %s=%s: %v\n", k, v, err)
		}
	}
}

// defaultRouteIP is the IPv4 address of the interface the default route
// leaves by: the kubelet's node IP may not be loopback.
func defaultRouteIP() (net.IP, error) {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[1] != "00000000" {
			continue
		}
		ifc, err := net.InterfaceByName(fields[0])
		if err != nil {
			return nil, err
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
				return ipn.IP.To4(), nil
			}
		}
	}
	return nil, errors.New("no IPv4 default route in /proc/net/route")
}

// cgroupHierarchies are the cgroup v1 hierarchies mounted here.
func cgroupHierarchies() []string {
	entries, err := os.ReadDir(cgroupFS)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join(cgroupFS, e.Name()))
		}
	}
	return out
}

// makeCgroupRoot creates the kubelet's cgroup root in every hierarchy (the
// kubelet requires it to exist); cpuset's copies its parent's CPUs and
// memory nodes, as a new cpuset starts with none.
func makeCgroupRoot(root string) error {
	for _, h := range cgroupHierarchies() {
		d := filepath.Join(h, root)
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if filepath.Base(h) != "cpuset" {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			b, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeCgroupRoot kills every process left under root and removes its
// cgroups, deepest first.
func removeCgroupRoot(root string) {
	for _, h := range cgroupHierarchies() {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, root), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			killCgroup(d)
		}
	}
}

// cleanHost removes what the node left on the host outside its directory
// and puts the sysctls back.
func (n *node) cleanHost() {
	removeCgroupRoot(n.cgroupRoot)
	unmountUnder(n.dir)
	if _, err := net.InterfaceByName(n.bridge); err == nil {
		if out, err := exec.Command("ip", "link", "del", n.bridge).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "testcluster: ip link del %s: %v: %s\n", n.bridge, err, out)
		}
	}
	// containerd 1.6 keeps CNI results in a fixed directory, one file per
	// network and container: remove this network's.
	results, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", n.netName+"-*"))
	for _, r := range results {
		_ = os.Remove(r)
	}
	// The fixed directories containerd and CNI create on first use go
	// again if nothing else uses them (Remove never removes a full one).
	for _, d := range []string{"/run/containerd/s", "/run/containerd", "/run/netns", "/var/lib/cni/results", "/var/lib/cni"} {
		_ = os.Remove(d)
	}
	restoreSysctls(n.sysctls)
	n.unlock()
}

func splitLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
