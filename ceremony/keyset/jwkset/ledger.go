package jwkset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"unicode/utf8"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// Limits and identity of the keyset ledger (docs/keyset.md, "The ledger").
const (
	// LedgerSchema is the schema member of a ledger this version writes.
	LedgerSchema = "qinglong/keyset-ledger@v2"
	// LedgerSchemaV1 is the schema of a ledger written before thumbprints
	// were recorded: still read, carried forward (CarryForward) by the
	// next write, never written.
	LedgerSchemaV1 = "qinglong/keyset-ledger@v1"
	// MaxLedgerGenerations is the most generations one ledger records.
	MaxLedgerGenerations = 4096
	// MaxLedgerBytes bounds a ledger document (a Secret holds at most 1 MiB).
	MaxLedgerBytes = 768 << 10
)

// Ledger is the durable memory of every published generation: the highest
// generation in full (its keys, so that an implicit key removal is seen,
// and its revokedKids, the revoked set), the digest of every generation
// ever published, in increasing generation order, the last being Current's,
// and (schema v2) the RFC 7638 thumbprint of every active key and of every
// revoked key the ledger saw, so a revoked key is refused under any key ID.
type Ledger struct {
	Schema      string        `json:"schema"`
	Current     *Keyset       `json:"current"`
	Generations []LedgerEntry `json:"generations"`
	// Keys is nil in a v1 ledger (see CarryForward).
	Keys []LedgerKey `json:"keys,omitempty"`
}

// LedgerEntry records one published generation by its digest.
type LedgerEntry struct {
	Generation int64  `json:"generation"`
	Digest     string `json:"digest"`
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// NewLedger is the ledger of a first published generation; prior, when
// not nil, is a generation published before the ledger existed (adopted),
// which first must be a valid predecessor of.
func NewLedger(prior, first *Keyset) (*Ledger, error) {
	l := &Ledger{Schema: LedgerSchema}
	if prior != nil {
		d, err := prior.Digest()
		if err != nil {
			return nil, err
		}
		l.Current, l.Generations, l.Keys = prior, []LedgerEntry{{prior.Generation, d}}, ledgerKeys(nil, prior)
		next, _, err := l.Admit(first)
		return next, err
	}
	d, err := first.Digest()
	if err != nil {
		return nil, err
	}
	l.Current, l.Generations, l.Keys = first, []LedgerEntry{{first.Generation, d}}, ledgerKeys(nil, first)
	return l, l.Validate()
}

// Highest is the highest published generation.
func (l *Ledger) Highest() LedgerEntry { return l.Generations[len(l.Generations)-1] }

// Lookup is the digest recorded for generation gen.
func (l *Ledger) Lookup(gen int64) (string, bool) {
	i, ok := slices.BinarySearchFunc(l.Generations, gen, func(e LedgerEntry, g int64) int {
		switch {
		case e.Generation < g:
			return -1
		case e.Generation > g:
			return 1
		}
		return 0
	})
	if !ok {
		return "", false
	}
	return l.Generations[i].Digest, true
}

// Admit judges next against the ledger, before anything is written
// (docs/keyset.md, "Publishing"): a generation below the highest is a
// rollback, the highest generation with another digest a rewrite, and a
// higher generation must be a valid successor (CheckSuccessor) of the
// ledger's current generation — so no key leaves without being revoked
// and no revocation is un-appended, even when the ledger is the only
// memory left — and no key whose thumbprint the ledger records as revoked
// is active in next, under any key ID (also on a rerun). A v1 ledger is
// carried forward first (CarryForward). The highest generation itself is
// admitted with the ledger unchanged but for that (recorded true: a
// rerun); a higher one returns the ledger with it appended (l is not
// modified). Violations are fail.Conflict; a full ledger is fail.Invalid.
func (l *Ledger) Admit(next *Keyset) (*Ledger, bool, error) {
	nd, err := next.Digest()
	if err != nil {
		return nil, false, err
	}
	if l, err = l.CarryForward(); err != nil {
		return nil, false, err
	}
	high := l.Highest()
	switch {
	case next.Generation < high.Generation:
		again := ""
		if d, ok := l.Lookup(next.Generation); ok && d == nd {
			again = " (it was published before; publishing it again is a rollback)"
		}
		return nil, false, conflictf("generation %d is below the ledger's highest generation %d%s: a keyset never goes back; publish a generation above %d", next.Generation, high.Generation, again, high.Generation)
	case next.Generation == high.Generation:
		if nd != high.Digest {
			return nil, false, conflictf("generation %d is already published with digest %s, this one has %s: a published generation never changes; publish the change as generation %d", next.Generation, high.Digest, nd, high.Generation+1)
		}
		if err := l.checkRevived(next); err != nil {
			return nil, false, fmt.Errorf("against the ledger: %w", err)
		}
		return l, true, nil
	}
	if err := CheckSuccessor(l.Current, next); err != nil {
		return nil, false, fmt.Errorf("against the ledger's generation %d: %w", high.Generation, err)
	}
	if err := l.checkRevived(next); err != nil {
		return nil, false, fmt.Errorf("against the ledger: %w", err)
	}
	if len(l.Generations) >= MaxLedgerGenerations {
		return nil, false, fail.Errorf(fail.Invalid, "keyset ledger: full (%d generations recorded); it cannot record generation %d", MaxLedgerGenerations, next.Generation)
	}
	out := &Ledger{Schema: LedgerSchema, Current: next, Generations: append(slices.Clip(l.Generations), LedgerEntry{next.Generation, nd}), Keys: ledgerKeys(l, next)}
	return out, false, out.Validate()
}

// NewlyRevoked lists the key IDs next revokes that base (the generation a
// host may hold now; nil: none) does not, in next's order.
func NewlyRevoked(base, next *Keyset) []string {
	var out []string
	for _, kid := range next.RevokedKids {
		if base == nil || !slices.Contains(base.RevokedKids, kid) {
			out = append(out, kid)
		}
	}
	return out
}

// Validate checks the ledger's rules: the schema (v2, or v1 read from
// before thumbprints), a valid current generation, 1 to
// MaxLedgerGenerations entries with strictly increasing generations and
// well-formed digests, the last entry being the current generation and its
// digest, the keys member matching current (validateKeys), and the size
// bound.
func (l *Ledger) Validate() error {
	if l.Schema != LedgerSchema && l.Schema != LedgerSchemaV1 {
		return ledgerf("schema: %q, want %q (or %q, written before thumbprints)", l.Schema, LedgerSchema, LedgerSchemaV1)
	}
	if l.Current == nil {
		return ledgerf("current: missing")
	}
	if err := l.Current.Validate(); err != nil {
		return ledgerf("current: %w", err)
	}
	n := len(l.Generations)
	if n == 0 || n > MaxLedgerGenerations {
		return ledgerf("generations: %d entries, want 1 to %d", n, MaxLedgerGenerations)
	}
	for i, e := range l.Generations {
		if e.Generation < 1 || e.Generation > MaxGeneration {
			return ledgerf("generations[%d].generation: %d is out of range 1 to %d", i, e.Generation, int64(MaxGeneration))
		}
		if i > 0 && e.Generation <= l.Generations[i-1].Generation {
			return ledgerf("generations[%d].generation: %d does not increase over %d", i, e.Generation, l.Generations[i-1].Generation)
		}
		if !digestRE.MatchString(e.Digest) {
			return ledgerf("generations[%d].digest: %q is not sha256:<64 lowercase hex>", i, e.Digest)
		}
	}
	d, err := l.Current.Digest()
	if err != nil {
		return err
	}
	if h := l.Highest(); h.Generation != l.Current.Generation || h.Digest != d {
		return ledgerf("generations: the last entry (%d, %s) is not the current generation (%d, %s)", h.Generation, h.Digest, l.Current.Generation, d)
	}
	if err := l.validateKeys(); err != nil {
		return err
	}
	b, err := l.canonical()
	if err != nil {
		return err
	}
	if len(b) > MaxLedgerBytes {
		return ledgerf("%d bytes, more than %d", len(b), MaxLedgerBytes)
	}
	return nil
}

// Bytes is the ledger's document: its RFC 8785 canonical JSON.
func (l *Ledger) Bytes() ([]byte, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return l.canonical()
}

func (l *Ledger) canonical() ([]byte, error) {
	c := *l
	c.Current = l.Current.normal()
	return canon.Canonical(&c)
}

// ParseLedger reads a ledger document strictly: at most MaxLedgerBytes of
// UTF-8 JSON without duplicate members, exactly the members schema,
// current (a keyset generation under every rule of Parse), generations
// (objects of exactly generation and digest) and, in v2 only, keys
// (objects of exactly kid, thumbprint and revokedIn), every rule of Validate, and
// the bytes equal to the ledger's canonical JSON. Errors are fail.Invalid;
// a caller reading a ledger from a cluster treats them as tamper.
func ParseLedger(data []byte) (*Ledger, error) {
	if len(data) > MaxLedgerBytes {
		return nil, ledgerf("%d bytes, more than %d", len(data), MaxLedgerBytes)
	}
	if !utf8.Valid(data) {
		return nil, ledgerf("not valid UTF-8")
	}
	if err := checkJSON(data); err != nil {
		return nil, ledgerf("%w", err)
	}
	var raw struct {
		Schema      *string         `json:"schema"`
		Current     json.RawMessage `json:"current"`
		Generations *[]LedgerEntry  `json:"generations"`
		Keys        []LedgerKey     `json:"keys"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, ledgerf("%v", err)
	}
	if raw.Schema == nil || raw.Current == nil || raw.Generations == nil {
		return nil, ledgerf("the members schema, current and generations are all required")
	}
	cur, err := Parse(raw.Current)
	if err != nil {
		return nil, ledgerf("current: %w", err)
	}
	l := &Ledger{Schema: *raw.Schema, Current: cur, Generations: *raw.Generations, Keys: raw.Keys}
	want, err := l.Bytes()
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(want, data) {
		return nil, ledgerf("not in canonical form (RFC 8785): a ledger is written only in canonical JSON")
	}
	return l, nil
}

func ledgerf(format string, args ...any) error {
	return fail.Errorf(fail.Invalid, "keyset ledger: "+format, args...)
}
