package canon

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	yamlv3 "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

func id(apiVersion, kind, ns, name string) Identity {
	return Identity{APIVersion: apiVersion, Kind: kind, Namespace: ns, Name: name}
}

func TestKey(t *testing.T) {
	tests := []struct {
		id   Identity
		want Key
		str  string
	}{
		{id("v1", "ConfigMap", "ns", "c"), Key{"", "ConfigMap", "ns", "c"}, "core/ConfigMap/ns/c"},
		{id("apps/v1", "Deployment", "ns", "web"), Key{"apps", "Deployment", "ns", "web"}, "apps/Deployment/ns/web"},
		{id("autoscaling/v2", "HorizontalPodAutoscaler", "ns", "web"), Key{"autoscaling", "HorizontalPodAutoscaler", "ns", "web"}, "autoscaling/HorizontalPodAutoscaler/ns/web"},
		{id("demo.qinglong.io/v1beta1", "Gadget", "ns", "g"), Key{"demo.qinglong.io", "Gadget", "ns", "g"}, "demo.qinglong.io/Gadget/ns/g"},
		{id("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "gadgets.demo.qinglong.io"), Key{"apiextensions.k8s.io", "CustomResourceDefinition", "", "gadgets.demo.qinglong.io"}, "apiextensions.k8s.io/CustomResourceDefinition/-/gadgets.demo.qinglong.io"},
		// The group is what precedes the first "/", whatever follows it.
		{id("a/b/c", "K", "", "n"), Key{"a", "K", "", "n"}, "a/K/-/n"},
		{id("", "K", "ns", "n"), Key{"", "K", "ns", "n"}, "core/K/ns/n"},
	}
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			got := tt.id.Key()
			if got != tt.want || got.String() != tt.str {
				t.Errorf("Key() = %+v %q, want %+v %q", got, got.String(), tt.want, tt.str)
			}
		})
	}
	// The version never enters the key.
	if id("demo.qinglong.io/v1beta1", "Gadget", "ns", "g").Key() != id("demo.qinglong.io/v1", "Gadget", "ns", "g").Key() {
		t.Error("v1beta1 and v1 of one object have different keys")
	}
	for _, other := range []Identity{
		id("other.qinglong.io/v1", "Gadget", "ns", "g"),
		id("demo.qinglong.io/v1", "Gizmo", "ns", "g"),
		id("demo.qinglong.io/v1", "Gadget", "ns2", "g"),
		id("demo.qinglong.io/v1", "Gadget", "ns", "h"),
	} {
		if other.Key() == id("demo.qinglong.io/v1", "Gadget", "ns", "g").Key() {
			t.Errorf("%s shares the key of demo.qinglong.io/v1/Gadget/ns/g", other)
		}
	}
}

func sorted(ids ...Identity) []Identity {
	SortIdentities(ids)
	return ids
}

func TestMissingAndSameObjects(t *testing.T) {
	cmV1 := id("v1", "ConfigMap", "ns", "c")
	gadgetBeta := id("demo.qinglong.io/v1beta1", "Gadget", "ns", "g")
	gadgetV1 := id("demo.qinglong.io/v1", "Gadget", "ns", "g")
	hpaV1 := id("autoscaling/v1", "HorizontalPodAutoscaler", "ns", "web")
	hpaV2 := id("autoscaling/v2", "HorizontalPodAutoscaler", "ns", "web")
	otherGroup := id("other.qinglong.io/v1", "Gadget", "ns", "g")
	otherNS := id("demo.qinglong.io/v1", "Gadget", "ns2", "g")
	tests := []struct {
		name        string
		a, b        []Identity
		missing     []Identity // Missing(a, b)
		sameObjects bool
	}{
		{"both empty", nil, nil, nil, true},
		{"equal", sorted(cmV1, gadgetV1), sorted(cmV1, gadgetV1), nil, true},
		{"b adds an object", sorted(cmV1), sorted(cmV1, gadgetV1), nil, false},
		{"b drops an object", sorted(cmV1, gadgetV1), sorted(cmV1), []Identity{gadgetV1}, false},
		{"custom resource moves v1beta1 to v1", sorted(cmV1, gadgetBeta), sorted(cmV1, gadgetV1), nil, true},
		{"custom resource moves back", sorted(cmV1, gadgetV1), sorted(cmV1, gadgetBeta), nil, true},
		{"hpa moves to autoscaling/v2", sorted(hpaV1, cmV1), sorted(cmV1, hpaV2), nil, true},
		{"another group is another object", sorted(gadgetV1), sorted(otherGroup), []Identity{gadgetV1}, false},
		{"another namespace is another object", sorted(gadgetV1), sorted(otherNS), []Identity{gadgetV1}, false},
		{"moved and dropped", sorted(cmV1, gadgetBeta, hpaV1), sorted(gadgetV1), sorted(cmV1, hpaV1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.missing, Missing(tt.a, tt.b)); diff != "" {
				t.Errorf("Missing (-want +got):\n%s", diff)
			}
			if got := SameObjects(tt.a, tt.b); got != tt.sameObjects {
				t.Errorf("SameObjects = %t, want %t", got, tt.sameObjects)
			}
			if got := SameObjects(tt.b, tt.a); got != tt.sameObjects {
				t.Errorf("SameObjects(b, a) = %t, want %t", got, tt.sameObjects)
			}
		})
	}
}

// The key comparison never changes the order or the digest: both stay over
// the exact apiVersion recorded.
func TestInventoryDigestKeepsTheAppliedVersion(t *testing.T) {
	beta := sorted(id("v1", "ConfigMap", "ns", "c"), id("demo.qinglong.io/v1beta1", "Gadget", "ns", "g"))
	v1 := sorted(id("v1", "ConfigMap", "ns", "c"), id("demo.qinglong.io/v1", "Gadget", "ns", "g"))
	db, err := InventoryDigest(beta)
	if err != nil {
		t.Fatal(err)
	}
	dv, err := InventoryDigest(v1)
	if err != nil {
		t.Fatal(err)
	}
	if db == dv {
		t.Errorf("inventories under different apiVersions share digest %s", db)
	}
	c, err := Canonical(beta)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"apiVersion":"demo.qinglong.io/v1beta1","kind":"Gadget","name":"g","namespace":"ns"},{"apiVersion":"v1","kind":"ConfigMap","name":"c","namespace":"ns"}]`
	if string(c) != want {
		t.Errorf("canonical inventory %s, want %s", c, want)
	}
	if db != DigestBytes(DomainInventory, []byte(want)) {
		t.Errorf("inventory digest %s is not the digest of the canonical array", db)
	}
}

func TestCheckSortedUnique(t *testing.T) {
	tests := []struct {
		name string
		ids  []Identity
		want string // "" = accepted
	}{
		{"empty", nil, ""},
		{"sorted", []Identity{id("apps/v1", "Deployment", "ns", "a"), id("v1", "ConfigMap", "ns", "a")}, ""},
		{"out of order", []Identity{id("v1", "ConfigMap", "ns", "a"), id("apps/v1", "Deployment", "ns", "a")}, "out of order"},
		{"repeated", []Identity{id("v1", "ConfigMap", "ns", "a"), id("v1", "ConfigMap", "ns", "a")}, "duplicate identity v1/ConfigMap/ns/a"},
		{"one object under two versions, adjacent", []Identity{id("autoscaling/v1", "HorizontalPodAutoscaler", "ns", "web"), id("autoscaling/v2", "HorizontalPodAutoscaler", "ns", "web")},
			"autoscaling/v1/HorizontalPodAutoscaler/ns/web and autoscaling/v2/HorizontalPodAutoscaler/ns/web are the same object"},
		{"one object under two versions, apart", []Identity{id("demo.qinglong.io/v1", "Gadget", "ns", "g"), id("demo.qinglong.io/v1", "Gizmo", "ns", "g"), id("demo.qinglong.io/v1beta1", "Gadget", "ns", "g")},
			"same object (demo.qinglong.io/Gadget/ns/g) under two apiVersions"},
		{"same name, other kind", []Identity{id("v1", "ConfigMap", "ns", "a"), id("v1", "Secret", "ns", "a")}, ""},
		{"same kind and name, other group", []Identity{id("a.example/v1", "Thing", "ns", "a"), id("b.example/v1", "Thing", "ns", "a")}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckSortedUnique(tt.ids)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("err = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

func TestIsHead(t *testing.T) {
	tests := []struct {
		id   Identity
		want bool
	}{
		{id("v1", "ConfigMap", "ql3-demo", HeadName), true},
		{id("v1", "ConfigMap", "kube-system", HeadName), true}, // any namespace
		{id("v1", "ConfigMap", "", HeadName), true},
		{id("v1", "ConfigMap", "ql3-demo", HeadName+"-x"), false},
		{id("v1", "Secret", "ql3-demo", HeadName), false},
		{id("demo.qinglong.io/v1", "ConfigMap", "ql3-demo", HeadName), false}, // another group's kind
	}
	for _, tt := range tests {
		if got := IsHead(tt.id); got != tt.want {
			t.Errorf("IsHead(%s) = %t, want %t", tt.id, got, tt.want)
		}
	}
}

func TestList(t *testing.T) {
	ids := []Identity{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: "x"}, {APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: "y"}, {APIVersion: "v1", Kind: "Namespace", Name: "a"}}
	for _, c := range []struct {
		max  int
		want string
	}{
		{10, "v1/ConfigMap/a/x, v1/ConfigMap/a/y, v1/Namespace/-/a"},
		{3, "v1/ConfigMap/a/x, v1/ConfigMap/a/y, v1/Namespace/-/a"},
		{2, "v1/ConfigMap/a/x, v1/ConfigMap/a/y, and 1 more"},
		{0, "and 3 more"},
	} {
		if got := List(ids, c.max); got != c.want {
			t.Errorf("List(max %d) = %q, want %q", c.max, got, c.want)
		}
	}
}

// FuzzScalar: for every string, scalar's node is the one Node.Encode
// makes (so FlowMapping, and every lock, encodes byte for byte as before
// the fast path), and a string plain accepts comes back from YAML 1.1
// (sigs.k8s.io/yaml, which ParseLock reads with) as the same string.
func FuzzScalar(f *testing.F) {
	for _, s := range []string{"cm-00001", "apps/v1", "ConfigMap", "scale-ql3", "", "y", "Yes", "NO", "on", "Off", "TRUE", "null", "Null",
		"a", "a.b_c/d-e", "e5", "x1", "1a", "-a", ".a", "a:b", "a b", "a#b", "a,b", "a\\nb", "ü", "inf", ".inf", "nan", "NaN", "y1", "yes-", "~"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := scalar(s)
		var want yamlv3.Node
		werr := want.Encode(s)
		if (err != nil) != (werr != nil) {
			t.Fatalf("scalar(%q) error %v, Node.Encode %v", s, err, werr)
		}
		if err != nil {
			return
		}
		if !reflect.DeepEqual(got, &want) {
			t.Fatalf("scalar(%q) = %#v, Node.Encode %#v", s, got, &want)
		}
		if !plain(s) {
			return
		}
		var back map[string]any
		if err := sigsyaml.Unmarshal([]byte("{k: "+s+"}"), &back); err != nil || back["k"] != s {
			t.Fatalf("plain %q read back as %#v (%v)", s, back["k"], err)
		}
	})
}

// FuzzAppendCanonical: an identity's fast canonical form is Canonical's,
// byte for byte, for any four strings it accepts (valid UTF-8, every
// control character, quotes, backslashes, U+2028, HTML characters the JSON
// encoder escapes); the inventory digest over it is the generic
// element-at-a-time digest's.
func FuzzAppendCanonical(f *testing.F) {
	f.Add("v1", "ConfigMap", "ns", "cm-00042")
	f.Add("a\"b\\c", "\x00\x01\b\t\n\v\f\r\x1f\x7f", "<>&\u2028\u2029", "é\U0001F600\ufffe")
	f.Add("\xff", "k", "", "n")
	f.Fuzz(func(t *testing.T, apiVersion, kind, ns, name string) {
		id := Identity{APIVersion: apiVersion, Kind: kind, Namespace: ns, Name: name}
		want, werr := Canonical(id)
		got, ok := id.AppendCanonical([]byte("prefix"))
		switch {
		case ok && (werr != nil || string(got) != "prefix"+string(want)):
			t.Fatalf("%#v: AppendCanonical %q, Canonical %q (%v)", id, got, want, werr)
		case !ok && string(got) != "prefix":
			t.Fatalf("%#v: refused, yet appended: %q", id, got)
		case !ok && utf8.ValidString(apiVersion) && utf8.ValidString(kind) && utf8.ValidString(ns) && utf8.ValidString(name):
			t.Fatalf("%#v: valid UTF-8 refused", id)
		}
		ids := []Identity{id, {APIVersion: "v1", Kind: kind, Name: name}}
		for _, list := range [][]Identity{ids, {}, nil} {
			want, werr := Canonical(list)
			got, gerr := CanonicalIdentities(list)
			if (werr == nil) != (gerr == nil) || string(got) != string(want) {
				t.Fatalf("%#v: CanonicalIdentities %q (%v), Canonical %q (%v)", list, got, gerr, want, werr)
			}
		}
		fast, ferr := InventoryDigest(ids)
		slow, serr := DigestOfArray(DomainInventory, ids)
		if (ferr == nil) != (serr == nil) || fast != slow {
			t.Fatalf("%#v: InventoryDigest %s (%v), DigestOfArray %s (%v)", id, fast, ferr, slow, serr)
		}
	})
}
