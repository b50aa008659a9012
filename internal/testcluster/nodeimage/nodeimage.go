// Package nodeimage builds the test node's images from Go programs in this
// repository — the pod sandbox (pause) and a small workload — and writes
// them as one docker-archive tarball that `ctr images import` reads. No
// registry is reachable from the test machines: pods run these local tags
// with imagePullPolicy Never or IfNotPresent, and nothing is ever pulled.
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
// a rebuild cheap) and writes dir/images.tar, whose path it returns.
func Build(dir string) (string, error) {
	layers := map[string][]byte{}
	for _, im := range images {
		if layers[im.program] != nil {
			continue
		}
		bin := filepath.Join(dir, im.program)
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, pkgPath+im.program)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("build %s: %v\n%s", im.program, err, out)
		}
		layer, err := layerTar(bin, im.program)
		if err != nil {
			return "", err
		}
		layers[im.program] = layer
	}
	out := filepath.Join(dir, "images.tar")
	return out, writeArchive(out, layers)
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

type manifestEntry struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// writeArchive writes the docker-archive: manifest.json, one config per
// tag, one layer per program.
func writeArchive(path string, layers map[string][]byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	var manifest []manifestEntry
	written := map[string]bool{}
	for _, im := range images {
		layer := layers[im.program]
		layerSum := sha256.Sum256(layer)
		layerName := hex.EncodeToString(layerSum[:]) + "/layer.tar"
		if !written[layerName] {
			if err := addFile(tw, layerName, layer); err != nil {
				return err
			}
			written[layerName] = true
		}
		cfg, err := imageConfig(im, "sha256:"+hex.EncodeToString(layerSum[:]))
		if err != nil {
			return err
		}
		cfgSum := sha256.Sum256(cfg)
		cfgName := hex.EncodeToString(cfgSum[:]) + ".json"
		if err := addFile(tw, cfgName, cfg); err != nil {
			return err
		}
		manifest = append(manifest, manifestEntry{Config: cfgName, RepoTags: []string{im.ref}, Layers: []string{layerName}})
	}
	m, err := json.Marshal(manifest)
	if err != nil {
		return err
	}
	if err := addFile(tw, "manifest.json", m); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// imageConfig is the image's configuration (OCI image config, as Docker
// writes it): the binary is the entrypoint.
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
