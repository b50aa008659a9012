package vectors

import (
	"encoding/json"
	"regexp"
	"strconv"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/ceremony/fleet/fleetfile"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/plan"
)

// TestFleetVectors runs testdata/vectors/fleet against ceremony/fleet
// (docs/fleet.md): fleet files (fleetfile.Parse), plan records
// (plan.Parse) and a plan matched against a fleet file (Plan.Matches).
func TestFleetVectors(t *testing.T) {
	each(t, "fleet", map[string]procedure{
		"fleet": func(t *testing.T, v vector, input []byte) {
			f, err := fleetfile.Parse("/srv/fleet", input)
			verdict(t, v, err)
			if err == nil {
				got, _ := f.Digest()
				digests(t, v, map[string]string{"fleetDigest": fleetDigest(t, input)}, map[string]string{"fleetDigest": got})
			}
		},
		"fleet-plan": func(t *testing.T, v vector, input []byte) {
			p, err := plan.Parse(v.Input, input)
			verdict(t, v, err)
			if err != nil {
				return
			}
			got := map[string]string{"planDigest": p.SelfDigest}
			for _, w := range p.Waves {
				got["waveDigest "+w.Name], _ = w.Digest()
			}
			digests(t, v, planDigests(t, input), got)
		},
		"plan-matches": func(t *testing.T, v vector, input []byte) {
			p, err := plan.Parse(v.Input, input)
			if err != nil {
				t.Fatal(err)
			}
			fleet := file(t, "fleet", v.Fleet)
			f, err := fleetfile.Parse("/srv/fleet", fleet)
			if err != nil {
				t.Fatal(err)
			}
			err = p.Matches(f)
			verdict(t, v, err)
			want := fleetDigest(t, fleet)
			if (want == p.FleetDigest) != (err == nil) {
				t.Fatalf("the recomputed fleet digest %s and the plan's %s, yet Matches said %v", want, p.FleetDigest, err)
			}
			if err == nil {
				got, _ := f.Digest()
				digests(t, v, map[string]string{"fleetDigest": want}, map[string]string{"fleetDigest": got})
			}
		},
	})
}

var soakRE = regexp.MustCompile(`^(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?$`)

// fleetDigest resolves an accepted fleet file a second way, from
// docs/fleet.md §3 (defaults, selectors in the targets' order, soak in
// seconds), and digests it: digest("fleet", canonical(resolved fleet)).
func fleetDigest(t *testing.T, data []byte) string {
	t.Helper()
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Targets []struct {
			Name, Kubeconfig, Context, Namespace, Release string
			Labels                                        map[string]string
		}
		Waves []struct {
			Name, Soak, Gate         string
			MaxParallel, MaxFailures *int
			Selector                 struct {
				Names       []string
				MatchLabels map[string]string
			}
		}
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	resolved := map[string]any{"schema": "kubectl-ql3/fleet@v1"}
	var targets, waves []any
	for _, tg := range doc.Targets {
		labels := map[string]string{}
		for k, v := range tg.Labels {
			labels[k] = v
		}
		targets = append(targets, map[string]any{"name": tg.Name, "labels": labels, "kubeconfig": tg.Kubeconfig,
			"context": tg.Context, "namespace": tg.Namespace, "release": tg.Release})
	}
	for _, w := range doc.Waves {
		named := map[string]bool{}
		for _, n := range w.Selector.Names {
			named[n] = true
		}
		selected := []string{}
		for _, tg := range doc.Targets {
			match := w.Selector.MatchLabels != nil
			for k, v := range w.Selector.MatchLabels {
				match = match && tg.Labels[k] == v
			}
			if named[tg.Name] || match {
				selected = append(selected, tg.Name)
			}
		}
		seconds := 0
		if m := soakRE.FindStringSubmatch(w.Soak); m != nil {
			for i, unit := range []int{3600, 60, 1} {
				n, _ := strconv.Atoi(m[i+1])
				seconds += n * unit
			}
		}
		gate, maxParallel, maxFailures := "auto", 1, 0
		if w.Gate != "" {
			gate = w.Gate
		}
		if w.MaxParallel != nil {
			maxParallel = *w.MaxParallel
		}
		if w.MaxFailures != nil {
			maxFailures = *w.MaxFailures
		}
		waves = append(waves, map[string]any{"name": w.Name, "maxParallel": maxParallel, "maxFailures": maxFailures,
			"soakSeconds": seconds, "gate": gate, "targets": selected})
	}
	resolved["targets"], resolved["waves"] = targets, waves
	raw, err := json.Marshal(resolved)
	if err != nil {
		t.Fatal(err)
	}
	return domainDigest("fleet", "v1", canonical(t, raw))
}

// planDigests recomputes, from a plan record's bytes alone, its plan
// digest and each wave's digest (docs/fleet.md §4.3, §4.4).
func planDigests(t *testing.T, data []byte) map[string]string {
	t.Helper()
	doc := jsonValue(t, data).(map[string]any)
	out := map[string]string{}
	for _, w := range doc["waves"].([]any) {
		raw, _ := json.Marshal(w)
		out["waveDigest "+w.(map[string]any)["name"].(string)] = domainDigest("fleet-wave", "v1", canonical(t, raw))
	}
	delete(doc, "selfDigest")
	raw, _ := json.Marshal(doc)
	out["planDigest"] = domainDigest("fleet-plan", "v1", canonical(t, raw))
	return out
}
