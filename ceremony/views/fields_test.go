package views

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOwnedFields(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    []string
		wantErr string
	}{
		{"ConfigMap data", `{"f:data":{".":{},"f:a":{},"f:b":{}},"f:metadata":{"f:labels":{"f:x":{}}}}`,
			[]string{".data.a", ".data.b", ".metadata.labels.x"}, ""},
		{"keyed list", `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{}}}}}}}`,
			[]string{".spec.template.spec.containers[name=app].image"}, ""},
		{"set and index", `{"f:finalizers":{"v:\"x\"":{}},"f:items":{"i:3":{}}}`, []string{".finalizers[=\"x\"]", ".items[3]"}, ""},
		{"a node owned with no members is a leaf", `{"f:spec":{"f:replicas":{}}}`, []string{".spec.replicas"}, ""},
		{"empty set", `{}`, nil, ""},
		{"not an object", `[]`, nil, "fieldsV1"},
		{"null", `null`, nil, "not an object"},
		{"trailing data", `{} {}`, nil, "trailing data"},
		{"unknown prefix", `{"x:y":{}}`, nil, "no f:, k:, v: or i: prefix"},
		{"no prefix", `{"spec":{}}`, nil, "no f:, k:, v: or i: prefix"},
		{"bad key object", `{"k:nope":{}}`, nil, "JSON object"},
		{"member not an object", `{"f:a":1}`, nil, "fieldsV1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := OwnedFields([]byte(tt.raw))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestOwnedFieldsDepthBound(t *testing.T) {
	deep := ""
	for i := 0; i <= MaxFieldsDepth+1; i++ {
		deep += `{"f:a":`
	}
	deep += "{}"
	for i := 0; i <= MaxFieldsDepth+1; i++ {
		deep += "}"
	}
	if _, err := OwnedFields([]byte(deep)); err == nil || !strings.Contains(err.Error(), "deeper") {
		t.Fatalf("err %v", err)
	}
}

// FuzzOwnedFields: the fieldsV1 parser never panics, and what it accepts
// gives sorted, unique paths that each start with "." or "[".
func FuzzOwnedFields(f *testing.F) {
	for _, s := range []string{`{}`, `{"f:data":{".":{},"f:a":{}}}`, `{"k:{\"name\":\"x\"}":{"f:image":{}}}`, `{"v:1":{},"i:0":{}}`, `[]`, `{"x":{}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := OwnedFields(raw)
		if err != nil {
			return
		}
		for i, p := range got {
			if p == "" || (p[0] != '.' && p[0] != '[') {
				t.Fatalf("path %q", p)
			}
			if i > 0 && got[i-1] >= p {
				t.Fatalf("paths not sorted and unique: %q", got)
			}
		}
	})
}
