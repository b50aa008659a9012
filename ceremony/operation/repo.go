package operation

import (
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/qinglong/kubectl-ql3/third_party/kustomize-api/konfig"
	"github.com/qinglong/kubectl-ql3/third_party/kustomize-api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/manifestaudit"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// repo is the repository tree around the operation.
type repo struct {
	// root is the repository root, absolute and clean.
	root string
	// dir is the audited directory, absolute and clean.
	dir string
	// opDirs are the operation's own kustomization directories: DIR and
	// every directory under DIR's parent whose kustomization the render
	// read.
	opDirs []string
	// kusts are every kustomization under root, by path.
	kusts []kustomization
}

// kustomization is one kustomization file of the repository.
type kustomization struct {
	file string // relative to the repository root, slash-separated
	dir  string // absolute
	refs []ref
}

// ref is one path a kustomization names: field is the JSON path of the entry
// (resources[2], patches[0].path, …), value the path as written.
type ref struct{ field, value string }

// readRepo reads every kustomization under root (skipping only the
// directories named .git). dir must be inside root.
func readRepo(fsys filesys.FileSystem, root, dir string, rel *inventory.Release) (*repo, error) {
	absRoot, file, err := fsys.CleanedAbs(root)
	if err != nil || file != "" {
		return nil, fail.Errorf(fail.Invalid, "--repo-root %q is not a directory", root)
	}
	absDir, _, err := fsys.CleanedAbs(dir)
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "operation %q: %w", dir, err)
	}
	r := &repo{root: string(absRoot), dir: string(absDir)}
	if !within(filepath.ToSlash(r.dir), filepath.ToSlash(r.root)) {
		return nil, fail.Errorf(fail.Invalid, "operation %q is not inside --repo-root %q; give the checkout that holds it", dir, root)
	}
	parent := filepath.Dir(r.dir)
	for _, src := range rel.Sources {
		if !isKustomizationFile(path.Base(src.Path)) {
			continue
		}
		d := filepath.Clean(filepath.Join(r.dir, filepath.FromSlash(path.Dir(src.Path))))
		if d == r.dir || within(filepath.ToSlash(d), filepath.ToSlash(parent)) {
			r.opDirs = append(r.opDirs, d)
		}
	}
	slices.Sort(r.opDirs)
	r.opDirs = slices.Compact(r.opDirs)

	err = fsys.Walk(r.root, func(p string, info fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() {
			// Only git's own store is skipped: a kustomization under any
			// other dot-directory (.deploy/, .argocd/) can still reference
			// the operation, and "nothing references it" is a claim about
			// the whole checkout.
			if p != r.root && info.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !isKustomizationFile(info.Name()) {
			return nil
		}
		relFile, err := filepath.Rel(r.root, p)
		if err != nil {
			return err
		}
		data, err := fsys.ReadFile(p)
		if err != nil {
			return err
		}
		refs, err := kustomizationRefs(data)
		if err != nil {
			return fail.Errorf(fail.Invalid, "kustomization %q: %w", filepath.ToSlash(relFile), err)
		}
		r.kusts = append(r.kusts, kustomization{file: filepath.ToSlash(relFile), dir: filepath.Dir(p), refs: refs})
		return nil
	})
	if err != nil {
		if fail.ClassOf(err) != fail.Other {
			return nil, err
		}
		return nil, fail.Errorf(fail.Invalid, "--repo-root %q: %w", root, err)
	}
	return r, nil
}

func isKustomizationFile(name string) bool {
	return slices.Contains(konfig.RecognizedKustomizationFileNames(), name)
}

// kustomizationRefs parses a kustomization and lists every local path it
// names, in field order.
func kustomizationRefs(data []byte) ([]ref, error) {
	var k types.Kustomization
	if err := k.Unmarshal(data); err != nil {
		return nil, err
	}
	var out []ref
	list := func(field string, values []string) {
		for i, v := range values {
			out = append(out, ref{fmt.Sprintf("%s[%d]", field, i), v})
		}
	}
	list("resources", k.Resources)
	list("bases", k.Bases)
	list("components", k.Components)
	list("crds", k.Crds)
	list("configurations", k.Configurations)
	list("generators", k.Generators)
	list("transformers", k.Transformers)
	list("validators", k.Validators)
	for i, p := range k.Patches {
		if p.Path != "" {
			out = append(out, ref{fmt.Sprintf("patches[%d].path", i), p.Path})
		}
	}
	for i, p := range k.PatchesStrategicMerge {
		out = append(out, ref{fmt.Sprintf("patchesStrategicMerge[%d]", i), string(p)})
	}
	for i, p := range k.PatchesJson6902 {
		if p.Path != "" {
			out = append(out, ref{fmt.Sprintf("patchesJson6902[%d].path", i), p.Path})
		}
	}
	for i, p := range k.Replacements {
		if p.Path != "" {
			out = append(out, ref{fmt.Sprintf("replacements[%d].path", i), p.Path})
		}
	}
	gens := func(field string, i int, s types.KvPairSources) {
		for j, f := range s.FileSources {
			if _, p, ok := strings.Cut(f, "="); ok {
				f = p
			}
			out = append(out, ref{fmt.Sprintf("%s[%d].files[%d]", field, i, j), f})
		}
		for j, e := range s.EnvSources {
			out = append(out, ref{fmt.Sprintf("%s[%d].envs[%d]", field, i, j), e})
		}
		if s.EnvSource != "" {
			out = append(out, ref{fmt.Sprintf("%s[%d].env", field, i), s.EnvSource})
		}
	}
	for i, g := range k.ConfigMapGenerator {
		gens("configMapGenerator", i, g.KvPairSources)
	}
	for i, g := range k.SecretGenerator {
		gens("secretGenerator", i, g.KvPairSources)
	}
	return out, nil
}

// isExample reports whether a file name marks a committed example: it
// contains ".example." (tls-secret.example.yaml).
func isExample(name string) bool { return strings.Contains(path.Base(name), ".example.") }

// local reports whether a reference is a local path (inline patches and
// URLs are not).
func local(v string) bool {
	return v != "" && !strings.Contains(v, "\n") && !strings.Contains(v, "://") &&
		!strings.HasPrefix(v, "git@") && !strings.HasPrefix(v, "git::") && !strings.HasPrefix(v, "gh:") && !strings.HasPrefix(v, "ssh:")
}

func checkExamples(s *subject) []Finding {
	var out []Finding
	covered := func(string) bool { return false }
	if s.repo != nil {
		covered = func(src string) bool {
			abs := filepath.Join(s.repo.dir, filepath.FromSlash(src))
			return within(filepath.ToSlash(abs), filepath.ToSlash(s.repo.root))
		}
		for _, k := range s.repo.kusts {
			for _, r := range k.refs {
				if local(r.value) && isExample(r.value) {
					out = append(out, manifestaudit.InFile(k.file, r.field, "no committed example in any kustomization", manifestaudit.Quote(r.value)))
				}
			}
		}
	}
	for _, src := range s.rel.Sources {
		if isExample(src.Path) && !covered(src.Path) {
			out = append(out, manifestaudit.InFile(src.Path, "", "no committed example read by the render", "read by the render"))
		}
	}
	return out
}

func checkReferenced(s *subject) []Finding {
	var out []Finding
	r := s.repo
	for _, k := range r.kusts {
		if slices.Contains(r.opDirs, k.dir) {
			continue
		}
		for _, rf := range k.refs {
			if !local(rf.value) || !strings.HasPrefix(rf.field, "resources[") && !strings.HasPrefix(rf.field, "bases[") && !strings.HasPrefix(rf.field, "components[") {
				continue
			}
			target := filepath.ToSlash(filepath.Clean(filepath.Join(k.dir, filepath.FromSlash(rf.value))))
			for _, d := range r.opDirs {
				if within(target, filepath.ToSlash(d)) {
					out = append(out, manifestaudit.InFile(k.file, rf.field, "no reference to the opt-in operation", manifestaudit.Quote(rf.value)))
					break
				}
			}
		}
	}
	return out
}
