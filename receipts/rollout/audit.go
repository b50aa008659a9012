package rollout

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/intoto"
	"github.com/qinglong/kubectl-ql3/internal/safefile"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// Report is the offline audit of one rollout receipt.
type Report struct {
	File    string `json:"file"`
	Plan    string `json:"plan,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	// Attestation: none, unverified, verified or invalid (the receipts'
	// signature states).
	Attestation string          `json:"attestation"`
	Verdict     string          `json:"verdict"`
	Reasons     []string        `json:"reasons,omitempty"`
	Targets     []TargetVerdict `json:"targets,omitempty"`
}

// TargetVerdict is one target of the rollout receipt.
type TargetVerdict struct {
	Wave    string   `json:"wave"`
	Name    string   `json:"name"`
	State   string   `json:"state"`
	Receipt string   `json:"receipt,omitempty"`
	Verdict string   `json:"verdict"`
	Reasons []string `json:"reasons,omitempty"`
}

// OK reports whether the rollout receipt and every target receipt passed.
func (r *Report) OK() bool { return r != nil && r.Verdict == receipts.VerdictOK }

// Audit verifies the rollout receipt at path offline (docs/fleet.md §8.4):
// strictly parsed with every rule; its file name; its attestation (with
// keys: required and signed by one of them); and every committed target's
// deployment receipt, found at its path relative to the rollout receipt's
// directory: the SHA-256 and digest recorded, the plan's values, the
// approval, and the receipt's own audit (receipts.Audit of that file from
// its generation, with the same keys). A missing or altered target
// receipt fails the audit. The error is for unusable input only (a path
// that is not a regular file); verification failures are in the report.
func Audit(path string, keys receipts.TrustedKeys) (*Report, error) {
	rep := &Report{File: path, Attestation: receipts.SignatureNone, Verdict: receipts.VerdictOK}
	data, err := safefile.ReadRegular(path, MaxFileSize)
	if errors.Is(err, safefile.ErrNotRegular) || errors.Is(err, fs.ErrNotExist) {
		return nil, fail.Errorf(fail.Invalid, "rollout receipt %q: %w", path, err)
	}
	if err != nil {
		rep.fail("%v", err)
		return rep, nil
	}
	r, err := Parse(data)
	if err != nil {
		rep.fail("%v", err)
		return rep, nil
	}
	rep.Plan, rep.Outcome = r.Plan, r.Outcome
	if want := FileName(r); filepath.Base(path) != want {
		rep.fail("file name %q does not match its content; it must be %q", filepath.Base(path), want)
	}
	if err := rep.attestation(path, r, data, keys); err != nil {
		return nil, err
	}
	for _, w := range r.Waves {
		for _, t := range w.Targets {
			tv := auditTarget(filepath.Dir(path), w, t, keys)
			if tv.Verdict != receipts.VerdictOK {
				rep.Verdict = receipts.VerdictFail
			}
			rep.Targets = append(rep.Targets, tv)
		}
	}
	return rep, nil
}

func (r *Report) fail(format string, args ...any) {
	r.Verdict = receipts.VerdictFail
	r.Reasons = append(r.Reasons, fmt.Sprintf(format, args...))
}

// attestation checks the envelope beside the rollout receipt: with keys it
// is required and its signature verified; without, one that is there is
// parsed and compared (unverified). Predicate type, predicate (byte for
// byte the file) and subjects (exactly Subjects) must be the receipt's.
func (r *Report) attestation(path string, rr *Receipt, data []byte, keys receipts.TrustedKeys) error {
	attPath := strings.TrimSuffix(path, FileSuffix) + AttestationSuffix
	env, err := safefile.ReadRegular(attPath, intoto.MaxEnvelopeBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if len(keys) > 0 {
			r.fail("no attestation %q; a signature by a trusted key is required", filepath.Base(attPath))
		}
		return nil
	case errors.Is(err, safefile.ErrNotRegular):
		return fail.Errorf(fail.Invalid, "rollout receipt audit: %w; an attestation must be a regular file", err)
	}
	r.Attestation = receipts.SignatureInvalid
	var st *intoto.Statement
	if err == nil && len(keys) > 0 {
		st, err = intoto.Verify(env, keys)
	} else if err == nil {
		var p *intoto.Parsed
		if p, err = intoto.Parse(env); err == nil {
			st = &p.Statement
		}
	}
	switch {
	case err != nil:
		r.fail("%s: %v", filepath.Base(attPath), err)
	case st.PredicateType != PredicateType || !bytes.Equal(st.Predicate, data):
		r.fail("%s: not an attestation of this rollout receipt (predicate type %q)", filepath.Base(attPath), st.PredicateType)
	case !reflect.DeepEqual(st.Subjects, Subjects(rr, data)):
		r.fail("%s: subjects %v are not %v", filepath.Base(attPath), st.Subjects, Subjects(rr, data))
	case len(keys) > 0:
		r.Attestation = receipts.SignatureVerified
	default:
		r.Attestation = receipts.SignatureUnverified
	}
	return nil
}

// auditTarget checks one target: a committed one against its deployment
// receipt.
func auditTarget(dir string, w Wave, t Target, keys receipts.TrustedKeys) TargetVerdict {
	tv := TargetVerdict{Wave: w.Name, Name: t.Name, State: t.State, Verdict: receipts.VerdictOK}
	if t.Receipt == nil {
		return tv
	}
	tv.Receipt = t.Receipt.Path
	var reasons []string
	failf := func(format string, args ...any) { reasons = append(reasons, fmt.Sprintf(format, args...)) }
	path := filepath.Join(dir, filepath.FromSlash(t.Receipt.Path))
	data, err := safefile.ReadRegular(path, receipts.MaxFileSize)
	if err != nil {
		failf("target receipt %s: %v", t.Receipt.Path, err)
		return tv.done(reasons)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != t.Receipt.SHA256 {
		failf("target receipt %s: its bytes digest to %x, the rollout receipt records %s", t.Receipt.Path, sum, t.Receipt.SHA256)
		return tv.done(reasons)
	}
	rc, err := receipts.Parse(data)
	if err != nil {
		failf("target receipt %s: %v", t.Receipt.Path, err)
		return tv.done(reasons)
	}
	reasons = append(reasons, matches(rc, t)...)
	rep, err := receipts.Audit([]string{path}, receipts.AuditOptions{TrustedKeys: keys, BaseGeneration: t.Generation})
	if err != nil {
		failf("target receipt %s: %v", t.Receipt.Path, err)
	} else if !rep.OK() {
		for _, row := range rep.Receipts {
			reasons = append(reasons, row.Reasons...)
		}
		reasons = append(reasons, rep.Chain.Reasons...)
	}
	return tv.done(reasons)
}

func (tv TargetVerdict) done(reasons []string) TargetVerdict {
	if len(reasons) > 0 {
		tv.Verdict, tv.Reasons = receipts.VerdictFail, reasons
	}
	return tv
}

// matches compares a target's deployment receipt with the rollout
// receipt's entry for it.
func matches(rc *receipts.Receipt, t Target) []string {
	var out []string
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"selfDigest", rc.SelfDigest, t.Receipt.Digest},
		{"generation", rc.Generation, t.Generation},
		{"transition", rc.Transition.Kind, t.Transition},
		{"preflight digest", rc.Transition.PreflightDigest, t.PreflightDigest},
		{"version", rc.Deployment.Version, t.Version},
		{"inventory digest", rc.Deployment.InventoryDigest, t.InventoryDigest},
		{"cluster identity", rc.Target.ClusterIdentity, t.ClusterIdentity},
		{"namespace", rc.Target.Namespace, t.Namespace},
		{"approval", rc.Approval, t.Approval},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			out = append(out, fmt.Sprintf("target receipt %s: %s is %v, the rollout receipt records %v", t.Receipt.Path, c.what, c.got, c.want))
		}
	}
	return slices.Clip(out)
}
