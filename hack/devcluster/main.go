// Command devcluster runs the test control plane (etcd, kube-apiserver,
// kube-controller-manager) on loopback until it gets SIGINT or SIGTERM, for
// `make demo` and `make bench`. It writes an admin kubeconfig and, once the
// control plane is ready, a ready file.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "write the admin kubeconfig here (required)")
	ready := flag.String("ready-file", "", "create this file once the control plane is ready")
	kcm := flag.Bool("controller-manager", true, "also run kube-controller-manager")
	audit := flag.Bool("audit-log", false, "log every write (Metadata level); its path is printed")
	cidr := flag.String("service-cidr", "10.96.0.0/16", "Service cluster IP range")
	flag.Parse()
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "error: --kubeconfig is required")
		os.Exit(2)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	cp, err := testcluster.Start(testcluster.Options{ControllerManager: *kcm, AuditLog: *audit, ServiceCIDR: *cidr})
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
	data, err := os.ReadFile(cp.AdminKubeconfig)
	if err == nil {
		err = os.WriteFile(*kubeconfig, data, 0o600)
	}
	if err != nil {
		cp.Stop(false)
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "devcluster: kube-apiserver %s ready; kubeconfig %s\n", cp.URL, *kubeconfig)
	if cp.AuditLogPath != "" {
		fmt.Fprintf(os.Stderr, "devcluster: audit log %s\n", cp.AuditLogPath)
	}
	if *ready != "" {
		_ = os.WriteFile(*ready, []byte(cp.URL+"\n"), 0o600)
	}
	<-sig
	cp.Stop(false)
}
