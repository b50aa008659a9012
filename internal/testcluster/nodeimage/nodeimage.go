// Package nodeimage builds the test node's images from Go programs in this
// repository — the pod sandbox (pause) and a small workload — and writes
// them as one OCI image layout archive that `ctr images import` reads. No
// registry is reachable from the test machines: pods run these local images
// (by tag, or pinned by digest: Archive.Pinned) with imagePullPolicy Never or
// IfNotPresent, and nothing is ever pulled.
package nodeimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
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
// binary at /<program>, which is the entrypoint.
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
	for _, im := range images {
		if layers[im.program] != nil {
			continue
		}
		bin := filepath.Join(dir, im.program)
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, pkgPath+im.program)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build %s: %v\n%s", im.program, err, out)
		}
		layer, err := layerTar(bin, im.program)
		if err != nil {
			return nil, err
		}
		layers[im.program] = layer
	}
	return writeArchive(filepath.Join(dir, "images.tar"), layers)
}

// layerTar is an uncompressed layer: /tmp and the binary as /<name>.
func layerTar(bin, name string) ([]byte, error) {
	body, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	if err := tw.WriteHeader(&tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777, ModTime: epoch}); err != nil {
		return nil, err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(body)), ModTime: epoch}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(body); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Archive is the written OCI image layout archive and the manifest digest
// of each tag, for references pinned by digest (tag@sha256:…).
type Archive struct {
	Path    string
	Digests map[string]string
}

// Pinned is ref pinned by its digest in a.
func (a *Archive) Pinned(ref string) string { return ref + "@" + a.Digests[ref] }

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// blobs are an archive's content-addressed files, written once each.
type blobs struct {
	tw      *tar.Writer
	written map[string]bool
}

func (b *blobs) add(mediaType string, body []byte) (descriptor, error) {
	sum := sha256.Sum256(body)
	d := descriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: len(body)}
	if b.written[d.Digest] {
		return d, nil
	}
	b.written[d.Digest] = true
	return d, addFile(b.tw, "blobs/sha256/"+hex.EncodeToString(sum[:]), body)
}

// writeArchive writes the OCI image layout as a tar: oci-layout,
// index.json naming each image (io.containerd.image.name, which ctr import
// reads), and the blobs — one layer per program, a config and a manifest
// per tag.
func writeArchive(path string, layers map[string][]byte) (*Archive, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	b := &blobs{tw: tw, written: map[string]bool{}}
	a := &Archive{Path: path, Digests: map[string]string{}}
	var index []descriptor
	for _, im := range images {
		m, err := b.manifest(im, layers[im.program])
		if err != nil {
			return nil, err
		}
		// Named twice: by tag, and by repository@digest — containerd 1.6's
		// CRI resolves a reference pinned by digest (tag@digest) by the
		// latter name, which only a pull would otherwise create.
		repo := im.ref[:strings.LastIndex(im.ref, ":")]
		for _, name := range []string{im.ref, repo + "@" + m.Digest} {
			named := m
			named.Annotations = map[string]string{"io.containerd.image.name": name}
			index = append(index, named)
		}
		a.Digests[im.ref] = m.Digest
	}
	idx, err := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": index})
	if err != nil {
		return nil, err
	}
	if err := addFile(tw, "oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return nil, err
	}
	if err := addFile(tw, "index.json", idx); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return a, f.Close()
}

// manifest writes im's layer, config and manifest and describes the latter.
func (b *blobs) manifest(im image, layer []byte) (descriptor, error) {
	l, err := b.add("application/vnd.oci.image.layer.v1.tar", layer)
	if err != nil {
		return descriptor{}, err
	}
	cfg, err := imageConfig(im, l.Digest)
	if err != nil {
		return descriptor{}, err
	}
	c, err := b.add("application/vnd.oci.image.config.v1+json", cfg)
	if err != nil {
		return descriptor{}, err
	}
	m, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": c, "layers": []descriptor{l}})
	if err != nil {
		return descriptor{}, err
	}
	return b.add("application/vnd.oci.image.manifest.v1+json", m)
}

// imageConfig is the image's OCI configuration: the binary is the
// entrypoint.
func imageConfig(im image, diffID string) ([]byte, error) {
	return json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      time.Unix(0, 0).UTC().Format(time.RFC3339),
		"config": map[string]any{
			"Entrypoint": []string{"/" + im.program},
			"Env":        []string{"PATH=/"},
			"Labels":     map[string]string{"dev.ql3.image": im.program, "dev.ql3.version": im.version},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	})
}

func addFile(tw *tar.Writer, name string, body []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	_, err := tw.Write(body)
	return err
}
