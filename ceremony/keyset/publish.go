package keyset

import (
	"bytes"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/ceremony/keyset/jwkset"
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
	Say cas.Progress
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
	if err := access.Require(ctx, o.Review, []access.Access{o.access("get", KeysetSecret), o.access("get", LedgerSecret)}, o.Hint); err != nil {
		return nil, err
	}
	cur, err := o.read(ctx)
	if err != nil {
		return nil, err
	}
	plan, err := Decide(cur.state, r)
	if err != nil {
		return nil, err
	}
	nd, err := r.Next.Digest()
	if err != nil {
		return nil, err
	}
	res := &Result{Namespace: o.Namespace, Generation: r.Next.Generation, Digest: nd, NewlyRevoked: plan.NewlyRevoked, Adopted: plan.Adopted,
		Ledger: SecretResult{Name: LedgerSecret, Action: Unchanged}, Keyset: SecretResult{Name: KeysetSecret, Action: Unchanged},
		LedgerGenerations: len(plan.Ledger.Generations), RevokedWithoutThumbprint: plan.Ledger.UnknownRevoked(), LedgerCarriedForward: plan.CarriedForward}
	if res.NewlyRevoked == nil {
		res.NewlyRevoked = []string{}
	}

	var writes []access.Access
	if plan.WriteLedger {
		writes = append(writes, o.access("", LedgerSecret).CreateOrUpdate(!cur.lgPresent))
	}
	if plan.WriteKeyset {
		writes = append(writes, o.access("", KeysetSecret).CreateOrUpdate(!cur.ksPresent))
	}
	if err := access.Require(ctx, o.Review, writes, o.Hint); err != nil {
		return nil, err
	}

	if plan.WriteLedger {
		if res.Ledger, err = o.writeLedger(ctx, cur, plan.Ledger, r.Next.Generation, nd); err != nil {
			return nil, err
		}
	}
	if plan.WriteKeyset {
		if res.Keyset, err = o.writeKeyset(ctx, cur, r.Next, nd); err != nil {
			return nil, err
		}
		res.Converged = plan.Behind
	}
	return res, nil
}

// current is what publish read: both Secrets, and the State parsed from
// them.
type current struct {
	keyset, ledger       *corev1.Secret
	ksPresent, lgPresent bool
	state                State
}

func (o *Options) keysetWhat() string { return "keyset Secret " + o.Namespace + "/" + KeysetSecret }
func (o *Options) ledgerWhat() string { return "keyset ledger " + o.Namespace + "/" + LedgerSecret }

// read reads the keyset Secret, then the ledger (in this order, so a
// concurrent publish can never make the keyset Secret look ahead of the
// ledger), then parses the ledger and the keyset Secret.
func (o *Options) read(ctx context.Context) (*current, error) {
	var c current
	var err error
	if c.keyset, c.ksPresent, err = cas.Read(ctx, o.Secrets, KeysetSecret, o.keysetWhat()); err != nil {
		return nil, err
	}
	if c.ledger, c.lgPresent, err = cas.Read(ctx, o.Secrets, LedgerSecret, o.ledgerWhat()); err != nil {
		return nil, err
	}
	if c.lgPresent {
		if c.state.Ledger, err = ParseLedgerSecret(c.ledger); err != nil {
			return nil, err
		}
	}
	if c.ksPresent {
		if c.state.Keyset, c.state.KeysetManaged, err = ParseKeysetSecret(c.keyset); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

// swap is the compare-and-swap of the Secret name (named what) checked by
// check; both writes were reviewed before the first one.
func (o *Options) swap(name, what string, check func(*corev1.Secret) error) *cas.Swap[*corev1.Secret] {
	return &cas.Swap[*corev1.Secret]{
		Client: o.Secrets, Name: name, What: what, FieldManager: FieldManager, Policy: cas.Resend, Say: o.Say,
		Check: check, Refused: cas.MissingNamespace(o.Namespace),
	}
}

// writeLedger writes the ledger l (recording generation gen, digest nd)
// over the ledger read in c.
func (o *Options) writeLedger(ctx context.Context, c *current, l *jwkset.Ledger, gen int64, nd string) (SecretResult, error) {
	desired, err := LedgerSecretFor(o.Namespace, l)
	if err != nil {
		return SecretResult{}, err
	}
	want := desired.Data[LedgerKey]
	s := o.swap(LedgerSecret, o.ledgerWhat(), func(cur *corev1.Secret) error { _, err := ParseLedgerSecret(cur); return err })
	s.Landed = func(cur *corev1.Secret) bool {
		_, err := ParseLedgerSecret(cur)
		return err == nil && bytes.Equal(cur.Data[LedgerKey], want)
	}
	s.Describe = func(cur *corev1.Secret, present bool) string {
		if !present {
			return "the ledger was removed"
		}
		l, err := ParseLedgerSecret(cur)
		if err != nil {
			return err.Error()
		}
		return "another publisher moved the ledger to " + describe(l) + "; judge the keyset against it and publish again"
	}
	got, err := s.Write(ctx, c.ledger, c.lgPresent, desired)
	if err != nil {
		return SecretResult{}, fmt.Errorf("publish generation %d: %w", gen, err)
	}
	o.Say.Printf("%s: records generation %d (digest %s)", o.ledgerWhat(), gen, nd)
	return SecretResult{Name: LedgerSecret, Action: action(c.lgPresent), Settled: got.Settled}, nil
}

// writeKeyset writes next (digest nd) over the keyset Secret read in c.
func (o *Options) writeKeyset(ctx context.Context, c *current, next *jwkset.Keyset, nd string) (SecretResult, error) {
	var base *corev1.Secret
	if c.ksPresent {
		base = c.keyset
	}
	desired, err := KeysetSecretFor(o.Namespace, next, base)
	if err != nil {
		return SecretResult{}, err
	}
	s := o.swap(KeysetSecret, o.keysetWhat(), func(cur *corev1.Secret) error { _, _, err := ParseKeysetSecret(cur); return err })
	s.Landed = func(cur *corev1.Secret) bool {
		k, managed, err := ParseKeysetSecret(cur)
		if err != nil || !managed {
			return false
		}
		d, err := k.Digest()
		return err == nil && d == nd
	}
	s.Describe = func(cur *corev1.Secret, present bool) string {
		if !present {
			return "the keyset Secret was removed"
		}
		k, _, err := ParseKeysetSecret(cur)
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("the keyset Secret now holds generation %d", k.Generation)
	}
	got, err := s.Write(ctx, c.keyset, c.ksPresent, desired)
	if err != nil {
		return SecretResult{}, fmt.Errorf("the ledger records generation %d, but the keyset Secret was not written: rerun the same command to converge (the ledger now refuses any other generation %d and everything older): %w", next.Generation, next.Generation, err)
	}
	o.Say.Printf("%s: holds generation %d (digest %s)", o.keysetWhat(), next.Generation, nd)
	return SecretResult{Name: KeysetSecret, Action: action(c.ksPresent), Settled: got.Settled}, nil
}

func action(present bool) Action {
	if present {
		return Updated
	}
	return Created
}
