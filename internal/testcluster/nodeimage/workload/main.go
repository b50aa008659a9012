// Command workload is the test node's small workload: an HTTP server that
// answers /healthz (and, with -get URL, its own exec probe), and, given -digest FILE, logs and serves (/digest) the
// sha256 digest of that file as it reads it on each request — what a
// process runs with, never the file's content. It exits 0 on SIGTERM.
package main

import (
	"context"
	"crypto/sha256"
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
	get := flag.String("get", "", "instead of serving: GET this URL, exit 0 on 200 (an exec probe, as the image has no shell)")
	flag.Parse()
	log.SetFlags(0)
	if *get != "" {
		os.Exit(probe(*get))
	}
	if *file != "" {
		log.Printf("digest %s %s", *file, digest(*file))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/digest", func(w http.ResponseWriter, _ *http.Request) {
		if *file == "" {
			http.Error(w, "no -digest file", http.StatusNotFound)
			return
		}
		fmt.Fprintln(w, digest(*file))
	})
	srv := &http.Server{Addr: *listen, Handler: mux}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	log.Printf("serving on %s", *listen)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
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

// digest is "sha256:<hex>" of path's content, or "error: <reason>".
func digest(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("sha256:%x", sha256.Sum256(b))
}
