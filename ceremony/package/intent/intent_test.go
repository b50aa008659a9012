package intent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

func ptr(s string) *string { return &s }

// d is a well-formed digest made from a label, so tests never type hex.
func d(label string) string { return canon.DigestBytes("test", []byte(label)) }

// valid is a generation-2 intent every rule accepts.
func valid() Intent {
	return Intent{
		Schema:                Schema,
		ClusterIdentity:       canon.ClusterIdentity("6a1f2e1c-3b5d-4c8e-9f70-2d4b6a8c0e12"),
		Namespace:             "qinglong",
		ProjectID:             "demo",
		PackageID:             "weather-tools",
		Generation:            2,
		LockDigest:            d("lock-2"),
		PreviousLockDigest:    ptr(d("lock-1")),
		StageReference:        "registry.example.com:5000/qinglong/packages/weather-tools@" + d("manifest"),
		StageReceiptDigest:    d("receipt"),
		AdapterEvidenceDigest: d("adapter"),
		ContentDigest:         d("content"),
	}
}

// doc is v as a JSON document with member overrides: a nil value removes
// the member, a json.RawMessage is written as is.
func doc(t *testing.T, in Intent, set map[string]any) []byte {
	t.Helper()
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		if v == nil {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestParseRules(t *testing.T) {
	gen1 := valid()
	gen1.Generation, gen1.PreviousLockDigest = 1, nil
	long := strings.Repeat("a", 64)
	tests := []struct {
		name    string
		data    []byte
		wantErr string // "" accepts
	}{
		{"valid generation 2", doc(t, valid(), nil), ""},
		{"valid generation 1 with null previous", doc(t, gen1, nil), ""},
		{"valid max generation", doc(t, valid(), map[string]any{"generation": json.RawMessage("9007199254740991")}), ""},
		{"valid 63-char id", doc(t, valid(), map[string]any{"packageId": long[:63]}), ""},
		{"valid reference without host", doc(t, valid(), map[string]any{"stageReference": "packages/weather@" + d("m")}), ""},
		{"white space around members", []byte(strings.ReplaceAll(string(doc(t, valid(), nil)), ",", " ,\n ")), ""},

		{"not an object", []byte(`[]`), "not a JSON object"},
		{"empty", nil, "not a JSON object"},
		{"trailing data", append(doc(t, valid(), nil), []byte(` {}`)...), "data after"},
		{"invalid utf-8", append(doc(t, valid(), nil)[:1], 0xff), "not UTF-8"},
		{"unknown member", doc(t, valid(), map[string]any{"extra": "x"}), `unknown member "extra"`},
		{"missing member", doc(t, valid(), map[string]any{"contentDigest": nil}), `"contentDigest" is missing`},
		{"missing previous", doc(t, gen1, map[string]any{"previousLockDigest": nil}), `"previousLockDigest" is missing`},
		{"duplicate member", []byte(strings.Replace(string(doc(t, valid(), nil)), `{`, `{"namespace":"x",`, 1)), `"namespace" appears twice`},
		{"wrong schema", doc(t, valid(), map[string]any{"schema": "qinglong/plugin-package-activation-intent@v2"}), "schema:"},
		{"schema null", doc(t, valid(), map[string]any{"schema": json.RawMessage("null")}), "schema: null is not a JSON string"},
		{"namespace number", doc(t, valid(), map[string]any{"namespace": 7}), "namespace: 7 is not a JSON string"},
		{"namespace upper case", doc(t, valid(), map[string]any{"namespace": "Qinglong"}), "namespace:"},
		{"namespace empty", doc(t, valid(), map[string]any{"namespace": ""}), "namespace:"},
		{"projectId 64 chars", doc(t, valid(), map[string]any{"projectId": long}), "projectId:"},
		{"packageId trailing dash", doc(t, valid(), map[string]any{"packageId": "tools-"}), "packageId:"},
		{"packageId dot", doc(t, valid(), map[string]any{"packageId": "a.b"}), "packageId:"},
		{"generation zero", doc(t, valid(), map[string]any{"generation": 0}), "generation:"},
		{"generation negative", doc(t, valid(), map[string]any{"generation": -1}), "generation:"},
		{"generation 2^53", doc(t, valid(), map[string]any{"generation": json.RawMessage("9007199254740992")}), "larger than"},
		{"generation fraction", doc(t, valid(), map[string]any{"generation": json.RawMessage("2.0")}), "plain decimal"},
		{"generation exponent", doc(t, valid(), map[string]any{"generation": json.RawMessage("2e0")}), "plain decimal"},
		{"generation string", doc(t, valid(), map[string]any{"generation": "2"}), "plain decimal"},
		{"generation huge", doc(t, valid(), map[string]any{"generation": json.RawMessage("123456789012345678901234567890")}), "plain decimal"},
		{"clusterIdentity upper hex", doc(t, valid(), map[string]any{"clusterIdentity": strings.ToUpper(valid().ClusterIdentity)}), "clusterIdentity:"},
		{"lockDigest short", doc(t, valid(), map[string]any{"lockDigest": valid().LockDigest[:70]}), "lockDigest:"},
		{"lockDigest sha512", doc(t, valid(), map[string]any{"lockDigest": "sha512:" + strings.Repeat("0", 64)}), "lockDigest:"},
		{"previous null at generation 2", doc(t, valid(), map[string]any{"previousLockDigest": json.RawMessage("null")}), "null is allowed only for generation 1"},
		{"previous set at generation 1", doc(t, gen1, map[string]any{"previousLockDigest": d("x")}), "must be null for generation 1"},
		{"previous number", doc(t, valid(), map[string]any{"previousLockDigest": 1}), "digest string or null"},
		{"previous malformed", doc(t, valid(), map[string]any{"previousLockDigest": "sha256:x"}), "previousLockDigest:"},
		{"reference by tag", doc(t, valid(), map[string]any{"stageReference": "registry.example.com/p:v1"}), "stageReference:"},
		{"reference upper case", doc(t, valid(), map[string]any{"stageReference": "Registry/p@" + d("m")}), "stageReference:"},
		{"reference too long", doc(t, valid(), map[string]any{"stageReference": strings.Repeat("a/", 230) + "a@" + d("m")}), "stageReference:"},
		{"stageReceiptDigest empty", doc(t, valid(), map[string]any{"stageReceiptDigest": ""}), "stageReceiptDigest:"},
		{"adapterEvidenceDigest bool", doc(t, valid(), map[string]any{"adapterEvidenceDigest": true}), "adapterEvidenceDigest:"},
		{"contentDigest object", doc(t, valid(), map[string]any{"contentDigest": map[string]any{}}), "contentDigest:"},
		{"too large", append(doc(t, valid(), nil), make([]byte, MaxIntentBytes)...), "at most"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := Parse(tt.data)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				// Accepted means: written back canonically, read to the same value.
				c, err := Canonical(in)
				if err != nil {
					t.Fatal(err)
				}
				again, err := Parse(c)
				if err != nil {
					t.Fatalf("re-parse canonical: %v", err)
				}
				c2, _ := Canonical(again)
				if string(c) != string(c2) {
					t.Fatalf("canonical changed on re-read:\n%s\n%s", c, c2)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse accepted it, want error containing %q", tt.wantErr)
			}
			if !fail.Is(err, fail.Invalid) {
				t.Errorf("class %v, want invalid: %v", fail.ClassOf(err), err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}

// Every write path refuses what Parse refuses: they share Normalize.
func TestWritersNormalize(t *testing.T) {
	bad := valid()
	bad.Generation = MaxGeneration + 1
	if _, err := Canonical(bad); !fail.Is(err, fail.Invalid) {
		t.Errorf("Canonical: %v", err)
	}
	if _, err := Digest(bad); !fail.Is(err, fail.Invalid) {
		t.Errorf("Digest: %v", err)
	}
	if _, err := NamingOf(bad); !fail.Is(err, fail.Invalid) {
		t.Errorf("NamingOf: %v", err)
	}
	if _, _, err := BuildActive(bad, time.Unix(0, 0)); !fail.Is(err, fail.Invalid) {
		t.Errorf("BuildActive: %v", err)
	}
	// Normalize copies the pointer: the caller's later edits do not leak in.
	in := valid()
	n, err := Normalize(in)
	if err != nil {
		t.Fatal(err)
	}
	*in.PreviousLockDigest = "changed"
	if *n.PreviousLockDigest == "changed" {
		t.Error("Normalize shares the caller's previousLockDigest")
	}
}

func TestNaming(t *testing.T) {
	in := valid()
	nm, err := NamingOf(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(nm.Name) != 47 || !strings.HasPrefix(nm.Name, NamePrefix) || len(nm.Label) != 52 {
		t.Fatalf("naming %+v: want a 47-character name and a 52-character label", nm)
	}
	if err := CheckID("name", nm.Name); err != nil {
		t.Errorf("name is not a DNS-1123 label: %v", err)
	}
	if !strings.HasPrefix(nm.Label, strings.TrimPrefix(nm.Name, NamePrefix)[:41]) {
		t.Errorf("name %s is not a prefix of label %s", nm.Name, nm.Label)
	}
	// Everything but the target leaves the naming alone; each target part moves it.
	other := valid()
	other.Generation, other.LockDigest, other.StageReceiptDigest = 9, d("lock-9"), d("r9")
	if n2, _ := NamingOf(other); n2 != nm {
		t.Errorf("a new generation moved the pointer: %+v", n2)
	}
	for _, change := range []func(*Intent){
		func(i *Intent) { i.ClusterIdentity = d("other cluster") },
		func(i *Intent) { i.Namespace = "other" },
		func(i *Intent) { i.ProjectID = "other" },
		func(i *Intent) { i.PackageID = "other" },
	} {
		c := valid()
		change(&c)
		if n2, _ := NamingOf(c); n2.Name == nm.Name || n2.Label == nm.Label || n2.TargetDigest == nm.TargetDigest {
			t.Errorf("target change kept naming %+v", n2)
		}
	}
	// Domain separation: namespace "a-b"+project "c" differs from "a"+"b-c".
	x, y := valid(), valid()
	x.Namespace, x.ProjectID = "a-b", "c"
	y.Namespace, y.ProjectID = "a", "b-c"
	if nx, _ := NamingOf(x); func() bool { ny, _ := NamingOf(y); return nx == ny }() {
		t.Error("targets with shifted boundaries share a digest")
	}

	if err := VerifyNaming(in, nm.Name, nm.Label); err != nil {
		t.Errorf("VerifyNaming of its own naming: %v", err)
	}
	for _, tc := range []struct{ name, label string }{
		{nm.Name[:46] + "a", nm.Label},
		{nm.Name, nm.Label[:51] + "a"},
		{nm.Name, strings.ToUpper(nm.Label)},
		{"", nm.Label},
	} {
		if tc.name == nm.Name && tc.label == nm.Label {
			continue
		}
		if err := VerifyNaming(in, tc.name, tc.label); !fail.Is(err, fail.Tamper) {
			t.Errorf("VerifyNaming(%q, %q) = %v, want tamper", tc.name, tc.label, err)
		}
	}
}

func TestActive(t *testing.T) {
	at := time.Date(2026, 7, 24, 9, 30, 0, 0, time.FixedZone("CST", 8*3600))
	a, data, err := BuildActive(valid(), at)
	if err != nil {
		t.Fatal(err)
	}
	if a.Receipt.ActivatedAt != "2026-07-24T01:30:00Z" {
		t.Errorf("activatedAt %q, want UTC", a.Receipt.ActivatedAt)
	}
	back, err := ParseActive(data)
	if err != nil {
		t.Fatalf("ParseActive(BuildActive): %v\n%s", err, data)
	}
	if c1, _ := Canonical(back.Intent); string(c1) != func() string { c, _ := Canonical(valid()); return string(c) }() {
		t.Errorf("intent changed through active.json")
	}

	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	edit := func(f func(m map[string]any)) []byte {
		var c map[string]any
		_ = json.Unmarshal(data, &c)
		f(c)
		out, _ := canon.Canonical(c)
		return out
	}
	receipt := func(m map[string]any) map[string]any { return m["receipt"].(map[string]any) }
	intentOf := func(m map[string]any) map[string]any { return m["intent"].(map[string]any) }
	tests := []struct {
		name    string
		data    []byte
		wantErr string
	}{
		{"pretty printed", func() []byte { b, _ := json.MarshalIndent(m, "", " "); return b }(), "canonical form"},
		{"trailing newline", append(append([]byte{}, data...), '\n'), "canonical form"},
		{"unknown member", edit(func(m map[string]any) { m["x"] = 1 }), `unknown member "x"`},
		{"missing receipt", edit(func(m map[string]any) { delete(m, "receipt") }), `"receipt" is missing`},
		{"wrong schema", edit(func(m map[string]any) { m["schema"] = Schema }), "active.json: schema"},
		{"cluster differs from intent", edit(func(m map[string]any) { m["clusterIdentity"] = d("x") }), "differs from the intent"},
		{"intent invalid", edit(func(m map[string]any) { intentOf(m)["generation"] = 0 }), "generation"},
		{"intent changed, receipt not", edit(func(m map[string]any) { intentOf(m)["contentDigest"] = d("y") }), "receipt.intentDigest"},
		{"receipt unknown member", edit(func(m map[string]any) { receipt(m)["by"] = "me" }), `unknown member "by"`},
		{"receipt wrong schema", edit(func(m map[string]any) { receipt(m)["schema"] = ActiveSchema }), "receipt.schema"},
		{"receipt wrong target", edit(func(m map[string]any) { receipt(m)["targetDigest"] = d("t") }), "receipt.targetDigest"},
		{"receipt local time", edit(func(m map[string]any) { receipt(m)["activatedAt"] = "2026-07-24T09:30:00+08:00" }), "receipt.activatedAt"},
		{"receipt fraction", edit(func(m map[string]any) { receipt(m)["activatedAt"] = "2026-07-24T09:30:00.5Z" }), "receipt.activatedAt"},
		{"receipt bad date", edit(func(m map[string]any) { receipt(m)["activatedAt"] = "2026-13-24T09:30:00Z" }), "receipt.activatedAt"},
		{"too large", append(append([]byte{}, data...), make([]byte, MaxActiveBytes)...), "at most"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseActive(tt.data)
			if err == nil || !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseActive = %v, want invalid containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestCompareEvidence(t *testing.T) {
	in := valid()
	if err := CompareEvidence(in, in.Evidence()); err != nil {
		t.Fatalf("own evidence: %v", err)
	}
	for _, tc := range []struct {
		field string
		edit  func(*StageEvidence)
	}{
		{"lockDigest", func(e *StageEvidence) { e.LockDigest = d("x") }},
		{"stageReference", func(e *StageEvidence) { e.StageReference = "other/p@" + d("m") }},
		{"stageReceiptDigest", func(e *StageEvidence) { e.StageReceiptDigest = d("x") }},
		{"adapterEvidenceDigest", func(e *StageEvidence) { e.AdapterEvidenceDigest = d("x") }},
		{"contentDigest", func(e *StageEvidence) { e.ContentDigest = "" }},
	} {
		ev := in.Evidence()
		tc.edit(&ev)
		err := CompareEvidence(in, ev)
		if !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), tc.field+": intent ") || strings.Count(err.Error(), ": intent ") != 1 {
			t.Errorf("%s differs: %v, want one conflict naming it", tc.field, err)
		}
	}
}
