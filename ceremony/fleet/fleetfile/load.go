package fleetfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/safefile"
)

// Load reads the fleet file at path and resolves it: a hardened read
// (internal/safefile: a regular file, not a symbolic link, not group or
// world writable, at most MaxFileBytes, unchanged while read), Parse with
// the file's directory, then CheckPaths. Errors name the file as path was
// given, then the field; they are fail.Invalid (fail.Unavailable when the
// file changed while it was read: read it again).
func Load(path string) (*Fleet, error) {
	return load(path, (*Fleet).CheckPaths)
}

// LoadTarget is Load for a run that moves only the target named name (a
// pod of a fleet's Job, a job of a CI matrix): it checks on disk only that
// target's paths (docs/fleet.md §2.4) — its release, and its kubeconfig
// unless kubeconfigElsewhere (the run takes it from elsewhere: a Job's
// Secret) — since the other targets' files need not be there. A name that
// is no target of the fleet is fail.Invalid.
func LoadTarget(path, name string, kubeconfigElsewhere bool) (*Fleet, error) {
	return load(path, func(f *Fleet) error {
		if _, ok := f.Target(name); !ok {
			return fail.Errorf(fail.Invalid, "%q is no target of the fleet", name)
		}
		return f.checkPaths(func(t Target) (bool, bool) { return t.Name == name && !kubeconfigElsewhere, t.Name == name })
	})
}

func load(path string, check func(*Fleet) error) (*Fleet, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "fleet file %s: %w", path, err)
	}
	data, err := safefile.Read(abs, MaxFileBytes, safefile.NotShared)
	if err != nil {
		return nil, fail.Errorf(fail.ClassOf(err), "fleet file: %w", err)
	}
	f, err := Parse(filepath.Dir(abs), data)
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "%s: %w", path, err)
	}
	if err := check(f); err != nil {
		return nil, fail.Errorf(fail.Invalid, "%s: %w", path, err)
	}
	return f, nil
}

// CheckPaths checks the paths of every target on disk (docs/fleet.md
// §2.4): with every symbolic link resolved, each lies inside Dir (with its
// own links resolved); a kubeconfig is a regular file and a release a
// directory. Errors are fail.Invalid and name the field.
func (f *Fleet) CheckPaths() error {
	return f.checkPaths(func(Target) (bool, bool) { return true, true })
}

// checkPaths checks, of each target, its kubeconfig and its release as
// which says.
func (f *Fleet) checkPaths(which func(Target) (kubeconfig, release bool)) error {
	root, err := filepath.EvalSymlinks(f.Dir)
	if err != nil {
		return fail.Errorf(fail.Invalid, "fleet directory %s: %w", f.Dir, err)
	}
	c := &checker{}
	for i, t := range f.Targets {
		p := fmt.Sprintf("targets[%d]", i)
		kubeconfig, release := which(t)
		if kubeconfig && t.Kubeconfig != "" {
			c.checkInside(root, p+".kubeconfig", f.Path(t.Kubeconfig), false)
		}
		if release {
			c.checkInside(root, p+".release", f.Path(t.Release), true)
		}
	}
	return c.err()
}

// checkInside adds a problem unless name, its links resolved, lies inside
// root and is a directory (dir) or a regular file.
func (c *checker) checkInside(root, field, name string, dir bool) {
	want := "a regular file"
	if dir {
		want = "a directory"
	}
	real, err := filepath.EvalSymlinks(name)
	if errors.Is(err, fs.ErrNotExist) {
		c.addf(field, "%s does not exist; want %s", name, want)
		return
	} else if err != nil {
		c.addf(field, "%v", err)
		return
	}
	inside := root
	if !strings.HasSuffix(inside, string(filepath.Separator)) {
		inside += string(filepath.Separator)
	}
	if !strings.HasPrefix(real, inside) {
		c.addf(field, "%s leads, through a symbolic link, to %s, which is not inside the fleet file's directory %s", name, real, root)
		return
	}
	st, err := os.Stat(real)
	switch {
	case err != nil:
		c.addf(field, "%v", err)
	case dir && !st.IsDir(), !dir && !st.Mode().IsRegular():
		c.addf(field, "%s is not %s", name, want)
	}
}
