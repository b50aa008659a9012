// Command imagearchive writes the release's container image: one layer
// holding the static linux kubectl-ql3 binary goreleaser just built (as
// /kubectl-ql3, the entrypoint) and LICENSE, run as user 65532, no shell,
// no other file — as an OCI image layout archive, never pushed. goreleaser
// runs it as the post hook of the "image" build (.goreleaser.yaml):
//
//	go run ./hack/imagearchive -binary BIN -arch ARCH -version vX.Y.Z -out FILE
//
// The image is named ql3.local/kubectl-ql3:<version> (and
// ql3.local/kubectl-ql3@<manifest digest>, for containerd's CRI): a local
// name to import with `ctr images import` or to push under your own with
// `skopeo copy oci-archive:FILE docker://REGISTRY/kubectl-ql3:<version>`.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/qinglong/kubectl-ql3/internal/ociarchive"
)

// Repository is the image's local repository name.
const Repository = "ql3.local/kubectl-ql3"

// User is the image's user and group: nobody's conventional number in
// distroless images; the process needs no file of the image but its own.
const User = "65532:65532"

// options are the flags.
type options struct{ bin, arch, version, license, out string }

func main() {
	var o options
	flag.StringVar(&o.bin, "binary", "", "the linux kubectl-ql3 `FILE` to put in the image")
	flag.StringVar(&o.arch, "arch", "", "its GOARCH (`amd64`, arm64)")
	flag.StringVar(&o.version, "version", "", "the release `VERSION` with its leading v: the image tag")
	flag.StringVar(&o.license, "license", "LICENSE", "the license `FILE` to put in the image")
	flag.StringVar(&o.out, "out", "", "the archive `FILE` to write")
	flag.Parse()
	if err := run(o.bin, o.arch, o.version, o.license, o.out); err != nil {
		fmt.Fprintf(os.Stderr, "error: imagearchive: %v\n", err)
		os.Exit(1)
	}
}

func run(bin, arch, version, license, out string) error {
	for _, f := range []struct{ name, value string }{{"-binary", bin}, {"-arch", arch}, {"-version", version}, {"-out", out}} {
		if f.value == "" {
			return fmt.Errorf("%s is required", f.name)
		}
	}
	if version[0] != 'v' {
		return fmt.Errorf("-version %q: want the tag, with its leading v", version)
	}
	body, err := os.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("-binary: %w", err)
	}
	lic, err := os.ReadFile(license)
	if err != nil {
		return fmt.Errorf("-license: %w", err)
	}
	layer, err := ociarchive.Layer([]ociarchive.File{
		{Name: "LICENSE", Mode: 0o444, Body: lic},
		{Name: "kubectl-ql3", Mode: 0o555, Body: body},
	})
	if err != nil {
		return err
	}
	ref := Repository + ":" + version
	digests, err := ociarchive.Write(out, []ociarchive.Image{{Ref: ref, Arch: arch, Layer: layer, Config: map[string]any{
		"Entrypoint": []string{"/kubectl-ql3"},
		"User":       User,
		"Env":        []string{"PATH=/"},
		"Labels": map[string]string{
			"org.opencontainers.image.title":    "kubectl-ql3",
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.source":   "https://github.com/qinglong/kubectl-ql3",
			"org.opencontainers.image.licenses": "Apache-2.0",
		},
	}}})
	if err != nil {
		return fmt.Errorf("-out: %w", err)
	}
	fmt.Printf("%s %s@%s\n", out, ref, digests[ref])
	return nil
}
