package testcluster

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// MainMany is Main for n control planes, each its own etcd and
// kube-apiserver (so its own cluster identity: kube-system's UID), started
// concurrently: a fleet's tests need several real API servers. Any that
// cannot start fails the package; every started one is stopped.
func MainMany(m *testing.M, opts Options, n int, into *[]*ControlPlane) {
	if !NeedsCluster(os.Args[1:]) {
		os.Exit(m.Run())
	}
	cps := make([]*ControlPlane, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { cps[i], errs[i] = Start(opts) })
	}
	wg.Wait()
	stop := func(keep bool) {
		for _, cp := range cps {
			cp.Stop(keep)
		}
	}
	for i, err := range errs {
		if err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: testcluster: control plane %d of %d: %v\n", i+1, n, err)
			stop(false)
			os.Exit(1)
		}
	}
	*into = cps
	code := m.Run()
	stop(code != 0)
	os.Exit(code)
}
