// Package ociarchive writes container images as an OCI image layout archive
// (a tar of oci-layout, index.json and content-addressed blobs) that
// `ctr images import` reads, and that `skopeo copy oci-archive:…` pushes
// to a registry. Each image is one uncompressed layer. It is a leaf of the
// standard library: the test node's images (internal/testcluster/nodeimage)
// and the release's own image (hack/imagearchive, run by goreleaser) are
// written by the same code.
package ociarchive

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"time"
)

// File is one regular file or directory of a layer.
type File struct {
	Name string // relative to the root, no leading slash; a directory ends in "/"
	Mode int64
	Body []byte // nil for a directory
}

// Image is one tagged image: its layer and its OCI image configuration's
// "config" member (Entrypoint, User, Env, Labels, …).
type Image struct {
	Ref    string // repository:tag, e.g. ql3.local/workload:1
	Arch   string // GOARCH of the binaries in the layer
	Layer  []byte // an uncompressed tar (Layer builds one)
	Config map[string]any
}

// Layer is an uncompressed layer tar holding files, in order, each owned
// by root, with the Unix epoch as modification time (so a layer is a
// function of its files).
func Layer(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, f := range files {
		h := &tar.Header{Name: f.Name, Typeflag: tar.TypeReg, Mode: f.Mode, Size: int64(len(f.Body)), ModTime: epoch}
		if strings.HasSuffix(f.Name, "/") {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

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

// Write writes images as an OCI image layout archive at path and returns
// each image's manifest digest by Ref. index.json names each image twice
// (annotation io.containerd.image.name, which ctr import reads): by Ref,
// and as repository@sha256:<manifest digest> — containerd 1.6's CRI
// resolves a reference pinned by digest (repository:tag@sha256:…) by the
// latter name, which only a pull would otherwise create. The first name
// also carries org.opencontainers.image.ref.name (the tag), which
// `skopeo copy oci-archive:FILE:TAG` selects by.
func Write(path string, images []Image) (map[string]string, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	b := &blobs{tw: tw, written: map[string]bool{}}
	digests := map[string]string{}
	var index []descriptor
	for _, im := range images {
		m, err := b.manifest(im)
		if err != nil {
			return nil, err
		}
		i := strings.LastIndex(im.Ref, ":")
		repo, tag := im.Ref[:i], im.Ref[i+1:]
		byTag, byDigest := m, m
		byTag.Annotations = map[string]string{"io.containerd.image.name": im.Ref, "org.opencontainers.image.ref.name": tag}
		byDigest.Annotations = map[string]string{"io.containerd.image.name": repo + "@" + m.Digest}
		index = append(index, byTag, byDigest)
		digests[im.Ref] = m.Digest
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
	return digests, f.Close()
}

// manifest writes im's layer, config and manifest and describes the latter.
func (b *blobs) manifest(im Image) (descriptor, error) {
	l, err := b.add("application/vnd.oci.image.layer.v1.tar", im.Layer)
	if err != nil {
		return descriptor{}, err
	}
	cfg, err := json.Marshal(map[string]any{
		"architecture": im.Arch,
		"os":           "linux",
		"created":      time.Unix(0, 0).UTC().Format(time.RFC3339),
		"config":       im.Config,
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{l.Digest}},
	})
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

func addFile(tw *tar.Writer, name string, body []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	_, err := tw.Write(body)
	return err
}
