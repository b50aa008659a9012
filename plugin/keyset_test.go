package plugin_test

import (
	"crypto/ecdh"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/keyset/jwkset"
)

// ksJWK is a deterministic public JWK: Ed25519 for an even seed, P-256
// for an odd one.
func ksJWK(kid string, seed byte) jwkset.JWK {
	b64 := base64.RawURLEncoding.EncodeToString
	s := make([]byte, 32)
	s[31] = seed
	if seed%2 == 0 {
		pub := ed25519.NewKeyFromSeed(s).Public().(ed25519.PublicKey)
		return jwkset.JWK{Kty: "OKP", Kid: kid, Alg: "EdDSA", Crv: "Ed25519", X: b64(pub)}
	}
	priv, err := ecdh.P256().NewPrivateKey(s)
	if err != nil {
		panic(err)
	}
	p := priv.PublicKey().Bytes()
	return jwkset.JWK{Kty: "EC", Kid: kid, Alg: "ES256", Crv: "P-256", X: b64(p[1:33]), Y: b64(p[33:])}
}

// ksWriteFile writes data with mode (not subject to the umask) and returns
// the path.
func ksWriteFile(t *testing.T, dir, name string, data []byte, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func ksWrite(t *testing.T, dir, name string, k *jwkset.Keyset) string {
	t.Helper()
	data, err := k.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return ksWriteFile(t, dir, name, data, 0o644)
}

func ksDigest(t *testing.T, k *jwkset.Keyset) string {
	t.Helper()
	d, err := k.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestKeysetVerify(t *testing.T) {
	dir := t.TempDir()
	a, b, c := ksJWK("a", 2), ksJWK("b", 3), ksJWK("c", 4)
	cur := &jwkset.Keyset{Generation: 5, Keys: []jwkset.JWK{a, b}, RevokedKids: []string{"z"}}
	curFile := ksWrite(t, dir, "keyset-5.json", cur)

	stdout, stderr, code := run(t, nil, "keyset", "verify", curFile)
	if code != 0 {
		t.Fatalf("verify exit %d: %s", code, stderr)
	}
	for _, want := range []string{"generation 5", ksDigest(t, cur), "a   ", "ES256", "revoked: z"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("verify output lacks %q:\n%s", want, stdout)
		}
	}

	next := &jwkset.Keyset{Generation: 6, Keys: []jwkset.JWK{b, c}, RevokedKids: []string{"z", "a"}}
	nextFile := ksWrite(t, dir, "keyset-6.json", next)
	stdout, stderr, code = run(t, nil, "keyset", "verify", nextFile, "--previous", curFile, "-o", "json")
	if code != 0 {
		t.Fatalf("verify --previous exit %d: %s", code, stderr)
	}
	var rep struct {
		Keyset struct {
			Generation  int64
			Digest      string
			RevokedKids []string
		}
		Previous *struct{ Digest string }
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, stdout)
	}
	if rep.Keyset.Generation != 6 || rep.Keyset.Digest != ksDigest(t, next) || !slices.Equal(rep.Keyset.RevokedKids, []string{"z", "a"}) ||
		rep.Previous == nil || rep.Previous.Digest != ksDigest(t, cur) {
		t.Fatalf("-o json report: %+v", rep)
	}

	private := strings.Replace(string(ksEncode(t, cur)), `"kid": "a",`, `"kid": "a", "d": "AAAA",`, 1)
	if err := os.Symlink(curFile, filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}
	ks := func(gen int64, revoked []string, keys ...jwkset.JWK) string {
		return ksWrite(t, t.TempDir(), "k.json", &jwkset.Keyset{Generation: gen, Keys: keys, RevokedKids: revoked})
	}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"private key member", []string{ksWriteFile(t, dir, "private.json", []byte(private), 0o644)}, 2, `keys[0].d: a private key member`},
		{"group writable", []string{ksWriteFile(t, dir, "gw.json", ksEncode(t, cur), 0o664)}, 2, "mode 0664 is group or world writable"},
		{"symbolic link", []string{filepath.Join(dir, "link.json")}, 2, "a symbolic link"},
		{"larger than --max-bytes", []string{curFile, "--max-bytes", "100"}, 2, "more than the cap of 100"},
		{"--max-bytes above the hard cap", []string{curFile, "--max-bytes", "262145"}, 2, "--max-bytes 262145"},
		{"no file", nil, 2, "accepts 1 arg"},
		{"bad --previous", []string{curFile, "--previous", filepath.Join(dir, "private.json")}, 2, "--previous: "},
		{"generation decreases", []string{curFile, "--previous", nextFile}, 3, "generation 5 is older than the previous generation 6"},
		{"same generation rewritten", []string{ks(5, []string{"z"}, a, b, c), "--previous", curFile}, 3, "generation 5 already exists with digest " + ksDigest(t, cur)},
		{"revocation removed", []string{ks(6, nil, a, b), "--previous", curFile}, 3, "revocations only append"},
		{"active key removed silently", []string{ks(6, []string{"z"}, b), "--previous", curFile}, 3, `active key "a" of generation 5 is missing`},
		{"key ID reused for another key", []string{ks(6, []string{"z"}, ksJWK("a", 8), b), "--previous", curFile}, 3, `key "a" changed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := run(t, nil, append([]string{"keyset", "verify"}, tt.args...)...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantErr) {
				t.Fatalf("exit %d, stderr %q; want exit %d with %q", code, stderr, tt.wantCode, tt.wantErr)
			}
			if stdout != "" {
				t.Fatalf("a failed verify printed to stdout: %q", stdout)
			}
		})
	}
}

func ksEncode(t *testing.T, k *jwkset.Keyset) []byte {
	t.Helper()
	data, err := k.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestKeysetPlanRotation(t *testing.T) {
	dir := t.TempDir()
	cur := &jwkset.Keyset{Generation: 7, Keys: []jwkset.JWK{ksJWK("old-1", 2), ksJWK("old-2", 3)}, RevokedKids: []string{}}
	curFile := ksWrite(t, dir, "keyset-7.json", cur)
	newKey, err := json.Marshal(ksJWK("new", 6))
	if err != nil {
		t.Fatal(err)
	}
	addFile := ksWriteFile(t, dir, "new.jwk.json", newKey, 0o644)

	stdout, stderr, code := run(t, nil, "keyset", "plan-rotation", "--current", curFile, "--add", addFile)
	if code != 0 {
		t.Fatalf("plan-rotation exit %d: %s", code, stderr)
	}
	overlapFile, revokingFile := filepath.Join(dir, "keyset-8.json"), filepath.Join(dir, "keyset-9.json")
	for _, want := range []string{"wrote " + overlapFile, "wrote " + revokingFile, "every replica has observed generation 8", "only then publish " + revokingFile} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	read := func(p string) *jwkset.Keyset {
		data, err := jwkset.ReadFile(p, 0) // also checks the written mode
		if err != nil {
			t.Fatal(err)
		}
		k, err := jwkset.Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	overlap, revoking := read(overlapFile), read(revokingFile)
	if overlap.Generation != 8 || !slices.Equal(overlap.Kids(), []string{"old-1", "old-2", "new"}) || len(overlap.RevokedKids) != 0 {
		t.Fatalf("overlap generation: %+v", overlap)
	}
	if revoking.Generation != 9 || !slices.Equal(revoking.Kids(), []string{"new"}) || !slices.Equal(revoking.RevokedKids, []string{"old-1", "old-2"}) {
		t.Fatalf("revoking generation: %+v", revoking)
	}
	for _, step := range [][2]string{{overlapFile, curFile}, {revokingFile, overlapFile}} {
		if _, stderr, code := run(t, nil, "keyset", "verify", step[0], "--previous", step[1]); code != 0 {
			t.Fatalf("verify %s --previous %s: exit %d: %s", step[0], step[1], code, stderr)
		}
	}

	// Never replaces: a second run fails and leaves both files as they were.
	before, _ := os.ReadFile(overlapFile)
	_, stderr, code = run(t, nil, "keyset", "plan-rotation", "--current", curFile, "--add", addFile)
	if code != 2 || !strings.Contains(stderr, overlapFile+" already exists") {
		t.Fatalf("second run: exit %d, %s", code, stderr)
	}
	if after, _ := os.ReadFile(overlapFile); string(after) != string(before) {
		t.Fatal("the second run changed the overlap file")
	}

	// If the second file cannot be created, the first is not left behind.
	out := t.TempDir()
	blocker := ksWriteFile(t, out, "keyset-9.json", []byte("x"), 0o644)
	_, stderr, code = run(t, nil, "keyset", "plan-rotation", "--current", curFile, "--add", addFile, "--out-dir", out)
	if code != 2 || !strings.Contains(stderr, blocker+" already exists") {
		t.Fatalf("blocked run: exit %d, %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "keyset-8.json")); !os.IsNotExist(err) {
		t.Fatalf("the overlap file was left behind: %v", err)
	}

	// --revoke and -o json.
	out = t.TempDir()
	stdout, stderr, code = run(t, nil, "keyset", "plan-rotation", "--current", curFile, "--add", addFile, "--revoke", "old-2", "--out-dir", out, "-o", "json")
	if code != 0 {
		t.Fatalf("--revoke old-2: exit %d: %s", code, stderr)
	}
	var rep struct {
		Overlap, Revoking struct {
			File   string
			Digest string
		}
		Revoked   []string
		Procedure []string
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, stdout)
	}
	r := read(filepath.Join(out, "keyset-9.json"))
	if !slices.Equal(rep.Revoked, []string{"old-2"}) || rep.Revoking.File != filepath.Join(out, "keyset-9.json") || rep.Revoking.Digest != ksDigest(t, r) ||
		!slices.Equal(r.Kids(), []string{"old-1", "new"}) || len(rep.Procedure) != 4 {
		t.Fatalf("-o json report %+v, revoking generation %+v", rep, r)
	}

	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"no --add", []string{"--current", curFile}, 2, `required flag(s) "add" not set`},
		{"revoke a key that is not active", []string{"--current", curFile, "--add", addFile, "--revoke", "nope", "--out-dir", t.TempDir()}, 2, `revoke: "nope" is not an active key`},
		{"new key already active", []string{"--current", curFile, "--add", ksWriteFile(t, t.TempDir(), "k.json", ksJSON(t, ksJWK("old-1", 10)), 0o644), "--out-dir", t.TempDir()}, 2, `key ID "old-1" is already active`},
		{"private key to add", []string{"--current", curFile, "--add", ksWriteFile(t, t.TempDir(), "k.json", []byte(strings.Replace(string(newKey), `"kty"`, `"d":"AAAA","kty"`, 1)), 0o644), "--out-dir", t.TempDir()}, 2, "--add: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := run(t, nil, append([]string{"keyset", "plan-rotation"}, tt.args...)...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantErr) {
				t.Fatalf("exit %d, stderr %q; want exit %d with %q", code, stderr, tt.wantCode, tt.wantErr)
			}
		})
	}
}

func ksJSON(t *testing.T, v any) []byte {
	t.Helper()
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
