package fleet

import (
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/fleetfile"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/plan"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/safefile"
)

// MaxJobConfigMapBytes bounds what a wave's ConfigMap carries (keys and
// values): Kubernetes stores at most 1 MiB in one object, metadata
// included, so the files get a little less.
const MaxJobConfigMapBytes = 1000 * 1000

// jobFile is one file the wave's pods read: its path under the volume
// (fleet/… or plan/…) and its bytes.
type jobFile struct {
	path string
	data []byte
}

// jobFiles is what a pod of wave w needs, and nothing more: the fleet
// file (fleet/<its name>), the release directory of every target of the
// wave (fleet/<release>/…, as the fleet file names it, so the fleet's
// paths hold), the plan record (plan/plan.json) and the wave's preflight
// records (plan/<preflight>, as the plan names them). A release holding
// anything but directories and regular files (a symbolic link, a pipe) is
// refused: a ConfigMap carries files only.
func jobFiles(f *fleetfile.Fleet, fleetPath string, p *plan.Plan, planDir string, w plan.Wave) ([]jobFile, error) {
	abs, err := filepath.Abs(fleetPath)
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "fleet file %s: %w", fleetPath, err)
	}
	data, err := safefile.Read(abs, fleetfile.MaxFileBytes, safefile.NotShared)
	if err != nil {
		return nil, fail.Errorf(fail.ClassOf(err), "fleet file: %w", err)
	}
	files := []jobFile{{path: "fleet/" + filepath.Base(abs), data: data}}
	seen := map[string]bool{}
	for _, pt := range w.Targets {
		ft, _ := f.Target(pt.Name)
		if seen[ft.Release] {
			continue
		}
		seen[ft.Release] = true
		rfiles, err := releaseFiles(f.Path(ft.Release), "fleet/"+ft.Release)
		if err != nil {
			return nil, fmt.Errorf("target %s: %w", pt.Name, err)
		}
		files = append(files, rfiles...)
	}
	pb, err := p.Bytes()
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "fleet plan: %w", err)
	}
	files = append(files, jobFile{path: "plan/" + PlanFile, data: pb})
	for _, pt := range w.Targets {
		rec := filepath.Join(planDir, filepath.FromSlash(pt.Preflight))
		data, err := safefile.ReadRegular(rec, deploy.MaxPreflightBytes)
		if err != nil {
			return nil, fail.Errorf(fail.Invalid, "target %s: preflight record: %w", pt.Name, err)
		}
		files = append(files, jobFile{path: "plan/" + pt.Preflight, data: data})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	return files, nil
}

// releaseFiles are the regular files under dir, each named under prefix
// by its path relative to dir.
func releaseFiles(dir, prefix string) ([]jobFile, error) {
	var out []jobFile
	err := filepath.WalkDir(dir, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fail.Errorf(fail.Invalid, "release file %s is not a regular file (%s): the Job's ConfigMap carries regular files only", name, d.Type())
		}
		rel, err := filepath.Rel(dir, name)
		if err != nil {
			return err
		}
		data, err := safefile.ReadRegular(name, MaxJobConfigMapBytes)
		if err != nil {
			return err
		}
		out = append(out, jobFile{path: path.Join(prefix, filepath.ToSlash(rel)), data: data})
		return nil
	})
	if err != nil {
		return nil, fail.Errorf(fail.ClassOf(err), "release %s: %w", dir, err)
	}
	return out, nil
}

// jobConfigMap is the ConfigMap holding files, one key per file (NNN-name:
// the keys are flat), and the volume items that lay them out again as
// their paths.
func jobConfigMap(name, ns string, labels map[string]string, files []jobFile) (*corev1.ConfigMap, []corev1.KeyToPath, error) {
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}}
	var items []corev1.KeyToPath
	size := 0
	for i, jf := range files {
		key := fmt.Sprintf("%03d-%s", i, keySafe(path.Base(jf.path)))
		size += len(key) + len(jf.data)
		if utf8.Valid(jf.data) {
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[key] = string(jf.data)
		} else {
			if cm.BinaryData == nil {
				cm.BinaryData = map[string][]byte{}
			}
			cm.BinaryData[key] = jf.data
		}
		items = append(items, corev1.KeyToPath{Key: key, Path: jf.path})
	}
	if size > MaxJobConfigMapBytes {
		return nil, nil, fail.Errorf(fail.Invalid, "the wave's ConfigMap would hold %d bytes of files, more than the %d one ConfigMap can (Kubernetes stores at most 1 MiB in one object): split the wave, or make its releases smaller", size, MaxJobConfigMapBytes)
	}
	return cm, items, nil
}

// keySafe is name with every character a ConfigMap key may not hold
// replaced by '-'.
func keySafe(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, name)
}
