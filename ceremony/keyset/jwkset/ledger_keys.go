package jwkset

import (
	"fmt"
	"regexp"
)

// LedgerKey records one key ID the ledger knows (docs/keyset.md, "The
// ledger document"): an active key of current with its RFC 7638
// thumbprint, or a revoked key ID with the thumbprint of the key it named
// and the generation that revoked it. Thumbprint and RevokedIn of a
// revoked key ID are nil when the ledger cannot know them: revoked before
// the ledger's first generation, or before the ledger recorded thumbprints
// (schema v1) and not recoverable when it was carried forward; a kid
// revoked without ever being active has no thumbprint either.
type LedgerKey struct {
	Kid        string  `json:"kid"`
	Thumbprint *string `json:"thumbprint"`
	RevokedIn  *int64  `json:"revokedIn"`
}

var thumbprintRE = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// ledgerKeys is the keys member of a ledger whose current generation is
// next, judged after prev (nil: next is the ledger's first generation, or
// a v1 ledger's current being carried forward, whose revocations the
// ledger cannot date). A kid next revokes keeps prev's record; a newly
// revoked kid gets next's generation and, if it was active in prev's
// current, its key's thumbprint.
func ledgerKeys(prev *Ledger, next *Keyset) []LedgerKey {
	out := make([]LedgerKey, 0, len(next.Keys)+len(next.RevokedKids))
	for _, j := range next.Keys {
		out = append(out, LedgerKey{Kid: j.Kid, Thumbprint: ptr(j.Thumbprint())})
	}
	for _, kid := range next.RevokedKids {
		e := LedgerKey{Kid: kid}
		if prev != nil {
			if old, ok := prev.revokedKey(kid); ok {
				e = old
			} else {
				e.RevokedIn = ptr(next.Generation)
				if j, ok := prev.Current.key(kid); ok {
					e.Thumbprint = ptr(j.Thumbprint())
				}
			}
		}
		out = append(out, e)
	}
	return out
}

// CarryForward is the ledger in the current schema. A ledger written
// before thumbprints were recorded (schema v1) gets its keys member: the
// thumbprints of current's keys (the ledger holds them in full), and for
// each revoked key ID the thumbprint of the key it named in one of known —
// generations the ledger records with the same digest, such as the keyset
// Secret's when it is behind — or none when no such generation shows it;
// no revocation gets a generation, which v1 did not record. A ledger
// already in the current schema is returned as it is.
func (l *Ledger) CarryForward(known ...*Keyset) (*Ledger, error) {
	if l.Schema == LedgerSchema {
		return l, nil
	}
	out := &Ledger{Schema: LedgerSchema, Current: l.Current, Generations: l.Generations, Keys: ledgerKeys(nil, l.Current)}
	for _, k := range known {
		if k == nil {
			continue
		}
		d, err := k.Digest()
		if err != nil {
			return nil, err
		}
		if rec, ok := l.Lookup(k.Generation); !ok || rec != d {
			return nil, ledgerf("generation %d (digest %s) is not recorded by the ledger: it cannot show a revoked key", k.Generation, d)
		}
		for i := len(l.Current.Keys); i < len(out.Keys); i++ {
			if j, ok := k.key(out.Keys[i].Kid); ok && out.Keys[i].Thumbprint == nil {
				out.Keys[i].Thumbprint = ptr(j.Thumbprint())
			}
		}
	}
	return out, out.Validate()
}

// checkRevived refuses a generation holding a key whose thumbprint the
// ledger records as revoked, under whatever key ID (fail.Conflict).
func (l *Ledger) checkRevived(next *Keyset) error {
	for _, e := range l.revokedKeys() {
		if e.Thumbprint == nil {
			continue
		}
		for _, j := range next.Keys {
			if j.Thumbprint() != *e.Thumbprint {
				continue
			}
			when := "before the ledger recorded when"
			if e.RevokedIn != nil {
				when = fmt.Sprintf("in generation %d", *e.RevokedIn)
			}
			return revivedf(j.Kid, next.Generation, e.Kid, when, *e.Thumbprint)
		}
	}
	return nil
}

// UnknownRevoked lists the revoked key IDs whose key the ledger cannot
// know (no thumbprint): a key they named could come back under a new key
// ID without the ledger seeing it.
func (l *Ledger) UnknownRevoked() []string {
	out := []string{}
	for _, e := range l.revokedKeys() {
		if e.Thumbprint == nil {
			out = append(out, e.Kid)
		}
	}
	return out
}

// validateKeys checks the keys member against current: v1 has none; v2
// has one entry per active key (in order, with its thumbprint and no
// generation), then one per revoked key ID (in order), each thumbprint
// nil or well-formed, each generation nil or a recorded generation other
// than the first (the ledger dates only what it saw revoked after its
// first generation), the nil ones first and the others not decreasing
// (revocations only append).
func (l *Ledger) validateKeys() error {
	if l.Schema == LedgerSchemaV1 {
		if l.Keys != nil {
			return ledgerf("keys: a %s ledger has no keys member", LedgerSchemaV1)
		}
		return nil
	}
	nk, cur := len(l.Current.Keys), l.Current
	if len(l.Keys) != nk+len(cur.RevokedKids) {
		return ledgerf("keys: %d entries, want %d (one per active and per revoked key ID of current)", len(l.Keys), nk+len(cur.RevokedKids))
	}
	var last int64
	for i, e := range l.Keys {
		field := fmt.Sprintf("keys[%d]", i)
		if i < nk {
			if tp := cur.Keys[i].Thumbprint(); e.Kid != cur.Keys[i].Kid || e.Thumbprint == nil || *e.Thumbprint != tp || e.RevokedIn != nil {
				return ledgerf("%s: want {kid %q, thumbprint %s, revokedIn null}, the active key current.keys[%d]", field, cur.Keys[i].Kid, tp, i)
			}
			continue
		}
		if kid := cur.RevokedKids[i-nk]; e.Kid != kid {
			return ledgerf("%s.kid: %q, want %q (current.revokedKids[%d])", field, e.Kid, kid, i-nk)
		}
		if e.Thumbprint != nil && !thumbprintRE.MatchString(*e.Thumbprint) {
			return ledgerf("%s.thumbprint: %q is not 43 characters of base64url (a SHA-256 JWK thumbprint)", field, *e.Thumbprint)
		}
		if e.RevokedIn == nil {
			if last != 0 {
				return ledgerf("%s.revokedIn: null after a revocation recorded in generation %d", field, last)
			}
			continue
		}
		if _, ok := l.Lookup(*e.RevokedIn); !ok || *e.RevokedIn < last {
			return ledgerf("%s.revokedIn: %d is not a recorded generation at or after %d", field, *e.RevokedIn, last)
		}
		if first := l.Generations[0].Generation; *e.RevokedIn == first {
			return ledgerf("%s.revokedIn: %d is the ledger's first generation, which it cannot date a revocation in: a key ID it already revokes is recorded with revokedIn null", field, first)
		}
		last = *e.RevokedIn
	}
	return nil
}

// revokedKeys are the entries of the revoked key IDs (none in v1).
func (l *Ledger) revokedKeys() []LedgerKey { return l.Keys[min(len(l.Current.Keys), len(l.Keys)):] }

// revokedKey is the record of revoked key ID kid.
func (l *Ledger) revokedKey(kid string) (LedgerKey, bool) {
	for _, e := range l.revokedKeys() {
		if e.Kid == kid {
			return e, true
		}
	}
	return LedgerKey{}, false
}

// key is the active key kid.
func (k *Keyset) key(kid string) (JWK, bool) {
	for _, j := range k.Keys {
		if j.Kid == kid {
			return j, true
		}
	}
	return JWK{}, false
}

func ptr[T any](v T) *T { return &v }
