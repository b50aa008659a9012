package operation

// The Secret file projections: the TLS, identity and database CA Secrets, each
// in a read-only volume of its own.

import (
	"fmt"
	"path"
	"strings"

	"github.com/qinglong/kubectl-ql3/internal/manifestaudit"
)

// mountSecrets are the three file projections that must stay apart.
var mountSecrets = []string{TLSSecret, IdentitySecret, DatabaseCASecret}

// mountRule checks that Secret name is projected by exactly one secret
// volume of its own with the given file mode, mounted read-only, in a mount
// that is not inside another of the three projections.
func mountRule(name string, mode int32) func(*subject) []Finding {
	return func(s *subject) []Finding {
		p := s.pod()
		if p == nil {
			return nil
		}
		var out []Finding
		wantMode := fmt.Sprintf("%#o", mode)
		for i, v := range p.Volumes {
			if v.Projected == nil {
				continue
			}
			for j, src := range v.Projected.Sources {
				if src.Secret != nil && src.Secret.Name == name {
					out = append(out, manifestaudit.At(s.depU, fmt.Sprintf("%s.volumes[%d].projected.sources[%d].secret", podPath, i, j), fmt.Sprintf("Secret %q in a secret volume of its own", name), "a projected volume"))
				}
			}
		}
		vols := s.secretVolumes(name)
		switch {
		case len(vols) == 0:
			return append(out, manifestaudit.At(s.depU, podPath+".volumes", fmt.Sprintf("a secret volume of Secret %q, mode %s", name, wantMode), "none"))
		case len(vols) > 1:
			out = append(out, manifestaudit.At(s.depU, vols[1].volPath, fmt.Sprintf("one volume of Secret %q", name), fmt.Sprintf("%d volumes", len(vols))))
		}
		sv := vols[0]
		sec := sv.vol.Secret
		if sec.DefaultMode == nil || *sec.DefaultMode != mode {
			f := "<unset> (0644)"
			if sec.DefaultMode != nil {
				f = fmt.Sprintf("%#o", *sec.DefaultMode)
			}
			out = append(out, manifestaudit.At(s.depU, sv.volPath+".secret.defaultMode", wantMode, f))
		}
		for k, it := range sec.Items {
			if it.Mode != nil && *it.Mode != mode {
				out = append(out, manifestaudit.At(s.depU, fmt.Sprintf("%s.secret.items[%d].mode", sv.volPath, k), wantMode, fmt.Sprintf("%#o", *it.Mode)))
			}
		}
		if sec.Optional != nil && *sec.Optional {
			out = append(out, manifestaudit.At(s.depU, sv.volPath+".secret.optional", "false (fail closed)", "true"))
		}
		if len(sv.mounts) == 0 {
			return append(out, manifestaudit.At(s.depU, podPath+".containers", fmt.Sprintf("a read-only mount of volume %q", sv.vol.Name), "none"))
		}
		others := map[string]string{}
		for _, o := range mountSecrets {
			if o == name {
				continue
			}
			for _, ov := range s.secretVolumes(o) {
				for _, m := range ov.mounts {
					others[m.m.MountPath] = o
				}
			}
		}
		for _, m := range sv.mounts {
			if !m.m.ReadOnly {
				out = append(out, manifestaudit.At(s.depU, m.path+".readOnly", "true", "false"))
			}
			for op, o := range others {
				if within(m.m.MountPath, op) {
					out = append(out, manifestaudit.At(s.depU, m.path+".mountPath", fmt.Sprintf("a mount apart from Secret %q's %q", o, op), m.m.MountPath))
				}
			}
		}
		return out
	}
}

// within reports whether path p is dir or inside it.
func within(p, dir string) bool {
	p, dir = path.Clean(p), path.Clean(dir)
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// mountPaths are the management container's mount paths of Secret name.
func (s *subject) mountPaths(name string) []string {
	_, cp := s.container()
	var out []string
	for _, sv := range s.secretVolumes(name) {
		for _, m := range sv.mounts {
			if strings.HasPrefix(m.path, cp+".") {
				out = append(out, m.m.MountPath)
			}
		}
	}
	return out
}
