// Package deploytest builds what a bypass of the tool writes: a Head's
// raw next generation, sealed and self-consistent, as the YAML a cluster
// admin would `kubectl replace`. Only tests import it (internal/arch: test
// machinery never ships).
package deploytest

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
)

// Next is generation h.Generation+1 as a raw write makes it: an upgrade
// to version with h's deployment as previous and h's receipt's digest as
// previousReceiptDigest, everything else (the two-person members
// included) h's until the caller changes it.
func Next(t testing.TB, h *deploy.Head, version string) deploy.Head {
	t.Helper()
	r, err := deploy.ReceiptFromHead(h)
	if err != nil {
		t.Fatal(err)
	}
	next := *h
	prev := h.Current.Deployment
	next.Generation, next.Previous, next.PreviousReceiptDigest = h.Generation+1, &prev, r.SelfDigest
	next.Transition.Kind, next.Transition.MutationID = deploy.TransitionUpgrade, strings.Repeat("ab", 16)
	next.Current.Version = version
	return next
}

// Manifest is h, sealed, as the YAML of its ConfigMap in ns.
func Manifest(t testing.TB, ns string, h deploy.Head) string {
	t.Helper()
	if err := h.Seal(); err != nil {
		t.Fatal(err)
	}
	cm, err := h.ConfigMap(ns)
	if err != nil {
		t.Fatal(err)
	}
	cm.APIVersion, cm.Kind = "v1", "ConfigMap"
	doc, err := yaml.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}
