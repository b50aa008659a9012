package fleetfile

import "fmt"

// The fields of each mapping, in the doc's order.
var (
	fleetFields    = []string{"schema", "targets", "waves"}
	targetFields   = []string{"name", "labels", "kubeconfig", "context", "namespace", "release"}
	waveFields     = []string{"name", "selector", "maxParallel", "maxFailures", "soak", "gate"}
	selectorFields = []string{"names", "matchLabels"}
)

// decodeFleet reads the document's members and checks each field's own
// rule (docs/fleet.md §2), adding a problem for each broken one.
func decodeFleet(c *checker, v any) *Fleet {
	m, ok := c.mapping("", v, fleetFields, fleetFields)
	if !ok {
		return nil
	}
	if s, ok := m["schema"]; ok {
		if s, ok := c.str("schema", s); ok && s != Schema {
			c.addf("schema", "%s, want %q", quote(s), Schema)
		}
	}
	f := &Fleet{}
	for _, it := range items(c, m, "targets", "target") {
		f.Targets = append(f.Targets, decodeTarget(c, it.path, it.v))
	}
	for _, it := range items(c, m, "waves", "wave") {
		f.Waves = append(f.Waves, decodeWave(c, it.path, it.v))
	}
	return f
}

type item struct {
	path string
	v    any
}

// items are the entries of the list member name: at least one, at most
// MaxTargets.
func items(c *checker, m map[string]any, name, what string) []item {
	v, ok := m[name]
	if !ok {
		return nil
	}
	l, ok := c.list(name, v)
	switch {
	case !ok:
		return nil
	case len(l) == 0:
		c.addf(name, "is empty; a fleet has at least one %s", what)
	case len(l) > MaxTargets:
		c.addf(name, "has %d entries, at most %d are allowed", len(l), MaxTargets)
		return nil
	}
	out := make([]item, len(l))
	for i, e := range l {
		out[i] = item{fmt.Sprintf("%s[%d]", name, i), e}
	}
	return out
}

// str reads the string member name of m at path, checked by rule; absent
// is "".
func str(c *checker, m map[string]any, path, name string, rule func(string) string) string {
	v, ok := m[name]
	if !ok {
		return ""
	}
	p := join(path, name)
	s, ok := c.str(p, v)
	if !ok {
		return ""
	}
	if err := rule(s); err != "" {
		c.add(p, err)
	}
	return s
}

// fleetPath is the rule of a target's kubeconfig and release paths.
func fleetPath(v string) string { return checkPath(v, "the fleet file's directory") }

func decodeTarget(c *checker, path string, v any) Target {
	m, ok := c.mapping(path, v, targetFields, []string{"name", "namespace", "release"})
	if !ok {
		return Target{}
	}
	t := Target{
		Name:       str(c, m, path, "name", checkName),
		Kubeconfig: str(c, m, path, "kubeconfig", fleetPath),
		Context:    str(c, m, path, "context", checkContext),
		Namespace:  str(c, m, path, "namespace", checkName),
		Release:    str(c, m, path, "release", fleetPath),
		Labels:     map[string]string{},
	}
	if l, ok := m["labels"]; ok {
		if l, ok := c.labels(join(path, "labels"), l, false); ok {
			t.Labels = l
		}
	}
	return t
}

func decodeWave(c *checker, path string, v any) Wave {
	m, ok := c.mapping(path, v, waveFields, []string{"name", "selector"})
	if !ok {
		return Wave{}
	}
	w := Wave{Name: str(c, m, path, "name", checkName), MaxParallel: 1, Gate: GateAuto}
	if s, ok := m["selector"]; ok {
		w.Selector = decodeSelector(c, join(path, "selector"), s)
	}
	if n, ok := m["maxParallel"]; ok {
		w.MaxParallel, _ = c.integer(join(path, "maxParallel"), n, 1, MaxTargets)
	}
	if n, ok := m["maxFailures"]; ok {
		w.MaxFailures, _ = c.integer(join(path, "maxFailures"), n, 0, MaxTargets)
	}
	soak := str(c, m, path, "soak", func(s string) string { _, err := parseSoak(s); return err })
	w.Soak, _ = parseSoak(soak)
	if _, ok := m["gate"]; ok {
		w.Gate = str(c, m, path, "gate", func(s string) string {
			if s != GateAuto && s != GateApproval {
				return fmt.Sprintf("%s, want %q or %q", quote(s), GateAuto, GateApproval)
			}
			return ""
		})
	}
	return w
}

// decodeSelector reads a selector: exactly one of names (a non-empty list
// of distinct names) and matchLabels (a non-empty label map).
func decodeSelector(c *checker, path string, v any) Selector {
	m, ok := c.mapping(path, v, selectorFields, nil)
	if !ok {
		return Selector{}
	}
	_, hasNames := m["names"]
	_, hasLabels := m["matchLabels"]
	if hasNames == hasLabels {
		c.add(path, "want exactly one of names and matchLabels")
		return Selector{}
	}
	var s Selector
	if hasLabels {
		s.MatchLabels, _ = c.labels(join(path, "matchLabels"), m["matchLabels"], true)
		return s
	}
	p := join(path, "names")
	l, ok := c.list(p, m["names"])
	if ok && len(l) == 0 {
		c.add(p, "is empty; name at least one target")
	}
	seen := map[string]int{}
	for i, e := range l {
		ep := fmt.Sprintf("%s[%d]", p, i)
		name, ok := c.str(ep, e)
		if !ok {
			continue
		}
		if j, dup := seen[name]; dup {
			c.addf(ep, "%s is also names[%d]", quote(name), j)
			continue
		}
		seen[name] = i
		s.Names = append(s.Names, name)
	}
	return s
}
