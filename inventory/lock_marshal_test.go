package inventory

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMarshalGolden: the lock vectors written by kubectl ql3 lock are,
// byte for byte, what Marshal writes for their parse.
func TestMarshalGolden(t *testing.T) {
	files, err := filepath.Glob("../testdata/vectors/lock/golden-*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden locks (%v)", err)
	}
	for _, f := range append(files, "../testdata/vectors/lock/helm-chart.yaml") {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		l, err := ParseLock(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if got, err := l.Marshal(); err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: Marshal differs from the file (%v):\n%s", f, err, got)
		}
	}
}

// FuzzMarshalAsThroughNodes: Marshal writes what encoding the lock into a
// yaml.Node and then the node wrote (marshalThroughNode, how every
// earlier version wrote locks), with the fuzzed string in every string
// field — identities and source files too, and a Helm section — where the
// node path can encode it at all.
func FuzzMarshalAsThroughNodes(f *testing.F) {
	base, _ := fixtureLock(f, "v3.0.0", "3.0.0")
	for _, s := range []string{"<<", "y", "Yes", "no", "ON", "true", "null", "~", "", "1e5", "0x1f", "12", ".inf", "2001-12-14",
		"a:b", "a: b", "a b", " a", "a\n", "\xff", "é", "#x", "---", "cm-00001", "apps.v1", strings.Repeat("a", 300), strings.Repeat("word ", 60)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l := withEveryString(base, s)
		want, err := l.marshalThroughNode()
		if err != nil {
			return // nothing to compare: the node path cannot encode s (a string opening with a line break: yaml.v3 cannot parse what it wrote)
		}
		got, err := l.Marshal()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Marshal of %q differs from the node encoding (%v):\n%s\n---\n%s", s, err, got, want)
		}
	})
}

// withEveryString is a copy of l with s in every string field, beside
// what each list held, and a Helm section of s.
func withEveryString(l *Lock, s string) *Lock {
	c := *l
	c.Schema, c.Release.Version, c.Target.ClusterIdentity, c.Target.Namespace = s, s, s, s
	c.Release.Roles = append(slices.Clone(l.Release.Roles), s)
	c.Tool = LockTool{Name: s, Constraint: s, FieldManager: s}
	c.Images = append(slices.Clone(l.Images), s)
	c.Source.Digest, c.Render.Digest, c.Render.InventoryDigest = s, s, s
	c.Source.Files = append(slices.Clone(l.Source.Files), SourceFile{Path: s, Digest: s})
	c.Render.Inventory = append(slices.Clone(l.Render.Inventory),
		Identity{APIVersion: s, Kind: s, Namespace: s, Name: s}, Identity{APIVersion: "v1", Kind: "K", Name: s})
	c.Helm = &LockHelm{SDK: s, Charts: []LockChart{{Kustomization: s, ReleaseName: s, Namespace: s, Name: s, Version: s, Path: s, Digest: s,
		Values: []SourceFile{{Path: s, Digest: s}}, KubeVersion: s, APIVersions: []string{s, "v1"}, APIVersionsDigest: s}}}
	return &c
}
