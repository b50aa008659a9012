// Package nodeimage builds the test node's images from Go programs in this
// repository — the pod sandbox (pause) and a small workload — and writes
// them as one OCI image layout archive that `ctr images import` reads. No
// registry is reachable from the test machines: pods run these local images
// (by tag, or pinned by digest: Archive.Pinned) with imagePullPolicy Never or
// IfNotPresent, and nothing is ever pulled.
package nodeimage

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/qinglong/kubectl-ql3/internal/ociarchive"
)

// The tags the archive carries. Workload2 is the workload under another
// tag and image ID (a label differs): an upgrade to a locally built image.
const (
	Pause     = "ql3.local/pause:1"
	Workload  = "ql3.local/workload:1"
	Workload2 = "ql3.local/workload:2"
)

const pkgPath = "github.com/qinglong/kubectl-ql3/internal/testcluster/nodeimage/"

// image is one tag of the archive: a single layer holding one static
// binary at /<program>, which is the entrypoint (the archive's format:
// internal/ociarchive).
type image struct {
	ref, program, version string
}

var images = []image{
	{Pause, "pause", "1"},
	{Workload, "workload", "1"},
	{Workload2, "workload", "2"},
}

// Build compiles the programs statically into dir (the Go build cache keeps
// a rebuild cheap) and writes dir/images.tar.
func Build(dir string) (*Archive, error) {
	layers := map[string][]byte{}
	var out []ociarchive.Image
	for _, im := range images {
		if layers[im.program] == nil {
			bin := filepath.Join(dir, im.program)
			cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, pkgPath+im.program)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				return nil, fmt.Errorf("build %s: %v\n%s", im.program, err, out)
			}
			body, err := os.ReadFile(bin)
			if err != nil {
				return nil, err
			}
			// /tmp and the binary as /<program>.
			if layers[im.program], err = ociarchive.Layer([]ociarchive.File{
				{Name: "tmp/", Mode: 0o1777}, {Name: im.program, Mode: 0o755, Body: body}}); err != nil {
				return nil, err
			}
		}
		out = append(out, ociarchive.Image{Ref: im.ref, Arch: runtime.GOARCH, Layer: layers[im.program], Config: map[string]any{
			"Entrypoint": []string{"/" + im.program},
			"Env":        []string{"PATH=/"},
			"Labels":     map[string]string{"dev.ql3.image": im.program, "dev.ql3.version": im.version},
		}})
	}
	path := filepath.Join(dir, "images.tar")
	digests, err := ociarchive.Write(path, out)
	if err != nil {
		return nil, err
	}
	return &Archive{Path: path, Digests: digests}, nil
}

// Archive is the written OCI image layout archive and the manifest digest
// of each tag, for references pinned by digest (tag@sha256:…).
type Archive struct {
	Path    string
	Digests map[string]string
}

// Pinned is ref pinned by its digest in a.
func (a *Archive) Pinned(ref string) string { return ref + "@" + a.Digests[ref] }
