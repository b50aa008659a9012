// Command workload is the test node's small workload: an HTTP server that
// answers /healthz (and, with -get URL, its own exec probe). Given -digest
// FILE it logs and serves (/digest) the sha256 digest of that file as it
// reads it on each request — what a process runs with, never the file's
// content. Given -bundle FILE it does the same for a mounted environment
// bundle (/bundle), which it also checks as a carrier in memory, the way a
// consumer reads it: on each use, no cache. -copy-into and -record serve the
// Worker's pod shape (modes.go). It exits 0 on SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", ":8080", "address to serve on")
	file := flag.String("digest", "", "file whose sha256 digest /digest reports")
	bundle := flag.String("bundle", "", "environment bundle file whose sha256 digest /bundle reports, read and checked on each use")
	get := flag.String("get", "", "instead of serving: GET this URL, exit 0 on 200 (an exec probe, as the image has no shell)")
	into := flag.String("copy-into", "", "instead of serving: copy the arguments (files) into this directory, created 0700, each file 0400, and exit")
	recordFile := flag.String("record", "", "record this run's start and stop in this file (on a volume), locked while it runs, and log the earlier runs")
	flag.Parse()
	log.SetFlags(0)
	switch {
	case *get != "":
		os.Exit(probe(*get))
	case *into != "":
		os.Exit(copyInto(*into, flag.Args()))
	}
	var rec *record
	if *recordFile != "" {
		var said string
		rec, said = startRecord(*recordFile)
		log.Print(said)
	}
	defer rec.stop()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	report(mux, "/digest", "digest", *file, digest)
	report(mux, "/bundle", "bundle", *bundle, bundleDigest)
	srv := &http.Server{Addr: *listen, Handler: mux}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	log.Printf("serving on %s", *listen)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Print(err)
		rec.stop()
		os.Exit(1)
	}
}

// report logs "<what> FILE <sum(FILE)>" once at start (when file is set)
// and serves path: sum(file) as read on each request, 404 without a file.
func report(mux *http.ServeMux, path, what, file string, sum func(string) string) {
	if file != "" {
		log.Printf("%s %s %s", what, file, sum(file))
	}
	mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) {
		if file == "" {
			http.Error(w, "no -"+what+" file", http.StatusNotFound)
			return
		}
		fmt.Fprintln(w, sum(file))
	})
}

// probe GETs url: 0 on HTTP 200, 1 otherwise.
func probe(url string) int {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		log.Print(err)
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		log.Printf("%s: HTTP %d", url, resp.StatusCode)
		return 1
	}
	return 0
}
