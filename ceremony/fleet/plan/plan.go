// Package plan is the fleet plan record qinglong/fleet-plan@v1
// (docs/fleet.md §4): what `fleet preflight` decided for every target of a
// resolved fleet, wave by wave, binding each target's preflight record by
// its digest, and the fleet by the fleet digest.
//
// It is a pure format leaf: no cluster client, no CAS kernel, no ceremony.
// It takes the resolved fleet from its sibling leaf fleetfile; it never
// reads a preflight record itself (ceremony/deploy does): the driver
// copies each record's values into a Target.
package plan

import (
	"fmt"
	"time"

	"github.com/qinglong/kubectl-ql3/ceremony/fleet/fleetfile"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// Schema is the plan record's schema member, exactly.
const Schema = "qinglong/fleet-plan@v1"

// Digest domains (docs/digests.md).
const (
	// DomainPlan is the domain of the plan digest, the record's selfDigest.
	DomainPlan = "fleet-plan"
	// DomainWave is the domain of a wave digest, what a gate's approval
	// binds.
	DomainWave = "fleet-wave"
)

// Limits and fixed values.
const (
	// MaxPlanBytes bounds a plan record file.
	MaxPlanBytes = 4 << 20
	// MaxGeneration is the largest generation (exact in an RFC 8785 number).
	MaxGeneration = 1<<53 - 1
	// MaxVersionBytes bounds a release version and the tool's version.
	MaxVersionBytes = 128
	// AbsentToken is the expected-Head token of a target with no Head.
	AbsentToken = "ql3h1-0-none"
	// ToolName is the tool's name, exactly.
	ToolName = "kubectl-ql3"
)

// The transitions a target's preflight record may name.
const (
	TransitionInstall  = "install"
	TransitionUpgrade  = "upgrade"
	TransitionRollback = "rollback"
	TransitionRetire   = "retire"
)

// Plan is the fleet plan record. Its canonical JSON without selfDigest,
// under the "fleet-plan" domain, is the plan digest (= SelfDigest).
type Plan struct {
	Schema      string `json:"schema"`
	FleetDigest string `json:"fleetDigest"`
	Tool        Tool   `json:"tool"`
	Waves       []Wave `json:"waves"`
	SelfDigest  string `json:"selfDigest"`
}

// Tool is the tool that wrote the plan, as a preflight record names it.
type Tool struct {
	Name         string `json:"name"`
	Version      string `json:"version"`
	FieldManager string `json:"fieldManager"`
}

// Wave is one wave of the fleet, its values copied from the resolved
// fleet, and its targets in the fleet's target order.
type Wave struct {
	Name        string   `json:"name"`
	MaxParallel int      `json:"maxParallel"`
	MaxFailures int      `json:"maxFailures"`
	SoakSeconds int64    `json:"soakSeconds"`
	Gate        string   `json:"gate"`
	Targets     []Target `json:"targets"`
}

// Target is what the preflight of one target decided, copied from its
// preflight record (docs/head.md §4).
type Target struct {
	// Name is the fleet's name of the target.
	Name string `json:"name"`
	// ClusterIdentity and Namespace are the record's target: the cluster
	// preflight found behind the kubeconfig and context, and the control
	// namespace.
	ClusterIdentity string `json:"clusterIdentity"`
	Namespace       string `json:"namespace"`
	// Preflight is the record's path, relative to the plan's directory.
	Preflight string `json:"preflight"`
	// PreflightDigest and CommandDigest are the record's selfDigest and
	// commandDigest.
	PreflightDigest string `json:"preflightDigest"`
	CommandDigest   string `json:"commandDigest"`
	// Transition, Version, LockDigest and InventoryDigest are the record's
	// command's.
	Transition      string `json:"transition"`
	Version         string `json:"version"`
	LockDigest      string `json:"lockDigest"`
	InventoryDigest string `json:"inventoryDigest"`
	// ExpectedHead is the token of the Head the record is pinned to
	// (AbsentToken for an install).
	ExpectedHead string `json:"expectedHead"`
	// Generation is the generation the target's Head commits when the
	// record is applied: the expected Head's generation plus one.
	Generation int64 `json:"generation"`
}

// Soak is the wave's soak as a duration.
func (w Wave) Soak() time.Duration { return time.Duration(w.SoakSeconds) * time.Second }

// Build makes the plan of fleet f from one Target per target of f (in any
// order), arranged in f's waves, with f's digest and wave values, sealed
// and checked as Parse checks a record. Errors are fail.Invalid: a target
// of f without an entry or an entry for no target of f, an entry whose
// namespace is not the fleet's, and every rule of docs/fleet.md §4.
func Build(f *fleetfile.Fleet, tool Tool, targets []Target) (*Plan, error) {
	fd, err := f.Digest()
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "fleet plan: %w", err)
	}
	byName := map[string]Target{}
	for _, t := range targets {
		if _, dup := byName[t.Name]; dup {
			return nil, fail.Errorf(fail.Invalid, "fleet plan: two entries for target %q", t.Name)
		}
		if _, ok := f.Target(t.Name); !ok {
			return nil, fail.Errorf(fail.Invalid, "fleet plan: an entry for %q, which is no target of the fleet", t.Name)
		}
		byName[t.Name] = t
	}
	p := &Plan{Schema: Schema, FleetDigest: fd, Tool: tool, Waves: []Wave{}}
	for _, fw := range f.Waves {
		w := waveOf(fw)
		for _, name := range fw.Targets {
			t, ok := byName[name]
			if !ok {
				return nil, fail.Errorf(fail.Invalid, "fleet plan: target %q of wave %q has no entry", name, fw.Name)
			}
			w.Targets = append(w.Targets, t)
		}
		p.Waves = append(p.Waves, w)
	}
	if err := p.Matches(f); err != nil {
		return nil, err
	}
	if err := p.Seal(); err != nil {
		return nil, fail.Errorf(fail.Invalid, "fleet plan: %w", err)
	}
	if err := p.check(); err != nil {
		return nil, fail.Errorf(fail.Invalid, "fleet plan: %w", err)
	}
	return p, nil
}

// waveOf is a plan wave with fw's values and no targets yet.
func waveOf(fw fleetfile.Wave) Wave {
	return Wave{Name: fw.Name, MaxParallel: fw.MaxParallel, MaxFailures: fw.MaxFailures,
		SoakSeconds: int64(fw.Soak / time.Second), Gate: fw.Gate, Targets: []Target{}}
}

// Matches checks that p is a plan of fleet f: the fleet digest is f's, and
// the waves are f's — names, values and targets in order, each target's
// namespace the fleet's. A plan of another fleet, or of this fleet file
// before an edit, is fail.Invalid: run fleet preflight again.
func (p *Plan) Matches(f *fleetfile.Fleet) error {
	bad := func(format string, args ...any) error {
		return fail.Errorf(fail.Invalid, "fleet plan: "+format+"; it is not a plan of this fleet file (run fleet preflight again)", args...)
	}
	fd, err := f.Digest()
	if err != nil {
		return fail.Errorf(fail.Invalid, "fleet plan: %w", err)
	}
	if p.FleetDigest != fd {
		return bad("fleetDigest %s, but the fleet file's is %s", p.FleetDigest, fd)
	}
	if len(p.Waves) != len(f.Waves) {
		return bad("%d waves, the fleet has %d", len(p.Waves), len(f.Waves))
	}
	for i, fw := range f.Waves {
		w, want := p.Waves[i], waveOf(fw)
		if w.Name != want.Name || w.MaxParallel != want.MaxParallel || w.MaxFailures != want.MaxFailures ||
			w.SoakSeconds != want.SoakSeconds || w.Gate != want.Gate || len(w.Targets) != len(fw.Targets) {
			return bad("waves[%d] (%s) differs from the fleet's wave %s", i, w.Name, fw.Name)
		}
		for j, name := range fw.Targets {
			ft, _ := f.Target(name)
			if t := w.Targets[j]; t.Name != name || t.Namespace != ft.Namespace {
				return bad("waves[%d].targets[%d] is %s in namespace %s, the fleet's is %s in namespace %s", i, j, t.Name, t.Namespace, name, ft.Namespace)
			}
		}
	}
	return nil
}

// Find is the target named name and the index of its wave.
func (p *Plan) Find(name string) (t Target, wave int, ok bool) {
	for i, w := range p.Waves {
		for _, t := range w.Targets {
			if t.Name == name {
				return t, i, true
			}
		}
	}
	return Target{}, -1, false
}

// Seal computes the plan digest, selfDigest.
func (p *Plan) Seal() error {
	p.SelfDigest = ""
	c, err := canonWithout(p)
	if err != nil {
		return err
	}
	p.SelfDigest = canon.DigestBytes(DomainPlan, c)
	return nil
}

// Bytes is the record's file: its canonical JSON and one newline.
func (p *Plan) Bytes() ([]byte, error) {
	c, err := canon.Canonical(p)
	if err != nil {
		return nil, err
	}
	return append(c, '\n'), nil
}

// Digest is the wave digest, what a gate's approval binds: the canonical
// JSON of the wave exactly as the plan holds it, every target's preflight
// digest included:
//
//	digest("fleet-wave", canonical(wave))
func (w Wave) Digest() (string, error) {
	d, err := canon.DigestOf(DomainWave, w)
	if err != nil {
		return "", fmt.Errorf("wave %s: %w", w.Name, err)
	}
	return d, nil
}
