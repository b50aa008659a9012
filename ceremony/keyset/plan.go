package keyset

import (
	"fmt"
	"strings"

	"github.com/qinglong/kubectl-ql3/ceremony/keyset/jwkset"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// State is what a publisher read: the ledger and the keyset Secret's
// generation (nil when absent).
type State struct {
	Ledger *jwkset.Ledger
	Keyset *jwkset.Keyset
	// KeysetManaged: the keyset Secret carries kubectl-ql3's labels.
	KeysetManaged bool
}

// Request is one publish.
type Request struct {
	// Next is the generation to publish.
	Next *jwkset.Keyset
	// Previous, when set, is the generation the operator expects the
	// ledger to hold as its highest (or, on a rerun whose ledger write
	// landed, the one recorded just before Next); with no ledger it adopts
	// a keyset Secret created before the first publish.
	Previous *jwkset.Keyset
	// ConfirmOverlapObserved is the operator's word that every replica has
	// observed a generation holding the keys that replace the ones Next
	// newly revokes.
	ConfirmOverlapObserved bool
}

// Plan is a judged publish: what to write, in order (ledger, then keyset).
type Plan struct {
	// Ledger is the ledger after the publish.
	Ledger *jwkset.Ledger
	// WriteLedger: the ledger does not record Next yet (create or update).
	WriteLedger bool
	// WriteKeyset: the keyset Secret does not hold Next yet (or is not
	// labelled as ours).
	WriteKeyset bool
	// NewlyRevoked are the key IDs Next revokes that the keyset Secret (or,
	// without one, the ledger's highest generation) did not.
	NewlyRevoked []string
	// Adopted: a keyset Secret published before the ledger existed was
	// recorded as the ledger's first generation.
	Adopted bool
	// Behind: the keyset Secret held an older recorded generation than the
	// ledger's highest (an earlier publish stopped between its two writes).
	Behind bool
	// CarriedForward: the ledger was written before thumbprints were
	// recorded (v1); it is written in the current schema even on a rerun.
	CarriedForward bool
}

// Decide judges a publish against what was read, before any write. The
// keyset Secret must hold a generation the ledger records with the same
// digest (else tamper); Next is judged by the ledger alone
// (jwkset.Ledger.Admit: also no key whose thumbprint was ever revoked,
// under any key ID, whatever ConfirmOverlapObserved says); a publish that
// newly revokes a key the keyset Secret still trusted needs
// ConfirmOverlapObserved. A v1 ledger is carried forward with the key
// material the keyset Secret and Previous show (both recorded by it).
func Decide(s State, r Request) (*Plan, error) {
	nd, err := r.Next.Digest()
	if err != nil {
		return nil, err
	}
	p := &Plan{}
	var base *jwkset.Keyset // what the host may hold now
	if l := s.Ledger; l != nil {
		high := l.Highest()
		if k := s.Keyset; k != nil {
			if err := checkRecorded(l, k, s.KeysetManaged); err != nil {
				return nil, err
			}
			p.Behind = k.Generation < high.Generation
			base = k
		}
		if r.Previous != nil {
			if err := checkPrevious(l, r.Previous, r.Next.Generation, nd); err != nil {
				return nil, err
			}
		}
		p.CarriedForward = l.Schema != jwkset.LedgerSchema
		if l, err = l.CarryForward(s.Keyset, r.Previous); err != nil {
			return nil, err
		}
		next, recorded, err := l.Admit(r.Next)
		if err != nil {
			return nil, err
		}
		p.Ledger, p.WriteLedger = next, !recorded || p.CarriedForward
		if base == nil && !recorded {
			base = l.Current
		}
	} else {
		switch k := s.Keyset; {
		case k != nil && s.KeysetManaged:
			return nil, fail.Errorf(fail.Tamper, "keyset Secret %s holds generation %d published by kubectl-ql3, but the ledger Secret %s is missing: the generation is missing from the ledger (the ledger was removed); restore the ledger before publishing", KeysetSecret, k.Generation, LedgerSecret)
		case k != nil:
			kd, err := k.Digest()
			if err != nil {
				return nil, err
			}
			pd := ""
			if r.Previous != nil {
				if pd, err = r.Previous.Digest(); err != nil {
					return nil, err
				}
			}
			if pd != kd {
				return nil, fail.Errorf(fail.Conflict, "keyset Secret %s holds generation %d (digest %s) that kubectl-ql3 did not publish and there is no ledger yet: to adopt it as the ledger's first generation, give --previous with exactly that keyset file", KeysetSecret, k.Generation, kd)
			}
			if p.Ledger, err = jwkset.NewLedger(k, r.Next); err != nil {
				return nil, err
			}
			p.Adopted, base = true, k
		default:
			if r.Previous != nil {
				return nil, fail.Errorf(fail.Conflict, "--previous names generation %d, but nothing is published in this namespace (no ledger Secret %s, no keyset Secret %s): leave out --previous to publish the first generation", r.Previous.Generation, LedgerSecret, KeysetSecret)
			}
			if p.Ledger, err = jwkset.NewLedger(nil, r.Next); err != nil {
				return nil, err
			}
		}
		p.WriteLedger = true
	}
	kd := ""
	if s.Keyset != nil {
		if kd, err = s.Keyset.Digest(); err != nil {
			return nil, err
		}
	}
	p.WriteKeyset = s.Keyset == nil || kd != nd || !s.KeysetManaged
	if base != nil {
		p.NewlyRevoked = jwkset.NewlyRevoked(base, r.Next)
	}
	if p.WriteKeyset && len(p.NewlyRevoked) > 0 && !r.ConfirmOverlapObserved {
		return nil, fail.Errorf(fail.Invalid, "generation %d revokes %s, which the published keyset (generation %d) still trusts: publish it only after every replica has observed a generation holding their replacement keys (a replica that has not would reject the new signatures); then confirm with --confirm-overlap-observed. Nothing was written", r.Next.Generation, strings.Join(p.NewlyRevoked, ", "), base.Generation)
	}
	return p, nil
}

// checkRecorded: with a ledger, the keyset Secret must be ours and hold a
// generation the ledger records with the recorded digest; otherwise it was
// written outside the ledger (tamper).
func checkRecorded(l *jwkset.Ledger, k *jwkset.Keyset, managed bool) error {
	kd, err := k.Digest()
	if err != nil {
		return err
	}
	rec, ok := l.Lookup(k.Generation)
	switch {
	case !managed:
		return fail.Errorf(fail.Tamper, "keyset Secret %s does not carry the label %s=%s although a ledger exists: it was replaced outside kubectl ql3 keyset publish; restore it from a recorded generation or investigate", KeysetSecret, LabelManagedBy, ManagedBy)
	case !ok:
		return fail.Errorf(fail.Tamper, "keyset Secret %s holds generation %d (digest %s), which the ledger does not record (its highest is %d): it was not published through the ledger; investigate before publishing", KeysetSecret, k.Generation, kd, l.Highest().Generation)
	case rec != kd:
		return fail.Errorf(fail.Tamper, "keyset Secret %s holds generation %d with digest %s, but the ledger records digest %s for it: it was rewritten outside the ledger; investigate before publishing", KeysetSecret, k.Generation, kd, rec)
	}
	return nil
}

// checkPrevious: --previous must be the ledger's highest generation, or,
// when the ledger's highest already is Next (a rerun), the one recorded
// just before it.
func checkPrevious(l *jwkset.Ledger, prev *jwkset.Keyset, nextGen int64, nextDigest string) error {
	pd, err := prev.Digest()
	if err != nil {
		return err
	}
	want := l.Highest()
	if want.Generation == nextGen && want.Digest == nextDigest && len(l.Generations) > 1 {
		if before := l.Generations[len(l.Generations)-2]; before.Generation == prev.Generation && before.Digest == pd {
			return nil
		}
	}
	if want.Generation == prev.Generation && want.Digest == pd {
		return nil
	}
	return fail.Errorf(fail.Conflict, "--previous is generation %d (digest %s), but the ledger's highest generation is %d (digest %s): someone published since the change was reviewed; review it against generation %d. Nothing was written", prev.Generation, pd, want.Generation, want.Digest, want.Generation)
}

// describe is a ledger's highest generation, for messages.
func describe(l *jwkset.Ledger) string {
	h := l.Highest()
	return fmt.Sprintf("generation %d (digest %s)", h.Generation, h.Digest)
}
