package intoto

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

const testType = "https://example.test/predicate/v1"

func testKey(seed byte) (ed25519.PrivateKey, string) {
	k := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, 32))
	return k, "sha256:" + strings.Repeat(hex.EncodeToString([]byte{seed}), 32)
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

var testSubjects = []Subject{{Name: "a.json", SHA256: sum("a")}, {Name: "b", SHA256: sum("b")}}

func seal(t *testing.T) ([]byte, ed25519.PrivateKey, string) {
	t.Helper()
	k, id := testKey(1)
	env, err := Seal(testType, []byte(`{"z":1,"a":{"n":9007199254740991,"s":"é"}}`), testSubjects, k, id)
	if err != nil {
		t.Fatal(err)
	}
	return env, k, id
}

// The envelope verifies and yields what was sealed; its signature is
// Ed25519 over DSSE's PAE of the payload, checked here with the library's
// PAE and the standard library alone; the payload is the canonical
// in-toto Statement v1.
func TestSealVerify(t *testing.T) {
	env, k, id := seal(t)
	st, err := Verify(env, map[string]ed25519.PublicKey{id: k.Public().(ed25519.PublicKey)})
	if err != nil {
		t.Fatal(err)
	}
	if st.PredicateType != testType || string(st.Predicate) != `{"a":{"n":9007199254740991,"s":"é"},"z":1}` ||
		len(st.Subjects) != 2 || st.Subjects[1] != testSubjects[1] {
		t.Fatalf("statement %+v", st)
	}
	var e dsse.Envelope
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	payload, _ := base64.StdEncoding.DecodeString(e.Payload)
	sig, _ := base64.StdEncoding.DecodeString(e.Signatures[0].Sig)
	if e.PayloadType != PayloadType || e.Signatures[0].KeyID != id || !ed25519.Verify(k.Public().(ed25519.PublicKey), dsse.PAE(PayloadType, payload), sig) {
		t.Fatalf("envelope %s", env)
	}
	want := `{"_type":"https://in-toto.io/Statement/v1","predicate":{"a":{"n":9007199254740991,"s":"é"},"z":1},"predicateType":"` + testType +
		`","subject":[{"digest":{"sha256":"` + sum("a") + `"},"name":"a.json"},{"digest":{"sha256":"` + sum("b") + `"},"name":"b"}]}`
	if string(payload) != want {
		t.Fatalf("payload\n%s\nwant\n%s", payload, want)
	}
	again, _, _ := seal(t)
	if !bytes.Equal(again, env) {
		t.Fatal("sealing twice gave different bytes")
	}
}

// Each broken rule is refused as tamper, naming what is wrong.
func TestVerifyRefuses(t *testing.T) {
	env, k, id := seal(t)
	keys := map[string]ed25519.PublicKey{id: k.Public().(ed25519.PublicKey)}
	var e dsse.Envelope
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	payload, _ := base64.StdEncoding.DecodeString(e.Payload)
	other, _ := testKey(2)
	byOther, _ := Seal(testType, []byte(`{"z":1}`), testSubjects, other, id) // claims the trusted key id
	rewrap := func(p []byte) []byte {
		return []byte(`{"payload":"` + base64.StdEncoding.EncodeToString(p) + `","payloadType":"` + PayloadType + `","signatures":[{"keyid":"` + id + `","sig":"` + e.Signatures[0].Sig + `"}]}`)
	}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"a byte of the signature changed", bytes.Replace(env, []byte(e.Signatures[0].Sig[:4]), []byte("AAAA"), 1), "does not verify"},
		{"the payload changed and re-encoded", rewrap(bytes.Replace(payload, []byte(`"z":1`), []byte(`"z":2`), 1)), "does not verify"},
		{"signed by another key", byOther, "does not verify"},
		{"a trailing newline", append(bytes.Clone(env), '\n'), "not canonical"},
		{"an extra envelope member", bytes.Replace(env, []byte(`{"payload"`), []byte(`{"extra":1,"payload"`), 1), "unknown member"},
		{"another payload type", bytes.Replace(env, []byte(PayloadType), []byte("application/json"), 1), "payloadType"},
		{"a subject with a uri", rewrap(bytes.Replace(payload, []byte(`"name":"b"`), []byte(`"name":"b","uri":"x"`), 1)), "not the canonical Statement"},
		{"a Statement v0.1", rewrap(bytes.Replace(payload, []byte("Statement/v1"), []byte("Statement/v0.1"), 1)), "_type"},
		{"an unknown Statement member", rewrap(bytes.Replace(payload, []byte(`{"_type"`), []byte(`{"x":1,"_type"`), 1)), "unknown member"},
		{"a line break in the payload's base64", bytes.Replace(env, []byte(e.Payload), []byte(e.Payload[:4]+`\n`+e.Payload[4:]), 1), "base64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if bytes.Equal(c.data, env) {
				t.Fatal("the case changed nothing")
			}
			_, err := Verify(c.data, keys)
			if err == nil || fail.ClassOf(err) != fail.Tamper || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v (class %v), want tamper with %q", err, fail.ClassOf(err), c.want)
			}
		})
	}
	_, err := Verify(env, map[string]ed25519.PublicKey{"sha256:other": k.Public().(ed25519.PublicKey)})
	if err == nil || !strings.Contains(err.Error(), "not a trusted key") {
		t.Fatalf("untrusted key: %v", err)
	}
}

func TestSealRefusesBadInput(t *testing.T) {
	k, id := testKey(1)
	for name, c := range map[string]struct {
		pred []byte
		subs []Subject
	}{
		"no subject":       {[]byte(`{}`), nil},
		"upper-case hex":   {[]byte(`{}`), []Subject{{Name: "a", SHA256: strings.ToUpper(sum("a"))}}},
		"no name":          {[]byte(`{}`), []Subject{{SHA256: sum("a")}}},
		"not an object":    {[]byte(`[1]`), testSubjects},
		"invalid JSON too": {[]byte(`{`), testSubjects},
	} {
		if _, err := Seal(testType, c.pred, c.subs, k, id); fail.ClassOf(err) != fail.Invalid {
			t.Errorf("%s: err %v", name, err)
		}
	}
}
