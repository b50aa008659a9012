// Package fleetfile is the fleet file kubectl-ql3/fleet@v1
// (docs/fleet.md): the targets of one release rolled out to many clusters
// and the ordered waves that select them, read strictly and resolved into
// a Fleet whose every target is in exactly one wave, and the fleet digest
// that binds the resolved fleet.
//
// It is a pure format leaf: no cluster client, no CAS kernel, no
// ceremony. Parse judges bytes alone; Load also reads the file (a hardened
// read) and checks that the paths it names stay inside its directory.
package fleetfile

import (
	"path/filepath"
	"time"

	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// Schema is the fleet file's schema member, exactly.
const Schema = "kubectl-ql3/fleet@v1"

// DomainFleet is the digest domain of the resolved fleet (docs/digests.md).
const DomainFleet = "fleet"

// Limits.
const (
	// MaxFileBytes bounds a fleet file.
	MaxFileBytes = 1 << 20
	// MaxTargets bounds the number of targets (and so of waves).
	MaxTargets = 1000
	// MaxSoak bounds a wave's soak.
	MaxSoak = 24 * time.Hour
	// MaxPathBytes bounds a kubeconfig or release path.
	MaxPathBytes = 1024
	// MaxContextBytes bounds a kubeconfig context name.
	MaxContextBytes = 253
)

// The gates of a wave.
const (
	// GateAuto starts the wave as soon as the wave before it is done and
	// has soaked.
	GateAuto = "auto"
	// GateApproval also waits, before the wave starts, for a second
	// person's approval of the wave's exact preflight records.
	GateApproval = "approval"
)

// Fleet is a resolved fleet file.
type Fleet struct {
	// Dir is the absolute directory of the fleet file: every path of a
	// target is relative to it. It is not part of the digest.
	Dir string
	// Targets are the targets in the file's order.
	Targets []Target
	// Waves are the waves in the file's order; together they hold every
	// target exactly once.
	Waves []Wave
}

// Target is one deployment target: one control namespace on one cluster,
// so one Head.
type Target struct {
	// Name is the target's name, a DNS-1123 label unique in the fleet.
	Name string
	// Labels are the target's labels (empty, never nil, when none).
	Labels map[string]string
	// Kubeconfig is the kubeconfig file, a clean relative path with '/'
	// separators inside Dir, or "" for the default loading rules.
	Kubeconfig string
	// Context is the kubeconfig context, or "" for its current context.
	Context string
	// Namespace is the control namespace (where the Head lives).
	Namespace string
	// Release is the release directory, a clean relative path with '/'
	// separators inside Dir.
	Release string
}

// Selector is a wave's selector as written: exactly one of its members is
// set.
type Selector struct {
	// Names lists targets by name.
	Names []string
	// MatchLabels selects the targets whose labels hold every pair.
	MatchLabels map[string]string
}

// Wave is one wave, its defaults applied.
type Wave struct {
	// Name is the wave's name, a DNS-1123 label unique among the waves.
	Name string
	// Selector is the selector as written (not part of the digest: the
	// resolved Targets are).
	Selector Selector
	// MaxParallel is how many of the wave's targets may run at once (≥ 1).
	MaxParallel int
	// MaxFailures is how many of the wave's targets may fail before the
	// wave stops (≥ 0; 0 stops at the first failure).
	MaxFailures int
	// Soak is how long the wave must stay healthy before the next wave
	// starts: whole seconds, 0 to MaxSoak.
	Soak time.Duration
	// Gate is GateAuto or GateApproval.
	Gate string
	// Targets are the names of the targets the selector picks, in the
	// order of Fleet.Targets.
	Targets []string
}

// Target is the target named name.
func (f *Fleet) Target(name string) (Target, bool) {
	for _, t := range f.Targets {
		if t.Name == name {
			return t, true
		}
	}
	return Target{}, false
}

// Path is the absolute path of rel, a target's Kubeconfig or Release, in
// the fleet's directory; "" stays "".
func (f *Fleet) Path(rel string) string {
	if rel == "" {
		return ""
	}
	return filepath.Join(f.Dir, filepath.FromSlash(rel))
}

// document is the resolved fleet as the digest sees it (docs/fleet.md
// §3): every member always present, defaults applied, selectors resolved.
type document struct {
	Schema  string        `json:"schema"`
	Targets []targetEntry `json:"targets"`
	Waves   []waveEntry   `json:"waves"`
}

type targetEntry struct {
	Name       string            `json:"name"`
	Labels     map[string]string `json:"labels"`
	Kubeconfig string            `json:"kubeconfig"`
	Context    string            `json:"context"`
	Namespace  string            `json:"namespace"`
	Release    string            `json:"release"`
}

type waveEntry struct {
	Name        string   `json:"name"`
	MaxParallel int      `json:"maxParallel"`
	MaxFailures int      `json:"maxFailures"`
	SoakSeconds int64    `json:"soakSeconds"`
	Gate        string   `json:"gate"`
	Targets     []string `json:"targets"`
}

// Canonical is the RFC 8785 canonical JSON of the resolved fleet, the
// bytes Digest hashes (docs/fleet.md §3).
func (f *Fleet) Canonical() ([]byte, error) {
	doc := document{Schema: Schema, Targets: []targetEntry{}, Waves: []waveEntry{}}
	for _, t := range f.Targets {
		labels := map[string]string{}
		for k, v := range t.Labels {
			labels[k] = v
		}
		doc.Targets = append(doc.Targets, targetEntry{Name: t.Name, Labels: labels, Kubeconfig: t.Kubeconfig,
			Context: t.Context, Namespace: t.Namespace, Release: t.Release})
	}
	for _, w := range f.Waves {
		names := append([]string{}, w.Targets...)
		doc.Waves = append(doc.Waves, waveEntry{Name: w.Name, MaxParallel: w.MaxParallel, MaxFailures: w.MaxFailures,
			SoakSeconds: int64(w.Soak / time.Second), Gate: w.Gate, Targets: names})
	}
	return canon.Canonical(doc)
}

// Digest is the fleet digest:
//
//	digest("fleet", canonical(resolved fleet))
//
// It names the resolved fleet, not where it lies: Dir is not part of it.
func (f *Fleet) Digest() (string, error) {
	c, err := f.Canonical()
	if err != nil {
		return "", err
	}
	return canon.DigestBytes(DomainFleet, c), nil
}
