package stagelayout

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/package/intent"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// Package is what a stage holds (docs/package-pointer.md, "The stage, as
// OCI objects"): the producer's side of the layout Verifier reads.
type Package struct {
	// Name is the repository name the stage reference carries
	// (NAME@<package manifest digest>).
	Name string
	// Tag, when set, is the package manifest's
	// org.opencontainers.image.ref.name annotation in index.json.
	Tag string
	// Evidence is the stage config blob: what the stage adapter records
	// about where the bundle came from; bound by digest, not interpreted.
	Evidence []byte
	// Lock is the package lock layer.
	Lock []byte
	// Bundle is read once, to its end, as the package bundle layer
	// (tar+gzip; bound by digest, not interpreted): hashed while it is
	// copied into the layout, never held in memory whole.
	Bundle io.Reader
}

// Staged is a package written into a layout.
type Staged struct {
	Manifest, Config, Lock, Bundle Descriptor
	// Evidence is the five stage fields; StageReceiptDigest is set once a
	// receipt is attached.
	Evidence Evidence
}

// Statement is the statement a stage receipt of s signs.
func (s *Staged) Statement() Statement {
	return Statement{Schema: StatementSchema, StageReference: s.Evidence.StageReference,
		LockDigest: s.Evidence.LockDigest, ContentDigest: s.Evidence.ContentDigest,
		AdapterEvidenceDigest: s.Evidence.AdapterEvidenceDigest}
}

var errEmpty = fail.Errorf(fail.Invalid, "stage: the lock, the bundle and the adapter evidence must not be empty")

// WritePackage writes p's blobs and package manifest into the OCI layout
// dir — a new or empty directory (created), or an existing layout whose
// index.json gains the manifest — and returns what it wrote. Each file is
// written to a temporary name and renamed, so a reader never sees half a
// blob. Bad input (no name, an empty lock or bundle, a directory holding
// something other than a layout) is fail.Invalid.
func WritePackage(dir string, p Package) (*Staged, error) {
	if err := intent.CheckName("--name", p.Name); err != nil {
		return nil, fail.Errorf(fail.Invalid, "stage: %v", err)
	}
	if len(p.Lock) == 0 || p.Bundle == nil || len(p.Evidence) == 0 {
		return nil, errEmpty
	}
	w, err := openWriter(dir)
	if err != nil {
		return nil, err
	}
	defer w.root.Close()
	s := &Staged{}
	if s.Bundle, err = w.stream(MediaTypeBundle, p.Bundle); err != nil {
		return nil, err
	}
	if s.Config, err = w.blob(MediaTypeStageConfig, p.Evidence); err != nil {
		return nil, err
	}
	if s.Lock, err = w.blob(MediaTypeLock, p.Lock); err != nil {
		return nil, err
	}
	m := Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: MediaTypeManifest,
		Config: s.Config, Layers: []Descriptor{s.Lock, s.Bundle}}
	if s.Manifest, err = w.json(MediaTypeManifest, m); err != nil {
		return nil, err
	}
	s.Evidence = Evidence{LockDigest: string(s.Lock.Digest), StageReference: p.Name + "@" + string(s.Manifest.Digest),
		AdapterEvidenceDigest: string(s.Config.Digest), ContentDigest: string(s.Bundle.Digest)}
	listed := s.Manifest
	if p.Tag != "" {
		listed.Annotations = map[string]string{ocispec.AnnotationRefName: p.Tag}
	}
	return s, w.list(listed)
}

// AttachReceipt writes a stage receipt for s into dir: the signed
// statement blob, the receipt manifest (empty config, the statement as its
// one layer, subject s's manifest, the lock digest annotation) and its
// index.json entry. subject and lockAnnotation are what the receipt names;
// a producer passes s.Manifest and s.Evidence.LockDigest (tests pass
// others to make receipts the verifier must refuse).
func AttachReceipt(dir string, s *Staged, signed []byte, subject Descriptor, lockAnnotation string) (Descriptor, error) {
	w, err := openWriter(dir)
	if err != nil {
		return Descriptor{}, err
	}
	defer w.root.Close()
	statement, err := w.blob(MediaTypeReceipt, signed)
	if err != nil {
		return Descriptor{}, err
	}
	empty, err := w.blob(MediaTypeEmpty, []byte("{}"))
	if err != nil {
		return Descriptor{}, err
	}
	subject = Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size}
	rd, err := w.json(MediaTypeManifest, Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: MediaTypeManifest, ArtifactType: ArtifactTypeReceipt,
		Config: empty, Layers: []Descriptor{statement}, Subject: &subject,
		Annotations: map[string]string{AnnotationLockDigest: lockAnnotation},
	})
	if err != nil {
		return Descriptor{}, err
	}
	rd.ArtifactType = ArtifactTypeReceipt
	s.Evidence.StageReceiptDigest = string(rd.Digest)
	return rd, w.list(rd)
}

// writer writes into one layout directory through an os.Root.
type writer struct {
	root *os.Root
	dir  string
}

// openWriter opens dir as a layout to write: created if absent; an empty
// directory becomes a layout; a directory with files must be a layout
// already (its oci-layout file says 1.0.0).
func openWriter(dir string) (*writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fail.Errorf(fail.Invalid, "stage: --layout %q: %v", dir, unwrapPath(err))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "stage: --layout %q: %v", dir, unwrapPath(err))
	}
	if len(entries) > 0 {
		l, err := openLayout(dir)
		if err != nil {
			return nil, fail.Errorf(fail.Invalid, "stage: --layout %q holds files but is not an OCI layout (%v): name a new or empty directory, or a layout", dir, err)
		}
		l.Close()
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "stage: --layout %q: %v", dir, unwrapPath(err))
	}
	w := &writer{root: root, dir: dir}
	if err := root.MkdirAll("blobs/sha256", 0o755); err != nil {
		root.Close()
		return nil, w.unavailable("blobs/sha256", err)
	}
	if len(entries) == 0 {
		if err := w.file("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
			root.Close()
			return nil, err
		}
	}
	return w, nil
}

func (w *writer) unavailable(name string, err error) error {
	return fail.Errorf(fail.Unavailable, "stage: write %s/%s: %v", w.dir, name, unwrapPath(err))
}

// file writes name whole: a temporary file renamed over it.
func (w *writer) file(name string, data []byte) error {
	tmp, err := w.temp(path.Dir(name), func(f io.Writer) error {
		_, err := f.Write(data)
		return err
	})
	if err != nil {
		return w.unavailable(name, err)
	}
	return w.place(tmp, name)
}

// place renames the temporary file tmp to name (removing it if that fails).
func (w *writer) place(tmp, name string) error {
	if err := w.root.Rename(tmp, name); err != nil {
		_ = w.root.Remove(tmp)
		return w.unavailable(name, err)
	}
	return nil
}

// temp writes a new temporary file in dir with write and returns its
// name; on any error it is removed.
func (w *writer) temp(dir string, write func(io.Writer) error) (string, error) {
	var r [8]byte
	_, _ = rand.Read(r[:])
	tmp := path.Join(dir, ".tmp-"+hex.EncodeToString(r[:]))
	f, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = w.root.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// stream copies r to its end into a blob, hashing while it copies, and
// returns its descriptor. A read error is the input's, as is nothing to
// read (invalid, the temporary file removed); a write error the layout's
// (unavailable).
func (w *writer) stream(mediaType string, r io.Reader) (Descriptor, error) {
	h := digest.Canonical.Digester()
	var n int64
	var readErr error
	tmp, err := w.temp("blobs/sha256", func(f io.Writer) error {
		var err error
		n, err = io.Copy(io.MultiWriter(f, h.Hash()), readerErr{r, &readErr})
		return err
	})
	if readErr != nil {
		return Descriptor{}, fail.Errorf(fail.Invalid, "stage: read the bundle: %v", readErr)
	}
	if err != nil {
		return Descriptor{}, w.unavailable("blobs/sha256", err)
	}
	if n == 0 {
		_ = w.root.Remove(tmp)
		return Descriptor{}, errEmpty
	}
	d := Descriptor{MediaType: mediaType, Digest: h.Digest(), Size: n}
	return d, w.place(tmp, blobPath(d.Digest))
}

// readerErr records its reader's error, so a copy's failure can be told
// apart: the input's, or the destination's.
type readerErr struct {
	r   io.Reader
	err *error
}

func (r readerErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		*r.err = err
	}
	return n, err
}

// blob writes data as a blob and returns its descriptor.
func (w *writer) blob(mediaType string, data []byte) (Descriptor, error) {
	d := Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
	return d, w.file(blobPath(d.Digest), data)
}

func (w *writer) json(mediaType string, v any) (Descriptor, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return Descriptor{}, err
	}
	return w.blob(mediaType, data)
}

// list adds d to index.json unless a descriptor of the same digest is
// listed already.
func (w *writer) list(d Descriptor) error {
	index := Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex}
	// The layout's own read: a named pipe in place of index.json is
	// refused without blocking (layout.open), as when it is verified.
	switch data, err := (&layout{root: w.root, dir: w.dir}).readFile("index.json", MaxManifestBytes); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		if err := json.Unmarshal(data, &index); err != nil {
			return fail.Errorf(fail.Invalid, "stage: %s/index.json: %v", w.dir, err)
		}
	}
	if slices.ContainsFunc(index.Manifests, func(m Descriptor) bool { return m.Digest == d.Digest }) {
		return nil
	}
	index.Manifests = append(index.Manifests, d)
	data, err := json.MarshalIndent(index, "", "  ")
	if err != nil {
		return fmt.Errorf("stage: index.json: %w", err)
	}
	return w.file("index.json", data)
}
