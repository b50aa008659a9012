package plan_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/qinglong/kubectl-ql3/ceremony/fleet/fleetfile"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/plan"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// examples are the worked examples of docs/fleet.md §5.
var examples = []string{"fleet-file", "fleet-canonical", "fleet-digest", "plan", "plan-size", "plan-digest", "wave-digest-dev", "wave-digest-prod"}

// TestDocFleetExample recomputes docs/fleet.md §5: the fleet file resolves
// to the canonical text shown and its digest; the plan is built from the
// target values the doc states — dev-a's are those of the preflight
// record testdata/vectors/preflight/upgrade.json, pinned to the worked
// Head of docs/head.md §9, the others D("example", "<target>.<member>") —
// and every digest is recomputed a second way, from the doc's own text by
// the formulas, not through the packages.
func TestDocFleetExample(t *testing.T) {
	ex := testkit.DocExamples(t, "fleet.md", examples...)
	f, err := fleetfile.Parse("/srv/fleet", []byte(ex["fleet-file"]+"\n"))
	if err != nil {
		t.Fatalf("docs/fleet.md §5 fleet file: %v", err)
	}
	resolved, err := f.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	fd, _ := f.Digest()
	p, err := plan.Build(f, plan.Tool{Name: "kubectl-ql3", Version: "v0.1.0", FieldManager: "kubectl-ql3"}, docTargets(t))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := p.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	var indented bytes.Buffer
	_ = json.Indent(&indented, raw, "", "  ")
	wd, _ := p.Waves[0].Digest()
	wp, _ := p.Waves[1].Digest()
	want := map[string]string{
		"fleet-file": ex["fleet-file"], "fleet-canonical": string(resolved), "fleet-digest": fd,
		"plan": string(bytes.TrimSpace(indented.Bytes())), "plan-size": strconv.Itoa(len(raw) - 1), "plan-digest": p.SelfDigest,
		"wave-digest-dev": wd, "wave-digest-prod": wp,
	}
	for _, name := range examples {
		if ex[name] != want[name] {
			t.Errorf("docs/fleet.md example %q is\n%s\nit should be:\n%s", name, ex[name], want[name])
		}
	}
	if _, err := plan.Parse("doc", raw); err != nil {
		t.Fatalf("the example plan does not parse: %v", err)
	}

	// The second way: from the doc's text, by the formulas of §3 and §4.
	if got := domainDigest("fleet", jcsOf(t, []byte(ex["fleet-canonical"]))); got != ex["fleet-digest"] {
		t.Errorf("fleet digest from the text: %s, doc says %s", got, ex["fleet-digest"])
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(ex["plan"]), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["fleetDigest"] != ex["fleet-digest"] {
		t.Errorf("the plan's fleetDigest is not the fleet's")
	}
	for i, name := range []string{"wave-digest-dev", "wave-digest-prod"} {
		w, _ := json.Marshal(doc["waves"].([]any)[i])
		if got := domainDigest("fleet-wave", jcsOf(t, w)); got != ex[name] {
			t.Errorf("%s from the text: %s, doc says %s", name, got, ex[name])
		}
	}
	delete(doc, "selfDigest")
	unsealed, _ := json.Marshal(doc)
	if got := domainDigest("fleet-plan", jcsOf(t, unsealed)); got != ex["plan-digest"] {
		t.Errorf("plan digest from the text: %s, doc says %s", got, ex["plan-digest"])
	}
}

// docTargets are the plan entries of §5: dev-a from the preflight vector
// and the Head token of docs/head.md §9, prod-eu and prod-us installs with
// example values.
func docTargets(t *testing.T) []plan.Target {
	t.Helper()
	root, err := testkit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "testdata/vectors/preflight/upgrade.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Command struct {
			Transition, Version, LockDigest, InventoryDigest, ClusterIdentity, Namespace string
			ExpectedHead                                                                 struct {
				Generation                                int64
				DeploymentDigest, LockDigest, StateDigest string
			}
		}
		CommandDigest, SelfDigest string
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	c := rec.Command
	token := testkit.DocExamples(t, "head.md", "head-token")["head-token"]
	h, x := c.ExpectedHead, func(d string) string { return strings.TrimPrefix(d, "sha256:") }
	if want := fmt.Sprintf("ql3h1-%d-%s-%s-%s", h.Generation, x(h.DeploymentDigest), x(h.LockDigest), x(h.StateDigest)); token != want {
		t.Fatalf("upgrade.json is pinned to %s, not to the Head of docs/head.md §9 (%s)", want, token)
	}
	out := []plan.Target{{Name: "dev-a", ClusterIdentity: c.ClusterIdentity, Namespace: c.Namespace, Preflight: "preflights/dev-a.json",
		PreflightDigest: rec.SelfDigest, CommandDigest: rec.CommandDigest, Transition: c.Transition, Version: c.Version,
		LockDigest: c.LockDigest, InventoryDigest: c.InventoryDigest, ExpectedHead: token, Generation: c.ExpectedHead.Generation + 1}}
	for _, name := range []string{"prod-eu", "prod-us"} {
		e := func(member string) string { return canon.DigestBytes("example", []byte(name+"."+member)) }
		out = append(out, plan.Target{Name: name, ClusterIdentity: e("clusterIdentity"), Namespace: c.Namespace, Preflight: "preflights/" + name + ".json",
			PreflightDigest: e("preflightDigest"), CommandDigest: e("commandDigest"), Transition: plan.TransitionInstall, Version: c.Version,
			LockDigest: e("lockDigest"), InventoryDigest: c.InventoryDigest, ExpectedHead: plan.AbsentToken, Generation: 1})
	}
	return out
}

func jcsOf(t *testing.T, data []byte) []byte {
	t.Helper()
	c, err := jcs.Transform(data)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// domainDigest is docs/digests.md's primitive, written out again.
func domainDigest(domain string, data []byte) string {
	sum := sha256.Sum256(append([]byte("kubectl-ql3/"+domain+"/v1\x00"), data...))
	return "sha256:" + hex.EncodeToString(sum[:])
}
