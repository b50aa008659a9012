package ociarchive

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// Named is one image an archive names in its index.json, as read back.
type Named struct {
	Name   string // io.containerd.image.name
	Digest string // the manifest's digest
	Arch   string
	Config map[string]any    // the image configuration's "config" member
	Files  map[string][]byte // the single layer's entries (a directory: nil)
}

// Read reads an archive Write wrote, checking every blob against its
// digest, and returns the images its index.json names, in order.
func Read(path string) ([]Named, error) {
	blobs, index, err := readTar(path)
	if err != nil {
		return nil, err
	}
	var idx struct {
		Manifests []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(index, &idx); err != nil {
		return nil, fmt.Errorf("%s: index.json: %w", path, err)
	}
	var out []Named
	for _, d := range idx.Manifests {
		n, err := readImage(blobs, d)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, d.Annotations["io.containerd.image.name"], err)
		}
		out = append(out, n)
	}
	return out, nil
}

// readTar is the archive's blobs by digest, each checked, and index.json.
func readTar(path string) (map[string][]byte, []byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	blobs := map[string][]byte{}
	var index []byte
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		if h.Name == "index.json" {
			index = body
		} else if hexSum, ok := strings.CutPrefix(h.Name, "blobs/sha256/"); ok {
			sum := sha256.Sum256(body)
			if hex.EncodeToString(sum[:]) != hexSum {
				return nil, nil, fmt.Errorf("%s: %s does not match its digest", path, h.Name)
			}
			blobs["sha256:"+hexSum] = body
		}
	}
	if index == nil {
		return nil, nil, fmt.Errorf("%s: no index.json", path)
	}
	return blobs, index, nil
}

func readImage(blobs map[string][]byte, d descriptor) (Named, error) {
	n := Named{Name: d.Annotations["io.containerd.image.name"], Digest: d.Digest, Files: map[string][]byte{}}
	var m struct {
		Config descriptor   `json:"config"`
		Layers []descriptor `json:"layers"`
	}
	if err := json.Unmarshal(blobs[d.Digest], &m); err != nil {
		return n, fmt.Errorf("manifest %s: %w", d.Digest, err)
	}
	if len(m.Layers) != 1 {
		return n, fmt.Errorf("manifest %s has %d layers, want 1", d.Digest, len(m.Layers))
	}
	var cfg struct {
		Arch   string         `json:"architecture"`
		Config map[string]any `json:"config"`
	}
	if err := json.Unmarshal(blobs[m.Config.Digest], &cfg); err != nil {
		return n, fmt.Errorf("config %s: %w", m.Config.Digest, err)
	}
	n.Arch, n.Config = cfg.Arch, cfg.Config
	tr := tar.NewReader(bytes.NewReader(blobs[m.Layers[0].Digest]))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return n, nil
		} else if err != nil {
			return n, fmt.Errorf("layer %s: %w", m.Layers[0].Digest, err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			return n, err
		}
		if h.Typeflag == tar.TypeDir {
			body = nil
		}
		n.Files[h.Name] = body
	}
}
