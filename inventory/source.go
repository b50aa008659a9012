package inventory

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/qinglong/kubectl-ql3/third_party/kustomize-api/konfig"
	"github.com/qinglong/kubectl-ql3/third_party/kustomize-api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// SourceFile is one file the kustomization read, as the source digest
// covers it.
type SourceFile struct {
	// Path is relative to the release directory, slash-separated; files
	// outside it keep their "../" prefix.
	Path string `json:"path"`
	// Digest is "sha256:<hex>" of the file's bytes; for a file that may hold
	// a Secret value it is "hmac-sha256:<hex>" under the secret digest key,
	// or RedactedMarker without a key (docs/digests.md).
	Digest string `json:"digest"`
}

// SourceDigest is the digest of a release's source files: the canonical JSON
// array of files, sorted by path, under the "source" domain.
func SourceDigest(files []SourceFile) (string, error) {
	if files == nil {
		files = []SourceFile{}
	}
	return DigestOf(DomainSource, files)
}

// FileDigest is the plain entry digest of a source file: "sha256:" and the
// hex SHA-256 of its bytes (no domain: it is an input to SourceDigest, which
// is domain-separated).
func FileDigest(data []byte) string {
	sum := sha256.Sum256(data)
	return DigestPrefix + hex.EncodeToString(sum[:])
}

// HMACPrefix starts every keyed digest.
const HMACPrefix = "hmac-sha256:"

// keyed is the domain-separated HMAC-SHA256 of parts under key:
//
//	"hmac-sha256:" + hex(HMAC-SHA256(key, "kubectl-ql3/" + domain + "/v1" + 0x00 + parts joined by 0x00))
func keyed(key []byte, domain string, parts ...[]byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("kubectl-ql3/" + domain + "/v1"))
	for _, p := range parts {
		m.Write([]byte{0})
		m.Write(p)
	}
	return HMACPrefix + hex.EncodeToString(m.Sum(nil))
}

// Keyed-digest domains (docs/digests.md).
const (
	DomainSecretValue = "secret-value"
	DomainSourceFile  = "source-file"
)

// sourceFiles turns the files read into source entries. When the render
// holds Secret values, a file that may carry one (it mentions a Secret kind,
// or contains a value verbatim or base64-encoded) is keyed or redacted
// instead of hashed, so the lock never holds a bare hash of a secret.
func sourceFiles(files map[string][]byte, secrets []secretValue, key []byte) ([]SourceFile, error) {
	out := make([]SourceFile, 0, len(files))
	for p, data := range files {
		if p == LockFile {
			return nil, fmt.Errorf("the kustomization reads %q; a lock cannot be an input of its own release", LockFile)
		}
		f := SourceFile{Path: p, Digest: FileDigest(data)}
		// A chart archive is compressed: no value shows in it, so with
		// Secret values in the render it is taken to hold one.
		if len(secrets) > 0 && (mayHoldSecret(data, secrets) || strings.HasSuffix(p, ".tgz")) {
			if len(key) > 0 {
				f.Digest = keyed(key, DomainSourceFile, []byte(p), data)
			} else {
				f.Digest = RedactedMarker
			}
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b SourceFile) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// recorder is the file system Render hands kustomize: reads pass through and
// are recorded, writes are refused, and each kustomization read is checked
// for references that would leave the file system (remote bases, URLs,
// Helm charts) before kustomize acts on it.
//
// Files are named by the path the kustomization used, not by where links
// lead: kustomize resolves every link (CleanedAbs), so a release mounted from
// a ConfigMap volume (app.yaml -> ..data/app.yaml, ..data -> ..2026_…) would
// otherwise be read as "..2026_…/app.yaml". The recorder notes each name
// inside the release that resolves inside the release, and names a file
// read at a resolved path by the smallest such name of its nearest noted
// ancestor (docs/lock.md). Kustomize itself still sees resolved paths only,
// so its root-only load restriction and its cycle detection are unchanged.
type recorder struct {
	filesys.FileSystem
	root string

	mu      sync.Mutex
	read    map[string][]byte // by resolved absolute path
	aliases map[string]string // resolved absolute path -> smallest name used for it
	refused error
	virtual map[string][]byte // the in-memory chart resources (ChartResource), by absolute path
	helm    *LockHelm         // the charts rendered, without digests
	// inflated are the kustomizations with charts as kustomize saw them, by
	// absolute path: read again, a kustomization's charts are not rendered
	// (nor bound) twice.
	inflated map[string][]byte
}

func newRecorder(fsys filesys.FileSystem, root filesys.ConfirmedDir) *recorder {
	return &recorder{FileSystem: fsys, root: string(root), read: map[string][]byte{}, aliases: map[string]string{}, virtual: map[string][]byte{}, inflated: map[string][]byte{}}
}

// CleanedAbs resolves p as the wrapped file system does, and notes the name
// p under its resolution when both lie in the release directory.
func (r *recorder) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	if d, f, ok := r.cleanedAbsVirtual(p); ok {
		return d, f, nil
	}
	d, f, err := r.FileSystem.CleanedAbs(p)
	if err != nil {
		return d, f, err
	}
	abs, aerr := filepath.Abs(p)
	if aerr != nil {
		return d, f, nil
	}
	resolved := string(d)
	if f != "" {
		resolved = d.Join(f)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// Kustomize joins the names in a kustomization to its directory as it
	// resolved it: name that directory as the kustomization's referrer did.
	name := r.lexical(abs)
	if inside(r.root, name) && inside(r.root, resolved) {
		if prev, ok := r.aliases[resolved]; !ok || name < prev {
			r.aliases[resolved] = name
		}
	}
	return d, f, nil
}

// inside reports whether p is root or lies below it, lexically.
func inside(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// lexical names the absolute path p as the kustomization did: the noted
// name of p's nearest noted ancestor (or of p itself) with the rest of p
// appended; p itself when none is noted. Callers hold r.mu.
func (r *recorder) lexical(p string) string {
	for dir, rest := p, ""; ; {
		if alias, ok := r.aliases[dir]; ok {
			return filepath.Join(alias, rest)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return p
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

// name is the source path of the file read at p, relative to the release
// directory. Callers hold r.mu.
func (r *recorder) name(p string) string { return relPath(r.root, r.lexical(p)) }

// files are the files read, by source path. Two files under one name mean
// the tree changed while rendering.
func (r *recorder) files() (map[string][]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]byte, len(r.read))
	for p, data := range r.read {
		n := r.name(p)
		if _, dup := out[n]; dup {
			return nil, fmt.Errorf("file %q changed while rendering", n)
		}
		out[n] = data
	}
	return out, nil
}

func (r *recorder) refuse(err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refused == nil {
		r.refused = err
	}
	return err
}

func (r *recorder) ReadFile(p string) ([]byte, error) {
	r.mu.Lock()
	v, virtual := r.virtual[filepath.Clean(p)]
	r.mu.Unlock()
	if virtual {
		return v, nil
	}
	data, rel, err := r.record(p)
	if err != nil {
		return nil, err
	}
	if slices.Contains(konfig.RecognizedKustomizationFileNames(), filepath.Base(p)) {
		if err := r.checkLocal(filepath.Dir(p), rel, data); err != nil {
			return nil, r.refuse(err)
		}
		abs := filepath.Clean(p)
		r.mu.Lock()
		done, ok := r.inflated[abs]
		r.mu.Unlock()
		if ok {
			return done, nil
		}
		out, err := r.inflate(filepath.Dir(p), rel, data)
		if err != nil {
			return nil, r.refuse(err)
		}
		r.mu.Lock()
		r.inflated[abs] = out
		r.mu.Unlock()
		return out, nil
	}
	return data, nil
}

// record reads the file at p and records it as a source file; it returns
// the bytes and the file's source path.
func (r *recorder) record(p string) ([]byte, string, error) {
	data, err := r.FileSystem.ReadFile(p)
	if err != nil {
		return nil, "", err
	}
	abs := filepath.Clean(p)
	r.mu.Lock()
	rel := r.name(abs)
	prev, seen := r.read[abs]
	r.read[abs] = data
	r.mu.Unlock()
	if seen && !bytes.Equal(prev, data) {
		return nil, rel, r.refuse(fmt.Errorf("file %q changed while rendering", rel))
	}
	return data, rel, nil
}

var errWrite = errors.New("rendering must not write to the file system")

func (r *recorder) Open(p string) (filesys.File, error) {
	return nil, r.refuse(fmt.Errorf("open %q: rendering reads files only through ReadFile", relPath(r.root, p)))
}
func (r *recorder) Create(string) (filesys.File, error) { return nil, r.refuse(errWrite) }
func (r *recorder) Mkdir(string) error                  { return r.refuse(errWrite) }
func (r *recorder) MkdirAll(string) error               { return r.refuse(errWrite) }
func (r *recorder) RemoveAll(string) error              { return r.refuse(errWrite) }
func (r *recorder) WriteFile(string, []byte) error      { return r.refuse(errWrite) }

// checkLocal refuses a kustomization whose references could make kustomize
// fetch from the network or run a program: the source digest could not
// cover what they bring in.
func (r *recorder) checkLocal(dir, rel string, data []byte) error {
	var k types.Kustomization
	if err := k.Unmarshal(data); err != nil {
		return nil // kustomize reports it
	}
	remote := func(field, ref string) error {
		return fmt.Errorf("kustomization %q: %s entry %q is remote; a locked release renders from local files only", rel, field, ref)
	}
	if len(k.HelmChartInflationGenerator) > 0 {
		return fmt.Errorf("kustomization %q: helmChartInflationGenerator is deprecated and not supported; declare the chart under helmCharts (docs/lock.md, Helm charts)", rel)
	}
	// Directories and files kustomize resolves itself: a path that does not
	// exist locally would be tried as a git repository.
	type ref struct{ field, value string }
	var bases, paths []ref
	add := func(to *[]ref, field string, values ...string) {
		for _, v := range values {
			*to = append(*to, ref{field, v})
		}
	}
	add(&bases, "resources", k.Resources...)
	add(&bases, "bases", k.Bases...)
	add(&bases, "components", k.Components...)
	for _, b := range bases {
		switch {
		case isRemote(b.value):
			return remote(b.field, b.value)
		case !r.FileSystem.Exists(filepath.Join(dir, filepath.FromSlash(b.value))):
			// kustomize would try it as a git repository.
			return fmt.Errorf("kustomization %q: %s entry %q does not exist in the release tree (remote bases are not allowed)", rel, b.field, b.value)
		}
	}
	add(&paths, "crds", k.Crds...)
	add(&paths, "configurations", k.Configurations...)
	add(&paths, "generators", k.Generators...)
	add(&paths, "transformers", k.Transformers...)
	add(&paths, "validators", k.Validators...)
	add(&paths, "openapi", k.OpenAPI["path"])
	for _, p := range k.PatchesStrategicMerge {
		add(&paths, "patchesStrategicMerge", string(p))
	}
	for _, p := range k.PatchesJson6902 {
		add(&paths, "patchesJson6902", p.Path)
	}
	for _, p := range k.Patches {
		add(&paths, "patches", p.Path)
	}
	for _, p := range k.Replacements {
		add(&paths, "replacements", p.Path)
	}
	gens := func(field string, s types.KvPairSources) {
		for _, f := range s.FileSources {
			if _, p, ok := strings.Cut(f, "="); ok {
				f = p
			}
			add(&paths, field, f)
		}
		add(&paths, field, s.EnvSources...)
		add(&paths, field, s.EnvSource)
	}
	for _, g := range k.ConfigMapGenerator {
		gens("configMapGenerator", g.KvPairSources)
	}
	for _, g := range k.SecretGenerator {
		gens("secretGenerator", g.KvPairSources)
	}
	for _, p := range paths {
		if isRemote(p.value) {
			return remote(p.field, p.value)
		}
	}
	return nil
}

// isRemote reports whether a kustomization reference names something
// outside the file system: a URL or a git repository spec. Inline content
// (several lines) is local.
func isRemote(ref string) bool {
	if ref == "" || strings.Contains(ref, "\n") {
		return false
	}
	if strings.Contains(ref, "://") {
		return true
	}
	for _, p := range []string{"git@", "git::", "gh:", "ssh:", "file:"} {
		if strings.HasPrefix(ref, p) {
			return true
		}
	}
	return false
}

// cleanRelPath reports whether p is a clean, relative, slash-separated path
// as SourceFile.Path requires.
func cleanRelPath(p string) bool {
	return p != "" && p != "." && !strings.HasPrefix(p, "/") && !strings.Contains(p, `\`) && path.Clean(p) == p
}
