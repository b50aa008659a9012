package testkit

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// TenThousand is a release of 10,001 objects as a platform team writes
// one: 70% ConfigMaps, 10% each Services, ServiceAccounts and Deployments,
// in one 20-character namespace, named <team>-<app>-<component>-config-<suffix>
// (about 40 characters), the suffix a serial number or, hashed, ten random
// characters of a kustomize name hash. Sorted.
func TenThousand(hashed bool) []canon.Identity {
	r := rand.New(rand.NewSource(1))
	teams := []string{"payments-core", "ledger", "checkout-web", "identity", "search-idx"}
	apps := []string{"gateway", "reconciler", "billing", "notifier"}
	comps := []string{"api", "worker", "cron", "ingest", "export"}
	var ids []canon.Identity
	for _, k := range []struct {
		apiVersion, kind string
		n                int
	}{{"v1", "ConfigMap", 7001}, {"v1", "Service", 1000}, {"v1", "ServiceAccount", 1000}, {"apps/v1", "Deployment", 1000}} {
		for i := range k.n {
			suffix := fmt.Sprintf("%05d", i)
			if hashed {
				b := make([]byte, 10)
				for j := range b {
					b[j] = "bcdfghkmt2456789"[r.Intn(16)]
				}
				suffix = string(b)
			}
			name := fmt.Sprintf("%s-%s-%s-config-%s", teams[i%5], apps[(i/5)%4], comps[(i/20)%5], suffix)
			ids = append(ids, canon.Identity{APIVersion: k.apiVersion, Kind: k.kind, Namespace: "payments-platform-pr", Name: name})
		}
	}
	canon.SortIdentities(ids)
	return ids
}

// ShortNames is the same mix of 10,001 objects with names cm-00000,
// svc-00000, … in namespace ns: the shape whose Head the first format
// (v1) could still hold, at 92% of the API's limit.
func ShortNames(ns string) []canon.Identity {
	var ids []canon.Identity
	for _, k := range []struct {
		apiVersion, kind, prefix string
		n                        int
	}{{"v1", "ConfigMap", "cm", 7001}, {"v1", "Service", "svc", 1000}, {"v1", "ServiceAccount", "sa", 1000}, {"apps/v1", "Deployment", "deploy", 1000}} {
		for i := range k.n {
			ids = append(ids, canon.Identity{APIVersion: k.apiVersion, Kind: k.kind, Namespace: ns, Name: fmt.Sprintf("%s-%05d", k.prefix, i)})
		}
	}
	canon.SortIdentities(ids)
	return ids
}

// SizedInventory is an inventory of ConfigMaps in namespace ns whose size
// measure(canon.MeasureRelease(ids)) is exactly target. Names are a serial
// then padding (each shares little with the one before it: the packed form
// grows), or with serialLast padding then a serial (each shares almost all:
// the listed form grows); the last is lengthened character by character,
// each adding one byte to both sizes.
func SizedInventory(t testing.TB, ns string, target int, serialLast bool, measure func(canon.ReleaseBounds) int) []canon.Identity {
	t.Helper()
	name := func(i int) string {
		if serialLast {
			return strings.Repeat("x", 240) + fmt.Sprintf("%06d", i)
		}
		return fmt.Sprintf("%06d-", i) + strings.Repeat("x", 93)
	}
	fill := func(n int) []canon.Identity {
		ids := make([]canon.Identity, n)
		for i := range ids {
			ids[i] = canon.Identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: name(i)}
		}
		return ids
	}
	size := func(ids []canon.Identity) int {
		b, err := canon.MeasureRelease(ids)
		if err != nil {
			t.Fatal(err)
		}
		return measure(b)
	}
	// From an estimate by the size per object, step by whole objects until
	// the last can be padded by less than one object's size.
	per := size(fill(1000)) / 1000
	ids := fill(target / per)
	for s := size(ids); s > target || target-s > per; s = size(ids) {
		ids = fill(len(ids) + (target-s)/per - 1)
	}
	ids[len(ids)-1].Name += strings.Repeat("y", target-size(ids))
	if got := size(ids); got != target {
		t.Fatalf("sized inventory is %d bytes, want %d", got, target)
	}
	return ids
}
