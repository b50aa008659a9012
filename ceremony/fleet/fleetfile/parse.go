package fleetfile

import (
	"fmt"
	"path/filepath"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// Parse reads a fleet file's bytes (docs/fleet.md): the YAML rules (§1),
// every field's rule (§2), then the fleet's rules (§2.3) — names unique,
// one Head per target, every selector selecting, every target in exactly
// one wave — and resolves it. dir is the absolute directory the file's
// paths are relative to (Parse does not look at it: Load does). Every
// error is fail.Invalid and names the field path of each broken rule
// ("waves[1].selector.names[0]: …"); the rules of one stage are reported
// together.
func Parse(dir string, data []byte) (*Fleet, error) {
	if !filepath.IsAbs(dir) {
		return nil, fail.Errorf(fail.Invalid, "fleet directory %s: want an absolute path", quote(dir))
	}
	c := &checker{}
	v, ok := readYAML(c, data)
	if !ok {
		return nil, c.err()
	}
	f := decodeFleet(c, v)
	if err := c.err(); err != nil {
		return nil, err
	}
	resolve(c, f)
	if err := c.err(); err != nil {
		return nil, err
	}
	f.Dir = filepath.Clean(dir)
	return f, nil
}

// resolve checks the rules across fields and fills each wave's Targets.
func resolve(c *checker, f *Fleet) {
	names := map[string]int{}
	heads := map[[3]string]int{}
	for i, t := range f.Targets {
		p := fmt.Sprintf("targets[%d]", i)
		if j, dup := names[t.Name]; dup {
			c.addf(p+".name", "%s is also the name of targets[%d]", quote(t.Name), j)
		}
		names[t.Name] = i
		key := [3]string{t.Kubeconfig, t.Context, t.Namespace}
		if j, dup := heads[key]; dup {
			c.addf(p, "its kubeconfig %s, context %s and namespace %s are those of targets[%d] (%s): they are one Head, so one target",
				quote(t.Kubeconfig), quote(t.Context), quote(t.Namespace), j, quote(f.Targets[j].Name))
		}
		heads[key] = i
	}
	waves := map[string]int{}
	for i, w := range f.Waves {
		if j, dup := waves[w.Name]; dup {
			c.addf(fmt.Sprintf("waves[%d].name", i), "%s is also the name of waves[%d]", quote(w.Name), j)
		}
		waves[w.Name] = i
	}
	if len(c.problems) > 0 {
		return
	}
	owner := map[string]int{}
	for i := range f.Waves {
		selectWave(c, f, i, names, owner)
	}
	for i, t := range f.Targets {
		if _, ok := owner[t.Name]; !ok {
			c.addf(fmt.Sprintf("targets[%d]", i), "%s is in no wave; select it in exactly one wave", quote(t.Name))
		}
	}
}

// selectWave resolves wave i's selector into its Targets, in the fleet's
// target order, and records each target's wave in owner.
func selectWave(c *checker, f *Fleet, i int, names map[string]int, owner map[string]int) {
	w := &f.Waves[i]
	p := fmt.Sprintf("waves[%d].selector", i)
	picked := make([]bool, len(f.Targets))
	if w.Selector.MatchLabels == nil {
		for j, name := range w.Selector.Names {
			k, ok := names[name]
			if !ok {
				c.addf(fmt.Sprintf("%s.names[%d]", p, j), "%s is no target", quote(name))
				continue
			}
			picked[k] = true
		}
	} else {
		any := false
		for k, t := range f.Targets {
			picked[k] = matches(t.Labels, w.Selector.MatchLabels)
			any = any || picked[k]
		}
		if !any {
			c.add(p+".matchLabels", "selects no target")
		}
	}
	w.Targets = []string{}
	for k, t := range f.Targets {
		if !picked[k] {
			continue
		}
		if j, taken := owner[t.Name]; taken {
			c.addf(p, "selects %s, which waves[%d] (%s) selects too; a target is in exactly one wave", quote(t.Name), j, quote(f.Waves[j].Name))
			continue
		}
		owner[t.Name] = i
		w.Targets = append(w.Targets, t.Name)
	}
}

// matches reports whether labels hold every pair of want.
func matches(labels, want map[string]string) bool {
	for k, v := range want {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
