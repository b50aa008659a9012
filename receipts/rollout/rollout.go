// Package rollout is the fleet's rollout receipt (docs/fleet.md §8): what
// one `fleet apply` run did to every target of a plan, wave by wave — the
// generation each target committed and the digest of the deployment
// receipt that proves it, or why it did not — sealed by its own digest,
// written without replacing, signed as an in-toto attestation by the one
// envelope writer (internal/intoto), and audited offline together with the
// targets' receipts. It knows no cluster and no plan type: the fleet
// copies the plan's values in.
package rollout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// Schema is the rollout receipt's schema.
const Schema = "kubectl-ql3/rollout-receipt/v1"

// Domain is the digest domain of a rollout receipt's selfDigest.
const Domain = "rollout-receipt"

// PredicateType is the in-toto predicate type of its attestation.
const PredicateType = "https://qinglong.io/kubectl-ql3/rollout/v1"

// FilePrefix and FileSuffix frame a rollout receipt's file name:
// "rollout-" and the 64 hex digits of its selfDigest, then ".json". A
// target's receipts directory is named after the target, a DNS label,
// which never holds a dot: the names cannot meet.
const (
	FilePrefix = "rollout-"
	FileSuffix = ".json"
	// AttestationSuffix replaces FileSuffix in the attestation's name.
	AttestationSuffix = ".intoto.json"
)

// MaxFileSize bounds a rollout receipt file.
const MaxFileSize = 16 << 20

// The outcomes of a run, the states of a wave and of a target.
const (
	OutcomeDone    = "done"
	OutcomeStopped = "stopped"

	WaveDone       = "done"
	WaveStopped    = "stopped"
	WaveNotStarted = "not started"
	WaveAwaiting   = "awaiting approval"

	TargetCommitted  = "committed"
	TargetFailed     = "failed"
	TargetNotStarted = "not started"
	TargetAwaiting   = "awaiting approval"
)

// Receipt is a rollout receipt. Its file is the canonical JSON (RFC 8785)
// of this struct with no trailing newline; SelfDigest is the Domain digest
// of that JSON without the selfDigest member.
type Receipt struct {
	Schema      string        `json:"schema"`
	Plan        string        `json:"plan"`        // the plan's selfDigest
	FleetDigest string        `json:"fleetDigest"` // the plan's fleetDigest
	Tool        receipts.Tool `json:"tool"`
	Outcome     string        `json:"outcome"`
	Waves       []Wave        `json:"waves"`
	SelfDigest  string        `json:"selfDigest"`
}

// Wave is one wave of the plan and what became of it.
type Wave struct {
	Name        string   `json:"name"`
	Gate        string   `json:"gate"`
	MaxFailures int      `json:"maxFailures"`
	State       string   `json:"state"`
	Targets     []Target `json:"targets"`
}

// Target is one target: the plan's entry for it, and its end.
type Target struct {
	Name            string `json:"name"`
	ClusterIdentity string `json:"clusterIdentity"`
	Namespace       string `json:"namespace"`
	Transition      string `json:"transition"`
	Version         string `json:"version"`
	Generation      int64  `json:"generation"`
	PreflightDigest string `json:"preflightDigest"`
	InventoryDigest string `json:"inventoryDigest"`
	State           string `json:"state"`
	// Receipt is the deployment receipt that proves a committed target.
	Receipt *Ref `json:"receipt,omitempty"`
	// Approval is that receipt's approval (present exactly when the
	// receipt's is; always on a wave gated by approval).
	Approval *receipts.Approval `json:"approval,omitempty"`
	// Exit and Reason say why a target failed or awaits approval.
	Exit   int    `json:"exit,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Ref names a target's deployment receipt: its path relative to the
// directory of the rollout receipt ("<target>/<receipt file name>"), the
// receipt's selfDigest and the SHA-256 of its file's bytes.
type Ref struct {
	Path   string `json:"path"`
	Digest string `json:"digest"`
	SHA256 string `json:"sha256"`
}

// Seal sets r's schema and selfDigest and returns its file's bytes.
func (r *Receipt) Seal() ([]byte, error) {
	r.Schema, r.SelfDigest = Schema, ""
	unsealed, err := r.unsealed()
	if err != nil {
		return nil, err
	}
	r.SelfDigest = canon.DigestBytes(Domain, unsealed)
	if err := r.check(); err != nil {
		return nil, err
	}
	return canon.Canonical(r)
}

// unsealed is the selfDigest pre-image: the canonical JSON without it.
func (r *Receipt) unsealed() ([]byte, error) {
	full, err := canon.Canonical(r)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(full, &m); err != nil {
		return nil, err
	}
	delete(m, "selfDigest")
	return canon.Canonical(m)
}

// FileName is r's file name.
func FileName(r *Receipt) string {
	return FilePrefix + strings.TrimPrefix(r.SelfDigest, canon.DigestPrefix) + FileSuffix
}

// AttestationName is the file name of r's attestation.
func AttestationName(r *Receipt) string {
	return strings.TrimSuffix(FileName(r), FileSuffix) + AttestationSuffix
}

// Parse reads a rollout receipt file strictly: exactly the canonical JSON
// of a sealed receipt that keeps every rule. Every failure is fail.Tamper.
func Parse(data []byte) (*Receipt, error) {
	if len(data) > MaxFileSize {
		return nil, fail.Errorf(fail.Tamper, "rollout receipt is larger than %d bytes", MaxFileSize)
	}
	var r Receipt
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fail.Errorf(fail.Tamper, "rollout receipt: %v", err)
	}
	if dec.InputOffset() != int64(len(data)) {
		return nil, fail.Errorf(fail.Tamper, "rollout receipt: bytes after the JSON object")
	}
	if r.Schema != Schema {
		return nil, fail.Errorf(fail.Tamper, "rollout receipt: schema %q, want %q", r.Schema, Schema)
	}
	full, err := canon.Canonical(&r)
	if err != nil || !bytes.Equal(full, data) {
		return nil, fail.Errorf(fail.Tamper, "rollout receipt is not the canonical JSON of its content (a member missing, out of order, null or zero where it must be absent, or white space)")
	}
	unsealed, err := r.unsealed()
	if err != nil {
		return nil, fail.Errorf(fail.Tamper, "rollout receipt: %v", err)
	}
	if got := canon.DigestBytes(Domain, unsealed); got != r.SelfDigest {
		return nil, fail.Errorf(fail.Tamper, "rollout receipt: selfDigest %s, its content digests to %s", r.SelfDigest, got)
	}
	if err := r.check(); err != nil {
		return nil, fail.Errorf(fail.Tamper, "%v", err)
	}
	return &r, nil
}

var (
	labelRE   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	receiptRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[0-9]{6,}-(install|upgrade|rollback|retire)-[0-9A-Za-z.+-]+\.receipt\.json$`)
	sha256RE  = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

func errorf(format string, args ...any) error {
	return fail.Errorf(fail.Invalid, "rollout receipt: "+format, args...)
}

// check is every rule of docs/fleet.md §8.2 that one rollout receipt can
// check alone.
func (r *Receipt) check() error {
	for name, d := range map[string]string{"plan": r.Plan, "fleetDigest": r.FleetDigest, "selfDigest": r.SelfDigest} {
		if !canon.IsDigest(d) {
			return errorf("%s %q is not a digest", name, d)
		}
	}
	if r.Tool.Name == "" || r.Tool.Version == "" || r.Tool.FieldManager == "" {
		return errorf("tool: name, version and fieldManager are required")
	}
	if len(r.Waves) == 0 {
		return errorf("waves: none")
	}
	stopped, seen := false, map[string]bool{}
	for i, w := range r.Waves {
		if err := checkWave(w, stopped, seen); err != nil {
			return errorf("waves[%d] (%s): %v", i, w.Name, err)
		}
		stopped = stopped || w.State != WaveDone
	}
	if want := map[bool]string{false: OutcomeDone, true: OutcomeStopped}[stopped]; r.Outcome != want {
		return errorf("outcome %q, its waves make it %q", r.Outcome, want)
	}
	return nil
}

// checkWave: a wave after a wave that did not finish never started; a
// done wave has every target committed but at most maxFailures failed; a
// wave awaiting approval has targets awaiting it and the rest not started.
func checkWave(w Wave, afterStop bool, seen map[string]bool) error {
	if !labelRE.MatchString(w.Name) || len(w.Name) > 63 {
		return fmt.Errorf("name is not a DNS label")
	}
	if w.Gate != "auto" && w.Gate != "approval" {
		return fmt.Errorf("gate %q: want auto or approval", w.Gate)
	}
	if w.MaxFailures < 0 || len(w.Targets) == 0 {
		return fmt.Errorf("maxFailures below 0, or no target")
	}
	count := map[string]int{}
	for i, t := range w.Targets {
		if seen[t.Name] {
			return fmt.Errorf("targets[%d]: %s appears twice in the receipt", i, t.Name)
		}
		seen[t.Name] = true
		if err := checkTarget(t, w.Gate); err != nil {
			return fmt.Errorf("targets[%d] (%s): %v", i, t.Name, err)
		}
		count[t.State]++
	}
	n := len(w.Targets)
	ok := map[string]bool{
		WaveNotStarted: count[TargetNotStarted] == n,
		WaveAwaiting:   !afterStop && w.Gate == "approval" && count[TargetAwaiting] > 0 && count[TargetAwaiting]+count[TargetNotStarted] == n,
		WaveDone:       !afterStop && count[TargetCommitted]+count[TargetFailed] == n && count[TargetFailed] <= w.MaxFailures,
		// Stopped: too many failures, targets never started, or a soak
		// that found a committed target unhealthy.
		WaveStopped: !afterStop && count[TargetAwaiting] == 0,
	}
	if !ok[w.State] {
		return fmt.Errorf("state %q does not follow from its targets (%d committed, %d failed, %d not started, %d awaiting approval, at most %d failures) and the waves before", w.State, count[TargetCommitted], count[TargetFailed], count[TargetNotStarted], count[TargetAwaiting], w.MaxFailures)
	}
	return nil
}

func checkTarget(t Target, gate string) error {
	if !labelRE.MatchString(t.Name) || len(t.Name) > 63 || !labelRE.MatchString(t.Namespace) || len(t.Namespace) > 63 {
		return fmt.Errorf("name and namespace must be DNS labels")
	}
	for name, d := range map[string]string{"clusterIdentity": t.ClusterIdentity, "preflightDigest": t.PreflightDigest, "inventoryDigest": t.InventoryDigest} {
		if !canon.IsDigest(d) {
			return fmt.Errorf("%s %q is not a digest", name, d)
		}
	}
	if _, err := semver.StrictNewVersion(t.Version); err != nil || len(t.Version) > 128 || t.Generation < 1 {
		return fmt.Errorf("version %q or generation %d invalid", t.Version, t.Generation)
	}
	switch t.Transition {
	case "install", "upgrade", "rollback", "retire":
	default:
		return fmt.Errorf("transition %q", t.Transition)
	}
	committed := t.State == TargetCommitted
	switch {
	case t.State != TargetCommitted && t.State != TargetFailed && t.State != TargetNotStarted && t.State != TargetAwaiting:
		return fmt.Errorf("state %q", t.State)
	case committed != (t.Receipt != nil):
		return fmt.Errorf("a receipt is given exactly for a committed target")
	case t.Approval != nil && !committed:
		return fmt.Errorf("an approval is given only for a committed target")
	case committed && gate == "approval" && t.Approval == nil:
		return fmt.Errorf("a committed target of a wave gated by approval needs its approval")
	case (t.State == TargetFailed || t.State == TargetAwaiting) != (t.Exit >= 2 && t.Exit <= 5 && t.Reason != ""):
		return fmt.Errorf("exit 2 to 5 and a reason are given exactly for a failed target or one awaiting approval")
	}
	if t.Receipt != nil {
		want := fmt.Sprintf("%s/%06d-%s-%s%s", t.Name, t.Generation, t.Transition, t.Version, receipts.FileSuffix)
		if !receiptRE.MatchString(t.Receipt.Path) || t.Receipt.Path != want || !canon.IsDigest(t.Receipt.Digest) || !sha256RE.MatchString(t.Receipt.SHA256) {
			return fmt.Errorf("receipt %+v: want path %q, a digest and 64 hex digits of SHA-256", *t.Receipt, want)
		}
	}
	return nil
}

// IsFileName says whether name is a rollout receipt's file name.
func IsFileName(name string) bool { return fileRE.MatchString(name) }

var fileRE = regexp.MustCompile(`^` + FilePrefix + `[0-9a-f]{64}` + regexp.QuoteMeta(FileSuffix) + `$`)
