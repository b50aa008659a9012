package keyset

import (
	"bytes"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// Options are a publisher's clients.
type Options struct {
	// Namespace holds both Secrets.
	Namespace string
	// Secrets is the Secret client of Namespace (cs.CoreV1().Secrets(ns)).
	Secrets cas.Client[*corev1.Secret]
	// Review answers the permission review (access.NewReview).
	Review *access.Review
	// Hint ends a missing-permission error (where the least privilege is
	// printed).
	Hint string
	// Say reports progress; nil is quiet.
	Say func(format string, args ...any)
}

// Action is what a publish did to one Secret.
type Action string

// The actions of Result.
const (
	Created   Action = "created"
	Updated   Action = "updated"
	Unchanged Action = "unchanged"
)

// Result is a completed publish.
type Result struct {
	Namespace  string `json:"namespace"`
	Generation int64  `json:"generation"`
	Digest     string `json:"digest"`
	// Ledger and Keyset say what happened to each Secret.
	Ledger SecretResult `json:"ledger"`
	Keyset SecretResult `json:"keyset"`
	// LedgerGenerations is how many generations the ledger records.
	LedgerGenerations int `json:"ledgerGenerations"`
	// NewlyRevoked are the key IDs this publish revoked on the keyset
	// Secret; they are revoked on a replica only once it has loaded it.
	NewlyRevoked []string `json:"newlyRevoked"`
	// RevokedWithoutThumbprint are the revoked key IDs whose key the ledger
	// cannot know (revoked before it recorded thumbprints, or never
	// active): their key material coming back under a new key ID cannot be
	// refused.
	RevokedWithoutThumbprint []string `json:"revokedWithoutThumbprint"`
	// LedgerCarriedForward: the ledger was rewritten from schema v1, which
	// recorded no thumbprints.
	LedgerCarriedForward bool `json:"ledgerCarriedForward,omitempty"`
	Adopted              bool `json:"adopted,omitempty"`
	// Converged: the keyset Secret was behind the ledger and now holds its
	// highest generation.
	Converged bool `json:"converged,omitempty"`
}

// SecretResult is one Secret's outcome.
type SecretResult struct {
	Name   string `json:"name"`
	Action Action `json:"action"`
	// Settled: the write's answer was lost (or a 409) and reading the
	// Secret showed it held exactly our intent.
	Settled bool `json:"settled,omitempty"`
}

func (o *Options) say(format string, args ...any) {
	if o.Say != nil {
		o.Say(format, args...)
	}
}

func (o *Options) access(verb, name string) access.Access {
	return access.Access{Verb: verb, Resource: "secrets", Namespace: o.Namespace, Name: name}
}

// Publish publishes r.Next to o.Namespace (docs/keyset.md, "Publishing"):
// review the reads; read the keyset Secret, then the ledger (in this
// order, so a concurrent publish can never make the keyset Secret look
// ahead of the ledger); judge everything (Decide); review the writes;
// write the ledger, then the keyset Secret, each a compare-and-swap from
// the read that was judged. It never claims a revocation is in effect: only
// replicas can observe that.
func Publish(ctx context.Context, o Options, r Request) (*Result, error) {
	ns := o.Namespace
	if err := access.Require(ctx, o.Review, []access.Access{o.access("get", KeysetSecret), o.access("get", LedgerSecret)}, o.Hint); err != nil {
		return nil, err
	}
	ksWhat, lgWhat := "keyset Secret "+ns+"/"+KeysetSecret, "keyset ledger "+ns+"/"+LedgerSecret
	curKeyset, ksPresent, err := cas.Read(ctx, o.Secrets, KeysetSecret, ksWhat)
	if err != nil {
		return nil, err
	}
	curLedger, lgPresent, err := cas.Read(ctx, o.Secrets, LedgerSecret, lgWhat)
	if err != nil {
		return nil, err
	}
	var st State
	if lgPresent {
		if st.Ledger, err = ParseLedgerSecret(curLedger); err != nil {
			return nil, err
		}
	}
	if ksPresent {
		if st.Keyset, st.KeysetManaged, err = ParseKeysetSecret(curKeyset); err != nil {
			return nil, err
		}
	}
	plan, err := Decide(st, r)
	if err != nil {
		return nil, err
	}
	nd, err := r.Next.Digest()
	if err != nil {
		return nil, err
	}
	res := &Result{Namespace: ns, Generation: r.Next.Generation, Digest: nd, NewlyRevoked: plan.NewlyRevoked, Adopted: plan.Adopted,
		Ledger: SecretResult{Name: LedgerSecret, Action: Unchanged}, Keyset: SecretResult{Name: KeysetSecret, Action: Unchanged},
		LedgerGenerations: len(plan.Ledger.Generations), RevokedWithoutThumbprint: plan.Ledger.UnknownRevoked(), LedgerCarriedForward: plan.CarriedForward}
	if res.NewlyRevoked == nil {
		res.NewlyRevoked = []string{}
	}

	var writes []access.Access
	if plan.WriteLedger {
		writes = append(writes, o.writeAccess(lgPresent, LedgerSecret))
	}
	if plan.WriteKeyset {
		writes = append(writes, o.writeAccess(ksPresent, KeysetSecret))
	}
	if err := access.Require(ctx, o.Review, writes, o.Hint); err != nil {
		return nil, err
	}

	if plan.WriteLedger {
		desired, err := LedgerSecretFor(ns, plan.Ledger)
		if err != nil {
			return nil, err
		}
		if lgPresent {
			desired.ResourceVersion = curLedger.ResourceVersion
		}
		want := desired.Data[LedgerKey]
		w := cas.Write[*corev1.Secret]{
			Client: o.Secrets, What: lgWhat, Desired: desired, Create: !lgPresent, FieldManager: FieldManager,
			Policy: cas.Resend, Say: o.Say,
			Validate: func(cur *corev1.Secret, present bool) error {
				if !present {
					return nil
				}
				_, err := ParseLedgerSecret(cur)
				return err
			},
			Landed: func(cur *corev1.Secret) bool {
				_, err := ParseLedgerSecret(cur)
				return err == nil && bytes.Equal(cur.Data[LedgerKey], want)
			},
			Describe: func(cur *corev1.Secret, present bool) string {
				if !present {
					return "the ledger was removed"
				}
				l, err := ParseLedgerSecret(cur)
				if err != nil {
					return err.Error()
				}
				return "another publisher moved the ledger to " + describe(l) + "; judge the keyset against it and publish again"
			},
			Refused: o.refused,
		}
		got, err := w.Do(ctx)
		if err != nil {
			return nil, fmt.Errorf("publish generation %d: %w", r.Next.Generation, err)
		}
		res.Ledger.Action, res.Ledger.Settled = action(lgPresent), got.Settled
		o.say("%s: records generation %d (digest %s)", lgWhat, r.Next.Generation, nd)
	}

	if plan.WriteKeyset {
		var base *corev1.Secret
		if ksPresent {
			base = curKeyset
		}
		desired, err := KeysetSecretFor(ns, r.Next, base)
		if err != nil {
			return nil, err
		}
		w := cas.Write[*corev1.Secret]{
			Client: o.Secrets, What: ksWhat, Desired: desired, Create: !ksPresent, FieldManager: FieldManager,
			Policy: cas.Resend, Say: o.Say,
			Validate: func(cur *corev1.Secret, present bool) error {
				if !present {
					return nil
				}
				_, _, err := ParseKeysetSecret(cur)
				return err
			},
			Landed: func(cur *corev1.Secret) bool {
				k, managed, err := ParseKeysetSecret(cur)
				if err != nil || !managed {
					return false
				}
				d, err := k.Digest()
				return err == nil && d == nd
			},
			Describe: func(cur *corev1.Secret, present bool) string {
				if !present {
					return "the keyset Secret was removed"
				}
				k, _, err := ParseKeysetSecret(cur)
				if err != nil {
					return err.Error()
				}
				return fmt.Sprintf("the keyset Secret now holds generation %d", k.Generation)
			},
			Refused: o.refused,
		}
		got, err := w.Do(ctx)
		if err != nil {
			return nil, fmt.Errorf("the ledger records generation %d, but the keyset Secret was not written: rerun the same command to converge (the ledger now refuses any other generation %d and everything older): %w", r.Next.Generation, r.Next.Generation, err)
		}
		res.Keyset.Action, res.Keyset.Settled = action(ksPresent), got.Settled
		res.Converged = plan.Behind
		o.say("%s: holds generation %d (digest %s)", ksWhat, r.Next.Generation, nd)
	}
	return res, nil
}

func action(present bool) Action {
	if present {
		return Updated
	}
	return Created
}

func (o *Options) writeAccess(present bool, name string) access.Access {
	if present {
		return o.access("update", name)
	}
	return o.access("create", "")
}

// refused maps a create answered 404 to the missing namespace.
func (o *Options) refused(op cas.Op, err error) error {
	if op == cas.OpCreate && apierrors.IsNotFound(err) {
		return fail.Errorf(fail.Invalid, "namespace %q does not exist: create it first (%v)", o.Namespace, err)
	}
	return nil
}
