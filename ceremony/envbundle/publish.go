package envbundle

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/ceremony/envbundle/envcarrier"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// Options are a publisher's or inspector's clients and target.
type Options struct {
	// Namespace and Name are the bundle Secret's.
	Namespace, Name string
	// Secrets is the Secret client of Namespace (cs.CoreV1().Secrets(ns)).
	Secrets cas.Client[*corev1.Secret]
	// Review answers the permission review (access.NewReview); publish only.
	Review *access.Review
	// Hint ends a missing-permission error (where the least privilege is
	// printed).
	Hint string
	// Say reports progress (never a name or a value); nil is quiet.
	Say cas.Progress
}

// Action is what a publish did.
type Action string

// The actions of Result.
const (
	// Created: the Secret did not exist and now holds the bundle.
	Created Action = "created"
	// Updated: the Secret held another bundle at the expected version and
	// now holds this one.
	Updated Action = "updated"
	// Replayed: the Secret already held exactly this bundle; nothing was
	// written.
	Replayed Action = "replayed"
)

// Result is a completed publish: no content, only where and which version.
type Result struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Action    Action `json:"action"`
	// ResourceVersion is the Secret's version now: the --expected-version
	// of the next publish.
	ResourceVersion string `json:"resourceVersion"`
	// Settled: the write's answer was lost (or a 409) and reading the
	// Secret back showed it held exactly this bundle.
	Settled bool `json:"settled,omitempty"`
}

func (o *Options) what() string { return "environment bundle Secret " + o.Namespace + "/" + o.Name }

func (o *Options) access(verb, name string) access.Access {
	return access.Access{Verb: verb, Resource: "secrets", Namespace: o.Namespace, Name: name}
}

// Publish writes b as the bundle Secret (docs/env-bundle.md, "Publishing"):
// review get; read the Secret; an absent Secret is created, unless
// expected names a version (conflict: the state it replaces is gone); a
// present one must be a bundle Secret (Check) — holding exactly b it is a
// replay and nothing is written, else expected must equal its
// resourceVersion (conflict otherwise) and it is updated carrying that
// version; review the write; write through cas.Write (policy Resend: a
// resent create or update carrying the same version cannot overwrite
// anyone), every lost answer settled by reading the Secret back.
func Publish(ctx context.Context, o Options, b *envcarrier.Bundle, expected string) (*Result, error) {
	what := o.what()
	if err := access.Require(ctx, o.Review, []access.Access{o.access("get", o.Name)}, o.Hint); err != nil {
		return nil, err
	}
	s := cas.Swap[*corev1.Secret]{
		Client: o.Secrets, Name: o.Name, What: what, FieldManager: FieldManager, Policy: cas.Resend, Say: o.Say,
		Check:  func(cur *corev1.Secret) error { _, err := Check(cur); return err },
		Replay: func(cur *corev1.Secret) bool { return Holds(cur, b) },
		Build: func(_ context.Context, cur *corev1.Secret, present bool) (*corev1.Secret, error) {
			return o.build(b, expected, cur, present)
		},
		Review: func(ctx context.Context, create bool) error {
			return access.Require(ctx, o.Review, []access.Access{o.access("", o.Name).CreateOrUpdate(create)}, o.Hint)
		},
		Landed: func(cur *corev1.Secret) bool { return Holds(cur, b) },
		Describe: func(cur *corev1.Secret, present bool) string {
			if !present {
				return "the Secret was deleted"
			}
			return fmt.Sprintf("the Secret now holds another bundle (version %s)", cur.ResourceVersion)
		},
		Refused: cas.MissingNamespace(o.Namespace),
	}
	got, err := s.Do(ctx)
	if err != nil {
		return nil, err
	}
	res := &Result{Namespace: o.Namespace, Name: o.Name, Action: Updated, ResourceVersion: got.Object.ResourceVersion, Settled: got.Settled}
	switch {
	case got.Replayed:
		res.Action = Replayed
		o.Say.Printf("%s already holds exactly this bundle (version %s): nothing to write", what, res.ResourceVersion)
		return res, nil
	case got.Created:
		res.Action = Created
	}
	o.Say.Printf("%s: %s at version %s", what, res.Action, res.ResourceVersion)
	return res, nil
}

// build is the bundle Secret holding b over the read (cur, present): an
// absent Secret is created unless expected names a version; a present one
// (another bundle) is replaced only when expected is its resourceVersion.
func (o *Options) build(b *envcarrier.Bundle, expected string, cur *corev1.Secret, present bool) (*corev1.Secret, error) {
	what := o.what()
	if !present {
		if expected != "" {
			return nil, fail.Errorf(fail.Conflict, "%s does not exist, but --expected-version %s names a state to replace: it was deleted (or never published here); publish without --expected-version to create it; nothing was written", what, expected)
		}
		return SecretFor(o.Namespace, o.Name, b, nil), nil
	}
	switch expected {
	case "":
		return nil, fail.Errorf(fail.Conflict, "%s already holds another bundle (version %s): to replace it, name the state it replaces with --expected-version %s (as printed by the publish that wrote it or by env-bundle inspect); nothing was written", what, cur.ResourceVersion, cur.ResourceVersion)
	case cur.ResourceVersion:
		return SecretFor(o.Namespace, o.Name, b, cur), nil
	}
	return nil, fail.Errorf(fail.Conflict, "%s is at version %s, not the --expected-version %s: another publish replaced the state you expected; inspect it and decide again; nothing was written", what, cur.ResourceVersion, expected)
}

// Status is what inspect reports: whether the Secret exists and its
// version, never its content.
type Status struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Present   bool   `json:"present"`
	// ResourceVersion is the --expected-version of the next publish
	// (empty when absent).
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// Inspect reads the bundle Secret once. A present Secret is checked like
// publish checks it (Check): one that is not a bundle Secret is reported
// with its version and returned with Check's error (invalid or tamper).
func Inspect(ctx context.Context, o Options) (*Status, error) {
	cur, present, err := cas.Read(ctx, o.Secrets, o.Name, o.what())
	if err != nil {
		return nil, err
	}
	st := &Status{Namespace: o.Namespace, Name: o.Name, Present: present}
	if !present {
		return st, nil
	}
	st.ResourceVersion = cur.ResourceVersion
	_, err = Check(cur)
	return st, err
}
