package inventory

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func benchObjects(b *testing.B) []map[string]any {
	r := mustRender(b, fixtureFS(b, "v3.1.0"), Options{})
	var objs []map[string]any
	for _, o := range r.RedactedObjects() {
		objs = append(objs, o.Object)
	}
	return objs
}

func BenchmarkCanonical(b *testing.B) {
	objs := benchObjects(b)
	for b.Loop() {
		if _, err := Canonical(objs); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDigestOf(b *testing.B) {
	objs := benchObjects(b)
	for b.Loop() {
		if _, err := DigestOf(DomainRender, objs); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSortIdentities(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]Identity, 10000)
	for i := range ids {
		ids[i] = Identity{
			APIVersion: []string{"v1", "apps/v1", "batch/v1", "demo.qinglong.io/v1"}[rng.IntN(4)],
			Kind:       []string{"ConfigMap", "Deployment", "Service", "Widget"}[rng.IntN(4)],
			Namespace:  fmt.Sprintf("ns-%d", rng.IntN(50)),
			Name:       fmt.Sprintf("obj-%d", rng.IntN(1_000_000)),
		}
	}
	work := make([]Identity, len(ids))
	for b.Loop() {
		copy(work, ids)
		SortIdentities(work)
	}
	if !slices.IsSortedFunc(work, Compare) {
		b.Fatal("not sorted")
	}
}

func BenchmarkInventoryDigest(b *testing.B) {
	r := mustRender(b, fixtureFS(b, "v3.1.0"), Options{})
	for b.Loop() {
		if _, err := InventoryDigest(r.Inventory); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRender(b *testing.B) {
	fs := fixtureFS(b, "v3.1.0")
	for b.Loop() {
		if _, err := Render(fs, "/rel", Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseLock(b *testing.B) {
	l, _ := fixtureLock(b, "v3.1.0", "3.1.0")
	data, _ := l.Marshal()
	for b.Loop() {
		if _, err := ParseLock(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLockMarshal10k encodes the lock of a 10,000-object release as
// lock writes it.
func BenchmarkLockMarshal10k(b *testing.B) {
	l, _ := fixtureLock(b, "v3.0.0", "3.0.0")
	for i := range 10_000 {
		l.Render.Inventory = append(l.Render.Inventory, Identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: l.Target.Namespace, Name: fmt.Sprintf("cm-%05d", i)})
	}
	SortIdentities(l.Render.Inventory)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Marshal(); err != nil {
			b.Fatal(err)
		}
	}
}
