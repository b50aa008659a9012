package stagelayout

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/safefile"
	"github.com/qinglong/kubectl-ql3/internal/strictjson"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// MaxManifestBytes bounds every JSON document read from a layout:
// oci-layout, index.json, manifests.
const MaxManifestBytes = 4 << 20

// The OCI types are the image-spec's own (github.com/opencontainers/
// image-spec/specs-go/v1); digests are go-digest's. This package reads
// only the members docs/package-pointer.md names.
type (
	Descriptor = ocispec.Descriptor
	Manifest   = ocispec.Manifest
	Index      = ocispec.Index
)

// layout reads one OCI image layout directory through an os.Root, so no
// path in it (a symbolic link, a "..") reaches outside the directory.
type layout struct {
	root *os.Root
	dir  string
}

// openLayout opens dir and checks its oci-layout file. A dir that cannot
// be opened as a directory, holds no oci-layout file, or one that is not
// {"imageLayoutVersion": "1.0.0"}, is not a layout it reads: fail.Invalid
// (a missing or mistyped --layout; rereading would not change it).
// Anything else it cannot read is fail.Unavailable.
func openLayout(dir string) (*layout, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "stage evidence: --layout %s: %v: give the OCI image layout directory (oras --oci-layout, skopeo oci:)", dir, unwrapPath(err))
	}
	l := &layout{root: root, dir: dir}
	data, err := l.readFile("oci-layout", MaxManifestBytes)
	if errors.Is(err, fs.ErrNotExist) {
		root.Close()
		return nil, fail.Errorf(fail.Invalid, "stage evidence: --layout %s has no oci-layout file: it is not an OCI image layout (oras --oci-layout, skopeo oci:)", dir)
	}
	if err != nil {
		root.Close()
		return nil, err
	}
	var v struct {
		ImageLayoutVersion string `json:"imageLayoutVersion"`
	}
	if json.Unmarshal(data, &v) != nil || v.ImageLayoutVersion != "1.0.0" {
		root.Close()
		return nil, fail.Errorf(fail.Invalid, "stage evidence: %s/oci-layout is not {\"imageLayoutVersion\": \"1.0.0\"}: not an OCI image layout this verifier reads (oras --oci-layout, skopeo oci: write 1.0.0)", dir)
	}
	return l, nil
}

func (l *layout) Close() error { return l.root.Close() }

// open opens name in the layout for reading without blocking (safefile.NonblockFlag:
// O_NONBLOCK where there are FIFOs, so a named pipe cannot hold the open
// itself) and checks, on the open file, that it is a regular file: a
// FIFO, device or directory is refused before a byte is read. Failures
// are unavailable, wrapping the cause (fs.ErrNotExist for an absent name);
// errors call the file what.
func (l *layout) open(name, what string) (*os.File, error) {
	f, err := l.root.OpenFile(name, os.O_RDONLY|safefile.NonblockFlag, 0)
	if err != nil {
		return nil, fail.Errorf(fail.Unavailable, "stage evidence: read %s: %w", what, unwrapPath(err))
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("not a regular file (%s): the layout is damaged; copy the stage again", fi.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, unavailablef("read %s: %v", what, err)
	}
	return f, nil
}

// readFile reads name, at most max bytes; any failure is unavailable.
func (l *layout) readFile(name string, max int64) ([]byte, error) {
	f, err := l.open(name, l.dir+"/"+name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, unavailablef("read %s/%s: %v", l.dir, name, err)
	}
	if int64(len(data)) > max {
		return nil, unavailablef("%s/%s is larger than %d bytes", l.dir, name, max)
	}
	return data, nil
}

// index reads index.json.
func (l *layout) index() (*Index, error) {
	data, err := l.readFile("index.json", MaxManifestBytes)
	if err != nil {
		return nil, err
	}
	var ix Index
	if err := json.Unmarshal(data, &ix); err != nil || ix.SchemaVersion != 2 {
		return nil, unavailablef("%s/index.json is not an OCI image index (schemaVersion 2)", l.dir)
	}
	return &ix, nil
}

// blobPath is where a well-formed digest's blob lives.
func blobPath(d digest.Digest) string {
	return "blobs/sha256/" + d.Encoded()
}

// blob reads the blob d names and checks its size and SHA-256 against d;
// read at most max bytes into memory (max < 0: hash only, return nil).
// Absent, unreadable, short, long or different bytes are unavailable: the
// evidence cannot be read intact.
func (l *layout) blob(d Descriptor, max int64) ([]byte, error) {
	if !canon.IsDigest(string(d.Digest)) {
		return nil, unavailablef("descriptor digest %q is not sha256:<64 hex>; only sha256 blobs are read", strictjson.Clip(d.Digest))
	}
	if d.Size < 0 || max >= 0 && d.Size > max {
		return nil, unavailablef("blob %s: size %d is out of bounds (at most %d)", d.Digest, d.Size, max)
	}
	f, err := l.open(blobPath(d.Digest), "blob "+string(d.Digest))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := digest.Canonical.Digester()
	var keep strings.Builder
	var w io.Writer = h.Hash()
	if max >= 0 {
		w = io.MultiWriter(h.Hash(), &keep)
	}
	n, err := io.Copy(w, io.LimitReader(f, d.Size+1))
	if err != nil {
		return nil, unavailablef("read blob %s: %v", d.Digest, err)
	}
	if n != d.Size {
		return nil, unavailablef("blob %s does not have the %d bytes its descriptor says: the layout is damaged; copy the stage again", d.Digest, d.Size)
	}
	if got := h.Digest(); got != d.Digest {
		return nil, unavailablef("blob %s hashes to %s: the layout is damaged or was altered; copy the stage again", d.Digest, got)
	}
	if max < 0 {
		return nil, nil
	}
	return []byte(keep.String()), nil
}

// blobSize is the size of the blob d names on disk, for a digest known
// only from a reference (no descriptor yet).
func (l *layout) blobSize(digest digest.Digest) (int64, error) {
	fi, err := l.root.Stat(blobPath(digest))
	if err != nil {
		return 0, unavailablef("read blob %s: %v", digest, unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		return 0, unavailablef("blob %s is not a regular file", digest)
	}
	return fi.Size(), nil
}

// unwrapPath drops the path from a *fs.PathError (the message names it).
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
