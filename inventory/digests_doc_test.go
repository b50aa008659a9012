package inventory

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docBlockRE matches a fenced block whose info string carries a role, e.g.
// "```json canonical=source".
var docBlockRE = regexp.MustCompile("(?ms)^```[a-z]+ (file|canonical|digest|input|lock)=(\\S+)\n(.*?)^```$")

// TestDigestsDoc recomputes every worked example in docs/digests.md from its
// documented inputs, independently of Render where the algorithm allows.
func TestDigestsDoc(t *testing.T) {
	doc, err := os.ReadFile("../docs/digests.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{}
	files := map[string]string{}   // the first example: /example/<name>
	numbers := map[string]string{} // the second: /numbers/<name>
	for _, m := range docBlockRE.FindAllStringSubmatch(string(doc), -1) {
		role, name, body := m[1], m[2], m[3]
		if role == "file" {
			if rest, ok := strings.CutPrefix(name, "numbers/"); ok {
				numbers["/numbers/"+rest] = body
			} else {
				files["/example/"+name] = body
			}
			continue
		}
		if role != "lock" {
			body = strings.TrimSuffix(body, "\n")
		}
		if _, dup := blocks[role+"="+name]; dup {
			t.Fatalf("two %s=%s blocks", role, name)
		}
		blocks[role+"="+name] = body
	}
	need := func(key string) string {
		t.Helper()
		v, ok := blocks[key]
		if !ok {
			t.Fatalf("docs/digests.md has no %s block", key)
		}
		return v
	}
	if len(files) != 2 {
		t.Fatalf("example files: %d", len(files))
	}

	// The source digest, by the documented algorithm alone.
	var entries []SourceFile
	for p, data := range files {
		sum := sha256.Sum256([]byte(data))
		entries = append(entries, SourceFile{Path: strings.TrimPrefix(p, "/example/"), Digest: "sha256:" + hex.EncodeToString(sum[:])})
	}
	slices.SortFunc(entries, func(a, b SourceFile) int { return strings.Compare(a.Path, b.Path) })
	checkCanonical(t, "source", entries, need("canonical=source"), need("digest=source"))

	// Render the example and compare with the documented values.
	r, err := Render(memFS(t, files), "/example", Options{})
	if err != nil {
		t.Fatalf("render the example: %v", err)
	}
	if r.SourceDigest != need("digest=source") {
		t.Errorf("render: source digest %s, doc says %s", r.SourceDigest, need("digest=source"))
	}
	checkCanonical(t, "inventory", r.Inventory, need("canonical=inventory"), need("digest=inventory"))
	if r.InventoryDigest != need("digest=inventory") {
		t.Errorf("render: inventory digest %s", r.InventoryDigest)
	}
	var objs []map[string]any
	for _, o := range r.RedactedObjects() {
		objs = append(objs, o.Object)
	}
	checkCanonical(t, "render", objs, need("canonical=render"), need("digest=render"))
	if r.RenderDigest != need("digest=render") {
		t.Errorf("render: render digest %s", r.RenderDigest)
	}

	// Cluster identity.
	if got := ClusterIdentity(need("input=cluster-identity")); got != need("digest=cluster-identity") {
		t.Errorf("cluster identity %s, doc says %s", got, need("digest=cluster-identity"))
	}

	// The lock: well-formed, bound to the example, digest as documented.
	l, err := ParseLock([]byte(need("lock=example")))
	if err != nil {
		t.Fatalf("example lock: %v", err)
	}
	if l.Source.Digest != r.SourceDigest || l.Render.Digest != r.RenderDigest || l.Render.InventoryDigest != r.InventoryDigest ||
		l.Target.ClusterIdentity != need("digest=cluster-identity") {
		t.Errorf("example lock does not bind the example: %+v", l)
	}
	// The example has no workloads: only the role surface and the control
	// namespace derived from it may differ.
	var le *LockError
	if err := VerifyLock(l, r); !errors.As(err, &le) {
		t.Errorf("verify = %v", err)
	} else {
		var fields []string
		for _, f := range le.Fields {
			fields = append(fields, f.Field)
		}
		if !slices.Equal(fields, []string{"release.roles", "target.namespace"}) {
			t.Errorf("verify reports %q:\n%v", fields, err)
		}
	}
	checkCanonical(t, "lock", l, need("canonical=lock"), need("digest=lock"))
	if d, _ := l.Digest(); d != need("digest=lock") {
		t.Errorf("Lock.Digest %s, doc says %s", d, need("digest=lock"))
	}

	// A Secret value's keyed digest, by the documented formula and by the code.
	var in struct{ Key, Namespace, Name, Field, DataKey, Value string }
	if err := json.Unmarshal([]byte(need("input=secret-value")), &in); err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, []byte(in.Key))
	m.Write([]byte("kubectl-ql3/secret-value/v1\x00" + in.Namespace + "\x00" + in.Name + "\x00" + in.Field + "\x00" + in.DataKey + "\x00" + in.Value))
	manual := "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
	code := SecretValueDigest([]byte(in.Key), in.Namespace, in.Name, in.Field, in.DataKey, []byte(in.Value))
	if manual != need("digest=secret-value") || code != manual {
		t.Errorf("secret value digest: formula %s, code %s, doc %s", manual, code, need("digest=secret-value"))
	}

	// The second example: numbers and member names on which RFC 8785 and
	// naive canonicalisers differ, rendered from its documented files.
	if len(numbers) != 3 {
		t.Fatalf("numbers example files: %d", len(numbers))
	}
	nr, err := Render(memFS(t, numbers), "/numbers", Options{})
	if err != nil {
		t.Fatalf("render the numbers example: %v", err)
	}
	var nobjs []map[string]any
	for _, o := range nr.RedactedObjects() {
		nobjs = append(nobjs, o.Object)
	}
	checkCanonical(t, "render", nobjs, need("canonical=numbers-render"), need("digest=numbers-render"))
	if nr.RenderDigest != need("digest=numbers-render") {
		t.Errorf("numbers: render digest %s, doc says %s", nr.RenderDigest, need("digest=numbers-render"))
	}
}

// TestRetiredObjectDoc recomputes docs/digests.md's reviewed digest of a
// retired object (ceremony.md §11.2) from the object as read: less the
// four members the API server and controllers change, canonical, digest.
func TestRetiredObjectDoc(t *testing.T) {
	doc, err := os.ReadFile("../docs/digests.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{}
	for _, m := range docBlockRE.FindAllStringSubmatch(string(doc), -1) {
		if m[2] == "retired-object" {
			blocks[m[1]] = strings.TrimSuffix(m[3], "\n")
		}
	}
	if len(blocks) != 3 {
		t.Fatalf("docs/digests.md has %d retired-object blocks, want input, canonical and digest", len(blocks))
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(blocks["input"]), &obj); err != nil {
		t.Fatal(err)
	}
	delete(obj, "status")
	for _, m := range []string{"resourceVersion", "managedFields", "generation"} {
		delete(obj["metadata"].(map[string]any), m)
	}
	checkCanonical(t, DomainRetiredObject, obj, blocks["canonical"], blocks["digest"])
}

// TestCanonicalRules checks each RFC 8785 rule docs/digests.md names, with
// the values its prose quotes, on JSON text.
func TestCanonicalRules(t *testing.T) {
	for _, tc := range []struct{ name, in, want, wantErr string }{
		{"integer above 2^53 becomes the nearest double", `[9007199254740993]`, `[9007199254740992]`, ""},
		{"small exponent", `[1e-7]`, `[1e-7]`, ""},
		{"1e-6 has no exponent", `[0.000001]`, `[0.000001]`, ""},
		{"integral float", `[1.0]`, `[1]`, ""},
		{"trailing zero", `[2.50]`, `[2.5]`, ""},
		{"1e20 has no exponent", `[1e20]`, `[100000000000000000000]`, ""},
		{"1e21 has one", `[1e21]`, `[1e+21]`, ""},
		{"large exponent", `[1.5e300]`, `[1.5e+300]`, ""},
		{"negative zero", `[-0]`, `[0]`, ""},
		{"keys by UTF-16 code units", `{"ﬁ":1,"😀":2,"a":3}`, `{"a":3,"😀":2,"ﬁ":1}`, ""},
		{"escapes", `["\u0008\u0009\u000a\u000c\u000d\u001f\"\\\/"]`, `["\b\t\n\f\r\u001f\"\\/"]`, ""},
		{"no escape above U+001F", `["\u007f\u2028\u00e9"]`, "[\"\u007f\u2028é\"]", ""},
		{"white space removed", "{ \"b\" : [ 1 , 2 ] ,\n \"a\" : null }", `{"a":null,"b":[1,2]}`, ""},
		{"lone surrogate", `["\ud800"]`, "", "lone surrogate"},
		{"NaN is not JSON", `[NaN]`, "", "invalid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CanonicalizeJSON([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %s, %v; want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Errorf("got %s, %v; want %s", got, err, tc.want)
			}
		})
	}
}

// checkCanonical checks that v canonicalises to the documented text and that
// the documented digest is digest(domain, that text), computed by hand.
func checkCanonical(t *testing.T, domain string, v any, wantCanonical, wantDigest string) {
	t.Helper()
	got, err := Canonical(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != wantCanonical {
		t.Errorf("%s canonical JSON:\n got %s\nwant %s", domain, got, wantCanonical)
	}
	sum := sha256.Sum256([]byte("kubectl-ql3/" + domain + "/v1\x00" + wantCanonical))
	if d := "sha256:" + hex.EncodeToString(sum[:]); d != wantDigest {
		t.Errorf("%s digest: computed %s, doc says %s", domain, d, wantDigest)
	}
	if d, _ := DigestOf(domain, v); d != wantDigest {
		t.Errorf("%s: DigestOf %s, doc says %s", domain, d, wantDigest)
	}
}
