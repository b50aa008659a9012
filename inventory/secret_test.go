package inventory

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var (
	testKey      = []byte("0123456789abcdef0123456789abcdef")
	secretValues = []string{"hunter2", "tok-42", "sk-live-9", "pa55word"}
)

// secretRelease is minimalRelease with Secret values in a manifest (data
// and stringData), a generator literal and a generator env file.
func secretRelease() map[string]string {
	f := minimalRelease()
	f["/rel/secret.yaml"] = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: hunter2\ndata:\n  token: " + base64.StdEncoding.EncodeToString([]byte("tok-42")) + "\n"
	f["/rel/db.env"] = "DB_PASS=pa55word\n"
	f["/rel/kustomization.yaml"] += "- secret.yaml\n" +
		"secretGenerator:\n- name: api\n  literals: [api-key=sk-live-9]\n  envs: [db.env]\n" +
		"generatorOptions:\n  disableNameSuffixHash: true\n"
	return f
}

// leaks lists the strings that must never appear in anything written: each
// Secret value, its base64 form, its bare SHA-256, and the bare file digest
// of each file that holds one.
func leaks(files map[string]string) []string {
	var out []string
	for _, v := range secretValues {
		sum := sha256.Sum256([]byte(v))
		out = append(out, v, base64.StdEncoding.EncodeToString([]byte(v)), hex.EncodeToString(sum[:]))
	}
	for _, p := range []string{"/rel/secret.yaml", "/rel/db.env", "/rel/kustomization.yaml"} {
		out = append(out, strings.TrimPrefix(FileDigest([]byte(files[p])), DigestPrefix))
	}
	return out
}

func TestSecretPolicy(t *testing.T) {
	files := secretRelease()
	for _, tt := range []struct {
		name    string
		key     []byte
		covered bool
	}{
		{"keyed", testKey, true},
		{"redacted", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRender(t, memFS(t, files), Options{AllowSecretData: true, SecretDigestKey: tt.key})
			if r.SecretValuesCovered != tt.covered {
				t.Fatalf("SecretValuesCovered = %t", r.SecretValuesCovered)
			}
			// The objects to apply keep the values.
			var applied bytes.Buffer
			for _, o := range r.Objects {
				b, _ := json.Marshal(o.Object)
				applied.Write(b)
			}
			if !strings.Contains(applied.String(), "hunter2") {
				t.Fatal("Objects lost the Secret value")
			}

			// Source entries: files holding a value are keyed or redacted,
			// the rest hashed.
			want := map[string]string{
				"app.yaml":       FileDigest([]byte(files["/rel/app.yaml"])),
				"namespace.yaml": FileDigest([]byte(files["/rel/namespace.yaml"])),
			}
			for _, p := range []string{"secret.yaml", "db.env", "kustomization.yaml"} {
				want[p] = RedactedMarker
				if tt.key != nil {
					want[p] = keyed(tt.key, DomainSourceFile, []byte(p), []byte(files["/rel/"+p]))
				}
			}
			for _, f := range r.Sources {
				if want[f.Path] != f.Digest {
					t.Errorf("source %s = %s, want %s", f.Path, f.Digest, want[f.Path])
				}
			}

			// The redacted view holds each value's keyed digest or the marker.
			var db map[string]any
			for _, o := range r.RedactedObjects() {
				if o.GetKind() == "Secret" && o.GetName() == "db" {
					db = o.Object
				}
			}
			wantPW := RedactedMarker
			if tt.key != nil {
				wantPW = SecretValueDigest(tt.key, "demo", "db", "stringData", "password", []byte("hunter2"))
			}
			if got := db["stringData"].(map[string]any)["password"]; got != wantPW {
				t.Errorf("redacted password = %v, want %s", got, wantPW)
			}
			if d, _ := RenderDigest(r.RedactedObjects()); d != r.RenderDigest {
				t.Error("render digest is not over the redacted objects")
			}

			// Nothing written leaks: lock, printed objects, inventory report.
			lock, err := NewLock(r, "3.0.0", testClusterIdentity, "v0.1.0")
			if err != nil {
				t.Fatal(err)
			}
			if lock.Render.SecretValuesCovered != tt.covered {
				t.Errorf("lock secretValuesCovered = %t", lock.Render.SecretValuesCovered)
			}
			lockYAML, _ := lock.Marshal()
			var printed bytes.Buffer
			printed.Write(lockYAML)
			for _, o := range r.RedactedObjects() {
				b, _ := yaml.Marshal(o.Object)
				printed.Write(b)
			}
			b, _ := json.Marshal(r.Sources)
			printed.Write(b)
			for _, leak := range leaks(files) {
				if strings.Contains(printed.String(), leak) {
					t.Errorf("output contains %q", leak)
				}
			}
			if _, err := ParseLock(lockYAML); err != nil {
				t.Fatalf("parse own lock: %v", err)
			}

			// Verification is deterministic, and needs the same key.
			again := mustRender(t, memFS(t, files), Options{AllowSecretData: true, SecretDigestKey: tt.key})
			if err := VerifyLock(lock, again); err != nil {
				t.Fatalf("verify: %v", err)
			}
			if tt.key != nil {
				other := mustRender(t, memFS(t, files), Options{AllowSecretData: true, SecretDigestKey: bytes.Repeat([]byte("k"), 32)})
				if other.RenderDigest == r.RenderDigest {
					t.Error("render digest does not depend on the key")
				}
				none := mustRender(t, memFS(t, files), Options{AllowSecretData: true})
				wantInvalid(t, VerifyLock(lock, none), "render.secretValuesCovered", "pass --secret-digest-key-file")
			}
		})
	}
}

func TestSecretValueChange(t *testing.T) {
	files := secretRelease()
	render := func(f map[string]string, key []byte) *Release {
		return mustRender(t, memFS(t, f), Options{AllowSecretData: true, SecretDigestKey: key})
	}
	changed := secretRelease()
	changed["/rel/db.env"] = "DB_PASS=pa55word2\n"
	// With a key, a changed value changes both digests.
	a, b := render(files, testKey), render(changed, testKey)
	if a.RenderDigest == b.RenderDigest || a.SourceDigest == b.SourceDigest {
		t.Error("keyed digests did not bind a Secret value")
	}
	// Without one, the values are not bound (and the lock says so).
	a, b = render(files, nil), render(changed, nil)
	if a.RenderDigest != b.RenderDigest || a.SourceDigest != b.SourceDigest {
		t.Error("redacted digests depend on a Secret value")
	}
}

func TestSecretInvalidData(t *testing.T) {
	f := minimalRelease()
	f["/rel/secret.yaml"] = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  password: 'not base64!'\n"
	f["/rel/kustomization.yaml"] += "- secret.yaml\n"
	_, err := Render(memFS(t, f), "/rel", Options{AllowSecretData: true})
	wantInvalid(t, err, `secret "v1/Secret/demo/db": data["password"] is not valid base64`)
	if strings.Contains(err.Error(), "not base64!") {
		t.Error("error shows the value")
	}
}

func TestSecretWithoutDataIsAllowed(t *testing.T) {
	f := minimalRelease()
	f["/rel/secret.yaml"] = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: sa-token\n  annotations: {kubernetes.io/service-account.name: default}\ntype: kubernetes.io/service-account-token\n"
	f["/rel/kustomization.yaml"] += "- secret.yaml\n"
	r := mustRender(t, memFS(t, f), Options{})
	if !r.SecretValuesCovered {
		t.Error("a Secret without data made values uncovered")
	}
	for _, s := range r.Sources {
		if !IsDigest(s.Digest) {
			t.Errorf("%s: %s, want a plain digest", s.Path, s.Digest)
		}
	}
}
