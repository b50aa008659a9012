package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
)

// rawResult is what `bench raw` prints: the seconds of its two passes.
type rawResult struct {
	DryRun float64 `json:"dryRunSeconds"`
	Apply  float64 `json:"applySeconds"`
}

var rawGVR = map[string]schema.GroupVersionResource{
	"ConfigMap":      {Version: "v1", Resource: "configmaps"},
	"Service":        {Version: "v1", Resource: "services"},
	"ServiceAccount": {Version: "v1", Resource: "serviceaccounts"},
	"Deployment":     {Group: "apps", Version: "v1", Resource: "deployments"},
}

// rawMain is the lower bound: a bare client-go server-side apply loop with
// W workers, no client-side rate limit, no discovery, no reads: one
// dry-run pass over every object, then one apply pass. It runs as its own
// process so that its peak RSS is measured like the others'.
func rawMain(args []string) {
	fs := flag.NewFlagSet("raw", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "admin kubeconfig")
	file := fs.String("file", "", "JSON array of objects")
	workers := fs.Int("workers", 16, "requests in flight")
	_ = fs.Parse(args)
	data, err := os.ReadFile(*file)
	if err != nil {
		die(err)
	}
	var objs []map[string]any
	if err := json.Unmarshal(data, &objs); err != nil {
		die(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		die(err)
	}
	cfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	cfg.UserAgent = "ql3-bench-raw"
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		die(err)
	}
	bodies := make([][]byte, len(objs))
	for i, o := range objs {
		if bodies[i], err = json.Marshal(o); err != nil {
			die(err)
		}
	}
	pass := func(dryRun bool) float64 {
		start := time.Now()
		idx := make(chan int)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var first error
		force := true
		opts := metav1.PatchOptions{FieldManager: "ql3-bench-raw", Force: &force}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		for range *workers {
			wg.Go(func() {
				for i := range idx {
					o := objs[i]
					md := o["metadata"].(map[string]any)
					ri := dyn.Resource(rawGVR[o["kind"].(string)]).Namespace(md["namespace"].(string))
					if _, err := ri.Patch(context.Background(), md["name"].(string), types.ApplyPatchType, bodies[i], opts); err != nil {
						mu.Lock()
						if first == nil {
							first = err
						}
						mu.Unlock()
					}
				}
			})
		}
		for i := range objs {
			idx <- i
		}
		close(idx)
		wg.Wait()
		if first != nil {
			die(fmt.Errorf("dry-run=%v: %w", dryRun, first))
		}
		return time.Since(start).Seconds()
	}
	res := rawResult{DryRun: pass(true)}
	res.Apply = pass(false)
	_ = json.NewEncoder(os.Stdout).Encode(res)
}

func die(err error) {
	fmt.Fprintf(os.Stderr, "error: %v\n", err)
	os.Exit(1)
}
