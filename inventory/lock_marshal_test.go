package inventory

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"
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

// nodeMarshal is how Marshal encoded a lock before it encoded it straight
// to text: into a yaml.Node (each identity's strings through Node.Encode),
// then the node.
func nodeMarshal(t *testing.T, l *Lock) []byte {
	t.Helper()
	var doc yamlv3.Node
	if err := doc.Encode(l.normalized()); err != nil {
		t.Fatal(err)
	}
	doc.HeadComment = "Written by kubectl ql3 lock; check with kubectl ql3 lock verify (docs/lock.md)."
	var buf bytes.Buffer
	enc := yamlv3.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestMarshalAsThroughNodes: Marshal writes what the encoding through a
// yaml.Node wrote, for identities whose strings need quoting (words YAML
// reads as booleans or null, numbers, an empty namespace, a colon, non-ASCII)
// and for plain ones.
func TestMarshalAsThroughNodes(t *testing.T) {
	l, _ := fixtureLock(t, "v3.0.0", "3.0.0")
	for i, s := range []string{"y", "Yes", "no", "ON", "off", "true", "False", "null", "~", "1e5", "0x1f", "12", ".inf", "a:b", "a: b", "é", "cm-00001", "apps.v1", "x_y/z"} {
		l.Render.Inventory = append(l.Render.Inventory,
			Identity{APIVersion: "v1", Kind: s, Namespace: s, Name: fmt.Sprintf("n%d", i)},
			Identity{APIVersion: s, Kind: "K", Namespace: "", Name: s})
	}
	l.Source.Files = append(l.Source.Files, SourceFile{Path: "on", Digest: "yes"})
	if got, want := mustMarshal(t, l), nodeMarshal(t, l); !bytes.Equal(got, want) {
		t.Fatalf("Marshal differs from the node encoding:\n%s\n---\n%s", got, want)
	}
}

func mustMarshal(t *testing.T, l *Lock) []byte {
	t.Helper()
	data, err := l.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return data
}
