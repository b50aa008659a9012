package receipts

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/safefile"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// Verdicts.
const (
	VerdictOK   = "ok"
	VerdictFail = "FAIL"
)

// Signature states of an audited receipt.
const (
	SignatureNone       = "none"       // no signature file
	SignatureUnverified = "unverified" // well-formed, for this receipt, but no trusted key was given
	SignatureVerified   = "verified"   // valid, by a trusted key
	SignatureInvalid    = "invalid"    // malformed, for another receipt, or failed verification
)

// OfflineNote is stated in every report: what an offline audit cannot
// prove. The report's note adds what it did prove: SignedNote with trusted
// keys, UnsignedNote without.
const OfflineNote = "offline audit: no cluster was contacted. It does not prove that the Head is still at the newest " +
	"generation audited, nor that no later receipt exists."

// SignedNote and UnsignedNote say what an audit proved, with and without
// trusted keys. Without a key the checks are of consistency only: the
// digests, the chain and the rules are all computable by whoever writes
// the files, so a receipt edited and resealed passes.
const (
	SignedNote   = "Trusted keys were given: each receipt passes only with a valid signature by one of them, and the chain only unbroken."
	UnsignedNote = "No trusted key was given: the receipts were checked for consistency and the chain for breaks, " +
		"which shows nothing of who wrote them (anyone who can write these files can write consistent ones); " +
		"audit with --trusted-key to verify their signatures."
)

// Note is the report's note for an audit with (signed) or without trusted
// keys.
func Note(signed bool) string {
	if signed {
		return OfflineNote + " " + SignedNote
	}
	return OfflineNote + " " + UnsignedNote
}

// AuditOptions tune Audit.
type AuditOptions struct {
	// TrustedKeys, when non-empty, require every receipt to carry a valid
	// signature by one of them.
	TrustedKeys TrustedKeys
	// BaseGeneration is the first generation of a truncated history; the
	// link from it to its predecessor is not checked. 0 means 1.
	BaseGeneration int64
	// Release, when set, yields the digests of a release to compare with
	// the newest receipt's deployment.
	Release func() (ReleaseDigests, error)
}

// ReleaseDigests identify a release rendered from a release directory.
type ReleaseDigests struct {
	Version         string `json:"version,omitempty"` // compared when set
	LockDigest      string `json:"lockDigest"`
	InventoryDigest string `json:"inventoryDigest"`
	// Rendered, when set, is compared with what the newest receipt's
	// attestation states (its render and object subjects).
	Rendered *Rendered `json:"rendered,omitempty"`
}

// Report is the outcome of an audit.
type Report struct {
	Verdict    string           `json:"verdict"`
	Note       string           `json:"note"`
	Receipts   []ReceiptVerdict `json:"receipts"`
	Chain      ChainVerdict     `json:"chain"`
	Release    *ReleaseVerdict  `json:"release,omitempty"`
	StrayFiles []string         `json:"strayFiles,omitempty"`
}

// ReceiptVerdict is one receipt file's row.
type ReceiptVerdict struct {
	File         string `json:"file"`
	Generation   int64  `json:"generation,omitempty"`
	Transition   string `json:"transition,omitempty"`
	Version      string `json:"version,omitempty"`
	SelfDigest   string `json:"selfDigest,omitempty"`
	Signature    string `json:"signature"`
	SignatureKey string `json:"signatureKey,omitempty"`
	// Attestation is the state of the attestation file beside the receipt
	// (the Signature* values but none), absent when there is none.
	Attestation string   `json:"attestation,omitempty"`
	Verdict     string   `json:"verdict"`
	Reasons     []string `json:"reasons,omitempty"`
	// Receipt is the receipt parsed from the very bytes audited (one
	// bounded read); nil when they did not parse. Not printed.
	Receipt *Receipt `json:"-"`
	// attested is the release the receipt's attestation states, when it
	// passed (checkRelease confirms it against a release).
	attested *Rendered
}

// ChainVerdict covers the receipts taken together.
type ChainVerdict struct {
	FromGeneration int64    `json:"fromGeneration,omitempty"`
	ToGeneration   int64    `json:"toGeneration,omitempty"`
	Target         *Target  `json:"target,omitempty"`
	Verdict        string   `json:"verdict"`
	Reasons        []string `json:"reasons,omitempty"`
	Notes          []string `json:"notes,omitempty"`
}

// ReleaseVerdict compares a release with the newest receipt.
type ReleaseVerdict struct {
	Release    ReleaseDigests `json:"release"`
	Generation int64          `json:"generation,omitempty"`
	Verdict    string         `json:"verdict"`
	Reasons    []string       `json:"reasons,omitempty"`
}

// OK reports whether every receipt, the chain and the release check passed.
func (r *Report) OK() bool { return r != nil && r.Verdict == VerdictOK }

// Audit verifies receipts offline. Each path is a receipt file or a
// directory, whose *.receipt.json files are audited (and its *.sig files
// matched to them). Every receipt is parsed strictly and its signature
// checked; all receipts together must form one chain (docs/receipts.md).
// The error is for unusable input only (fail.Invalid: a missing path, no
// receipts, a receipt or signature path that is not a regular file, such
// as a named pipe, which is never read) or opts.Release's error, returned
// as is; verification failures are in the report.
func Audit(paths []string, opts AuditOptions) (*Report, error) {
	set, err := collect(paths)
	if err != nil {
		return nil, err
	}
	rep := &Report{Note: Note(len(opts.TrustedKeys) > 0), StrayFiles: set.stray}
	var parsed []audited
	for _, path := range set.receipts {
		row, r, err := auditFile(path, opts.TrustedKeys)
		if err == nil && r != nil {
			err = auditAttestation(&row, path, r, opts.TrustedKeys)
		}
		if err != nil {
			return nil, err
		}
		row.Receipt = r
		rep.Receipts = append(rep.Receipts, row)
		if r != nil {
			parsed = append(parsed, audited{path: path, r: r})
		}
	}
	slices.SortStableFunc(parsed, func(a, b audited) int { return cmp.Compare(a.r.Generation, b.r.Generation) })
	rep.Chain = checkChain(parsed, opts.BaseGeneration, unverified(rep.Receipts))
	attested := map[string]*Rendered{}
	for _, row := range rep.Receipts {
		if row.attested != nil {
			attested[row.File] = row.attested
		}
	}
	have := map[string]bool{}
	for _, path := range set.receipts {
		have[absPath(path)] = true
	}
	for _, sig := range set.sigs {
		if !have[absPath(strings.TrimSuffix(sig, SignatureSuffix))] {
			rep.Chain.Reasons = append(rep.Chain.Reasons, fmt.Sprintf("signature %q has no receipt beside it; was the receipt removed?", sig))
			rep.Chain.Verdict = VerdictFail
		}
	}
	for _, att := range set.attestations {
		if !have[absPath(attestationFor(att))] {
			rep.Chain.Reasons = append(rep.Chain.Reasons, fmt.Sprintf("attestation %q has no receipt beside it; was the receipt removed?", att))
			rep.Chain.Verdict = VerdictFail
		}
	}
	if opts.Release != nil {
		rel, err := opts.Release()
		if err != nil {
			return nil, err
		}
		var newest *Receipt
		var stated *Rendered
		if len(parsed) > 0 {
			newest = parsed[len(parsed)-1].r
			stated = attested[parsed[len(parsed)-1].path]
		}
		rep.Release = checkRelease(rel, newest, stated)
	}
	slices.SortStableFunc(rep.Receipts, func(a, b ReceiptVerdict) int {
		return cmp.Or(cmp.Compare(a.Generation, b.Generation), cmp.Compare(a.File, b.File))
	})
	rep.Verdict = VerdictOK
	if rep.Chain.Verdict != VerdictOK || (rep.Release != nil && rep.Release.Verdict != VerdictOK) {
		rep.Verdict = VerdictFail
	}
	for _, row := range rep.Receipts {
		if row.Verdict != VerdictOK {
			rep.Verdict = VerdictFail
		}
	}
	return rep, nil
}

type audited struct {
	path string
	r    *Receipt
}

type fileSet struct {
	receipts, sigs, attestations, stray []string
}

// collect expands paths into receipt files, signature files and stray
// temporary files, each once.
func collect(paths []string) (fileSet, error) {
	var set fileSet
	seen := map[string]bool{}
	add := func(list *[]string, path string) {
		if key := absPath(path); !seen[key] {
			seen[key] = true
			*list = append(*list, path)
		}
	}
	if len(paths) == 0 {
		return set, fail.Errorf(fail.Invalid, "no receipt paths given")
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return set, fail.Errorf(fail.Invalid, "receipt path: %w", err)
		}
		if !fi.IsDir() {
			switch {
			case strings.HasSuffix(p, FileSuffix+SignatureSuffix):
				add(&set.sigs, filepath.Clean(p))
			case strings.HasSuffix(p, AttestationSuffix):
				add(&set.attestations, filepath.Clean(p))
			default:
				add(&set.receipts, filepath.Clean(p))
			}
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return set, fail.Errorf(fail.Invalid, "receipt directory: %w", err)
		}
		found := 0
		for _, e := range entries {
			name, path := e.Name(), filepath.Join(p, e.Name())
			switch {
			case e.IsDir():
			case strings.HasSuffix(name, FileSuffix):
				found++
				add(&set.receipts, path)
			case strings.HasSuffix(name, FileSuffix+SignatureSuffix):
				add(&set.sigs, path)
			case strings.HasSuffix(name, AttestationSuffix):
				add(&set.attestations, path)
			case isTempName(name):
				add(&set.stray, path)
			}
		}
		if found == 0 {
			return set, fail.Errorf(fail.Invalid, "no receipts (*%s) in directory %q", FileSuffix, p)
		}
	}
	return set, nil
}

func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return filepath.Clean(path)
}

func isTempName(name string) bool {
	prefix, suffix, _ := strings.Cut(TempPattern, "*")
	return strings.HasPrefix(name, prefix) && strings.HasSuffix(name, suffix)
}

// auditFile checks one receipt file on its own: strict parse, file name and
// signature. The receipt is nil when it did not parse. The error is for a
// receipt or signature path that is not a regular file (unusable input).
func auditFile(path string, keys TrustedKeys) (ReceiptVerdict, *Receipt, error) {
	row := ReceiptVerdict{File: path, Signature: SignatureNone, Verdict: VerdictOK}
	failf := func(format string, args ...any) {
		row.Verdict = VerdictFail
		row.Reasons = append(row.Reasons, fmt.Sprintf(format, args...))
	}
	data, err := readLimited(path)
	if errors.Is(err, safefile.ErrNotRegular) {
		return row, nil, err
	}
	if err != nil {
		failf("%v", err)
		return row, nil, nil
	}
	r, err := Parse(data)
	if err != nil {
		failf("%v", err)
		return row, nil, nil
	}
	row.Generation, row.Transition, row.Version, row.SelfDigest = r.Generation, r.Transition.Kind, r.Deployment.Version, r.SelfDigest
	if want := FileName(r); filepath.Base(path) != want {
		failf("file name %q does not match its content; it must be %q", filepath.Base(path), want)
	}
	if err := r.checkDerived(); err != nil {
		failf("%v", err)
	}
	sigData, err := readLimited(path + SignatureSuffix)
	switch {
	case errors.Is(err, safefile.ErrNotRegular):
		return row, nil, err
	case errors.Is(err, fs.ErrNotExist):
		if len(keys) > 0 {
			failf("no signature %q; a signature by a trusted key is required", filepath.Base(path+SignatureSuffix))
		}
		return row, r, nil
	case err != nil:
		row.Signature = SignatureInvalid
		failf("%v", err)
		return row, r, nil
	}
	sig, err := ParseSignature(sigData)
	if err != nil {
		row.Signature = SignatureInvalid
		failf("%v", err)
		return row, r, nil
	}
	row.SignatureKey = sig.KeyID
	if len(keys) == 0 {
		if sig.ReceiptDigest != r.SelfDigest {
			row.Signature = SignatureInvalid
			failf("signature is for receipt %q, not %q", sig.ReceiptDigest, r.SelfDigest)
			return row, r, nil
		}
		row.Signature = SignatureUnverified
		return row, r, nil
	}
	if err := VerifySignature(sig, r.SelfDigest, keys); err != nil {
		row.Signature = SignatureInvalid
		failf("%v", err)
		return row, r, nil
	}
	row.Signature = SignatureVerified
	return row, r, nil
}

// readLimited reads a receipt or signature file through the one hardened
// open (safefile.ReadRegular): a regular file of at most MaxFileSize bytes;
// a named pipe is refused without blocking.
func readLimited(path string) ([]byte, error) {
	data, err := safefile.ReadRegular(path, MaxFileSize)
	if errors.Is(err, safefile.ErrNotRegular) {
		return nil, fail.Errorf(fail.Invalid, "receipt audit: %w; a receipt or signature must be a regular file", err)
	}
	return data, err
}

// unverified maps the generation a receipt file's name claims to the file,
// for the files that did not parse: a gap in the chain may be one of them.
func unverified(rows []ReceiptVerdict) map[int64]string {
	out := map[int64]string{}
	for _, row := range rows {
		prefix, _, ok := strings.Cut(filepath.Base(row.File), "-")
		if g, err := strconv.ParseInt(prefix, 10, 64); row.Receipt == nil && ok && err == nil && g > 0 {
			out[g] = filepath.Base(row.File)
		}
	}
	return out
}

// checkChain checks receipts sorted by generation as one history starting
// at base (0 means 1); bad names the files, by the generation their names
// claim, that did not parse, so that a gap one fills is not called missing.
func checkChain(rs []audited, base int64, bad map[int64]string) ChainVerdict {
	v := ChainVerdict{Verdict: VerdictOK}
	failf := func(format string, args ...any) {
		v.Verdict = VerdictFail
		v.Reasons = append(v.Reasons, fmt.Sprintf(format, args...))
	}
	if base < 1 {
		base = 1
	}
	if len(rs) == 0 {
		failf("no receipt could be read, so there is no chain to check")
		return v
	}
	first := rs[0].r
	v.FromGeneration, v.ToGeneration = first.Generation, rs[len(rs)-1].r.Generation
	target := first.Target
	v.Target = &target
	switch {
	case first.Generation > base:
		failf("%s; the history starts at generation %d", gap(base, first.Generation-1, bad), base)
	case first.Generation < base:
		failf("generation %d precedes the first generation %d of the history", first.Generation, base)
	case base > 1:
		v.Notes = append(v.Notes, fmt.Sprintf("history audited from generation %d; its link to generation %d is not checked", base, base-1))
	}
	for i := 1; i < len(rs); i++ {
		prev, cur := rs[i-1], rs[i]
		p, c := prev.r, cur.r
		if c.Target != target {
			failf("generation %d targets cluster %q namespace %q, not cluster %q namespace %q",
				c.Generation, c.Target.ClusterIdentity, c.Target.Namespace, target.ClusterIdentity, target.Namespace)
		}
		if c.Generation == p.Generation {
			failf("generation %d appears twice: %q and %q", c.Generation, prev.path, cur.path)
			continue
		}
		notes, reasons := supersededLink(p, c, bad)
		v.Notes = append(v.Notes, notes...)
		if len(reasons) > 0 {
			for _, r := range reasons {
				failf("%s", r)
			}
			continue
		}
		if c.PreviousReceiptDigest != p.SelfDigest {
			failf("generation %d: previousReceiptDigest %q is not generation %d's digest %q", c.Generation, c.PreviousReceiptDigest, p.Generation, p.SelfDigest)
		}
		if c.PreviousDeployment == nil || *c.PreviousDeployment != p.Deployment {
			failf("generation %d: previousDeployment is not generation %d's deployment", c.Generation, p.Generation)
		}
		for _, reason := range append(inventoryRule(p, c), approvalRule(p, c)...) {
			failf("%s", reason)
		}
	}
	for _, reason := range approvalUsedOnce(rs) {
		failf("%s", reason)
	}
	return v
}

// inventoryRule: how generation c's objects may differ from generation
// p's, by its transition. Objects compare by group, kind, namespace and
// name (canon.Key): moving an object to another apiVersion neither drops
// nor adds it.
func inventoryRule(p, c *Receipt) []string {
	switch c.Transition.Kind {
	case KindUpgrade:
		if dropped := canon.Missing(p.Inventory, c.Inventory); len(dropped) > 0 {
			return []string{fmt.Sprintf("generation %d: upgrade drops %d object(s) of generation %d, and kubectl-ql3 never prunes: %s", c.Generation, len(dropped), p.Generation, canon.List(dropped, 10))}
		}
	case KindRetire:
		return retireRule(p, c)
	case KindRollback:
		return rollbackRule(p, c)
	}
	return nil
}

// retireRule: inventory(N) = inventory(N-1) - retired, by group, kind,
// namespace and name.
func retireRule(p, c *Receipt) []string {
	var out []string
	gone := make([]canon.Identity, len(c.Retired))
	for i, x := range c.Retired {
		gone[i] = x.ID
	}
	if unknown := canon.Missing(gone, p.Inventory); len(unknown) > 0 {
		out = append(out, fmt.Sprintf("generation %d: retire lists %d object(s) generation %d did not deploy: %s", c.Generation, len(unknown), p.Generation, canon.List(unknown, 10)))
	}
	if kept := canon.Missing(c.Inventory, canon.Missing(p.Inventory, gone)); len(kept) > 0 {
		out = append(out, fmt.Sprintf("generation %d: retire adds %d object(s): %s", c.Generation, len(kept), canon.List(kept, 10)))
	}
	if dropped := canon.Missing(canon.Missing(p.Inventory, gone), c.Inventory); len(dropped) > 0 {
		out = append(out, fmt.Sprintf("generation %d: retire drops %d object(s) of generation %d it does not list as retired: %s", c.Generation, len(dropped), p.Generation, canon.List(dropped, 10)))
	}
	if kept := canon.Missing(gone, canon.Missing(gone, c.Inventory)); len(kept) > 0 {
		out = append(out, fmt.Sprintf("generation %d: retire lists %d object(s) it still deploys: %s", c.Generation, len(kept), canon.List(kept, 10)))
	}
	return out
}

// rollbackRule: a rollback deploys exactly generation p's previous
// deployment, with the same objects.
func rollbackRule(p, c *Receipt) []string {
	var out []string
	switch {
	case p.PreviousDeployment == nil && c.Transition.Supersedes == nil:
		out = append(out, fmt.Sprintf("generation %d: rollback, but generation %d has no previous deployment to roll back to", c.Generation, p.Generation))
	case c.Transition.Supersedes != nil && c.Deployment != p.Deployment:
		out = append(out, fmt.Sprintf("generation %d: rollback superseding generation(s) %v, but its deployment is not generation %d's, the last committed", c.Generation, SupersededGenerations(c.Transition), p.Generation))
	case c.Transition.Supersedes == nil && c.Deployment != *p.PreviousDeployment:
		out = append(out, fmt.Sprintf("generation %d: rollback, but its deployment is not generation %d's previous deployment", c.Generation, p.Generation))
	}
	if !canon.SameObjects(p.Inventory, c.Inventory) {
		var diff []string
		if dropped := canon.Missing(p.Inventory, c.Inventory); len(dropped) > 0 {
			diff = append(diff, "drops "+canon.List(dropped, 10))
		}
		if added := canon.Missing(c.Inventory, p.Inventory); len(added) > 0 {
			diff = append(diff, "adds "+canon.List(added, 10))
		}
		out = append(out, fmt.Sprintf("generation %d: rollback changes the objects of generation %d: it %s", c.Generation, p.Generation, strings.Join(diff, " and ")))
	}
	return out
}

// supersededLink judges the generations between p and c, receipts of one
// history with no receipt between them (docs/receipts.md §5.2 step 2): none
// is the plain link; generations c declares superseded are accepted, each
// with a note; any other missing generation is a gap, and a generation c
// declares superseded that has a receipt (p) breaks the chain.
func supersededLink(p, c *Receipt, bad map[int64]string) (notes, reasons []string) {
	ss := c.Transition.Supersedes
	first := c.Generation - int64(len(ss)) // the oldest generation c supersedes
	if first <= p.Generation && len(ss) > 0 {
		return nil, []string{fmt.Sprintf("generation %d declares it superseded generation %d, which has a receipt here (%s): a generation with a receipt was committed and was never superseded", c.Generation, p.Generation, p.SelfDigest)}
	}
	if first > p.Generation+1 {
		return nil, []string{gap(p.Generation+1, first-1, bad)}
	}
	for _, s := range ss {
		notes = append(notes, fmt.Sprintf("generation %d (%s %s, preflight %s) has no receipt: it never committed, and generation %d (%s %s) superseded it at %s (by its applier's clock)",
			s.Generation, s.Kind, s.Version, s.PreflightDigest, c.Generation, c.Transition.Kind, c.Deployment.Version, s.At))
	}
	return notes, nil
}

// gap describes generations from to to, which no parsed receipt holds:
// missing, except those whose file is here but does not verify.
func gap(from, to int64, bad map[int64]string) string {
	var parts []string
	next := from
	for _, g := range slices.Sorted(maps.Keys(bad)) {
		if g < from || g > to {
			continue
		}
		if g > next {
			parts = append(parts, missing(next, g-1))
		}
		parts = append(parts, fmt.Sprintf("generation %d is in %q, which does not verify (see its row)", g, bad[g]))
		next = g + 1
	}
	if next <= to {
		parts = append(parts, missing(next, to))
	}
	return strings.Join(parts, "; ")
}

func missing(from, to int64) string {
	if from == to {
		return fmt.Sprintf("generation %d is missing", from)
	}
	return fmt.Sprintf("generations %d to %d are missing", from, to)
}

func checkRelease(rel ReleaseDigests, newest *Receipt, stated *Rendered) *ReleaseVerdict {
	v := &ReleaseVerdict{Release: rel, Verdict: VerdictOK}
	failf := func(format string, args ...any) {
		v.Verdict = VerdictFail
		v.Reasons = append(v.Reasons, fmt.Sprintf(format, args...))
	}
	if newest == nil {
		failf("no receipt could be read to compare the release with")
		return v
	}
	v.Generation = newest.Generation
	d := newest.Deployment
	if rel.Version != "" && rel.Version != d.Version {
		failf("release version %q is not the version %q of generation %d", rel.Version, d.Version, newest.Generation)
	}
	if rel.LockDigest != d.LockDigest {
		failf("release lock digest %q is not the lock digest %q of generation %d", rel.LockDigest, d.LockDigest, newest.Generation)
	}
	if rel.InventoryDigest != d.InventoryDigest {
		failf("release inventory digest %q is not the inventory digest %q of generation %d", rel.InventoryDigest, d.InventoryDigest, newest.Generation)
	}
	if stated != nil && rel.Rendered != nil {
		v.Reasons = append(v.Reasons, statedReleaseRule(rel.Rendered, stated, newest.Generation)...)
		if len(v.Reasons) > 0 {
			v.Verdict = VerdictFail
		}
	}
	return v
}
