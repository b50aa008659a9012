package delivery

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

const cluster = "sha256:9e65a5e159c1e99426f8a065301794abf6e97e5bbb8b6714a5deef8e56da17a5"

const goodYAML = `schema: qinglong/worker-credential-delivery@v1
deliveryId: d-0002
credentialId: cred-b
predecessorCredentialId: cred-a
deploymentGeneration: 2
target:
  clusterIdentity: ` + cluster + `
  namespace: qinglong
  secret: ql3-worker-credential
  key: credential-token
  deployment: ql3-worker
`

const goodJSON = `{"schema":"qinglong/worker-credential-delivery@v1","deliveryId":"d-0001","credentialId":"cred-a","predecessorCredentialId":null,"deploymentGeneration":1,
"target":{"clusterIdentity":"` + cluster + `","namespace":"qinglong","secret":"ql3-worker-credential","key":"credential-token","deployment":"ql3-worker"}}`

func TestParse(t *testing.T) {
	d, err := Parse([]byte(goodYAML))
	if err != nil {
		t.Fatal(err)
	}
	if d.DeliveryID != "d-0002" || d.CredentialID != "cred-b" || d.Predecessor == nil || *d.Predecessor != "cred-a" || d.Generation != 2 || d.Target.Deployment != "ql3-worker" || d.Target.ClusterIdentity != cluster {
		t.Fatalf("parsed %+v", d)
	}
	d, err = Parse([]byte(goodJSON))
	if err != nil || d.Predecessor != nil || d.Generation != 1 {
		t.Fatalf("json: %+v %v", d, err)
	}
	for _, c := range []struct{ name, doc, want string }{
		{"unknown member", strings.Replace(goodYAML, "credentialId:", "token: x\ncredentialId:", 1), `unknown member "token"`},
		{"duplicate yaml key", goodYAML + "deliveryId: d-9\n", "YAML"},
		{"duplicate json member", strings.Replace(goodJSON, `"credentialId":"cred-a"`, `"credentialId":"cred-a","credentialId":"cred-z"`, 1), "appears twice"},
		{"missing member", strings.Replace(goodJSON, `"deploymentGeneration":1,`, "", 1), `"deploymentGeneration" is missing`},
		{"generation quoted", strings.Replace(goodYAML, "deploymentGeneration: 2", `deploymentGeneration: "2"`, 1), "plain decimal"},
		{"generation zero", strings.Replace(goodYAML, "deploymentGeneration: 2", "deploymentGeneration: 0", 1), "plain decimal"},
		{"generation float", strings.Replace(goodJSON, `"deploymentGeneration":1`, `"deploymentGeneration":1.0`, 1), "plain decimal"},
		// docs/worker.md: one rule for YAML and JSON — the number as
		// written is plain decimal digits (YAML's conversion would make
		// each of these 2).
		{"yaml generation float", strings.Replace(goodYAML, "deploymentGeneration: 2", "deploymentGeneration: 2.0", 1), "plain decimal"},
		{"yaml generation exponent", strings.Replace(goodYAML, "deploymentGeneration: 2", "deploymentGeneration: 2e0", 1), "plain decimal"},
		{"yaml generation hex", strings.Replace(goodYAML, "deploymentGeneration: 2", "deploymentGeneration: 0x2", 1), "plain decimal"},
		{"yaml generation octal", strings.Replace(goodYAML, "deploymentGeneration: 2", "deploymentGeneration: 0o2", 1), "plain decimal"},
		{"yaml generation leading zeros", strings.Replace(goodYAML, "deploymentGeneration: 2", "deploymentGeneration: 0002", 1), "plain decimal"},
		{"yaml generation sign", strings.Replace(goodYAML, "deploymentGeneration: 2", "deploymentGeneration: +2", 1), "plain decimal"},
		{"json generation exponent", strings.Replace(goodJSON, `"deploymentGeneration":1`, `"deploymentGeneration":1e0`, 1), "plain decimal"},
		{"json generation leading zero", strings.Replace(goodJSON, `"deploymentGeneration":1`, `"deploymentGeneration":01`, 1), ""},
		{"id upper", strings.Replace(goodYAML, "d-0002", "D-0002", 1), "deliveryId"},
		{"id too long", strings.Replace(goodYAML, "d-0002", strings.Repeat("a", 41), 1), "at most 40"},
		{"id number", strings.Replace(goodYAML, "credentialId: cred-b", "credentialId: 12", 1), "credentialId: 12 is not a string"},
		{"predecessor equal", strings.Replace(goodYAML, "cred-a", "cred-b", 1), "equals credentialId"},
		{"predecessor number", strings.Replace(goodYAML, "predecessorCredentialId: cred-a", "predecessorCredentialId: 3", 1), "or null"},
		{"other secret", strings.Replace(goodYAML, "secret: ql3-worker-credential", "secret: ql3-worker-identity", 1), "always \"ql3-worker-credential\""},
		{"other key", strings.Replace(goodYAML, "key: credential-token", "key: tls.key", 1), "always \"credential-token\""},
		{"bad cluster", strings.Replace(goodYAML, cluster, "sha256:00", 1), "clusterIdentity"},
		{"bad namespace", strings.Replace(goodYAML, "namespace: qinglong", "namespace: Qing_long", 1), "namespace"},
		{"bad deployment", strings.Replace(goodYAML, "deployment: ql3-worker", "deployment: ql3/worker", 1), "Deployment name"},
		{"schema", strings.Replace(goodYAML, "@v1", "@v2", 1), "schema"},
		{"trailing", goodJSON + "{}", "after the JSON object"},
		{"not object", "[]", "not a JSON object"},
		{"target unknown", strings.Replace(goodYAML, "  key: credential-token", "  key: credential-token\n  extra: x", 1), `unknown member "extra"`},
		{"too big", goodYAML + "#" + strings.Repeat("x", MaxFileBytes), "at most"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.doc))
			if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want invalid containing %q", err, c.want)
			}
		})
	}
}

func TestToken(t *testing.T) {
	for _, c := range []struct {
		tok string
		ok  bool
	}{
		{strings.Repeat("a", 16), true}, {strings.Repeat("a", 15), false}, {strings.Repeat("a", 4097), false},
		{"abcdefgh ijklmnopq", false}, {"abcdefghijklmnopé", false}, {"abcdefghijklmnop\n", false},
	} {
		if err := CheckToken([]byte(c.tok)); (err == nil) != c.ok {
			t.Errorf("CheckToken(%q) = %v", c.tok, err)
		} else if err != nil && strings.Contains(err.Error(), c.tok[:8]) {
			t.Errorf("error shows the token: %v", err)
		}
	}
	if got := string(TrimToken([]byte("tok\r\n"))); got != "tok" {
		t.Errorf("TrimToken = %q", got)
	}
	if got := string(TrimToken([]byte("tok\n\n"))); got != "tok\n" {
		t.Errorf("TrimToken strips one newline only: %q", got)
	}
}

// TestTokenDigest recomputes the keyed digest from its documented message.
func TestTokenDigest(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	got, err := TokenDigest(key, "sha256:t", "cred-a", []byte("secret-token-value"))
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("kubectl-ql3/worker-credential-token/v2\x00sha256:t\x00cred-a\x00secret-token-value"))
	if want := "hmac-sha256:" + hex.EncodeToString(m.Sum(nil)); got != want {
		t.Fatalf("got %s want %s", got, want)
	}
	other, _ := TokenDigest([]byte(strings.Repeat("j", 32)), "sha256:t", "cred-a", []byte("secret-token-value"))
	if other == got {
		t.Fatal("the key does not change the digest")
	}
	if _, err := TokenDigest(key[:31], "sha256:t", "cred-a", []byte("x")); !fail.Is(err, fail.Invalid) {
		t.Fatalf("short key: %v", err)
	}
}

func stampOf(t *testing.T, doc, tokDigest string) (*Delivery, Stamp) {
	t.Helper()
	d, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := StampOf(d, tokDigest)
	if err != nil {
		t.Fatal(err)
	}
	return d, s
}

func TestJudge(t *testing.T) {
	first, firstStamp := stampOf(t, goodJSON, "hmac-sha256:aa")
	second, secondStamp := stampOf(t, goodYAML, "hmac-sha256:bb")
	if firstStamp[AnnotationPublicationDigest] == secondStamp[AnnotationPublicationDigest] {
		t.Fatal("two deliveries share a publication digest")
	}
	with := func(s Stamp, k, v string) map[string]string {
		m := map[string]string{"other": "kept"}
		for kk, vv := range s {
			m[kk] = vv
		}
		if v == "" {
			delete(m, k)
		} else if k != "" {
			m[k] = v
		}
		return m
	}
	for _, c := range []struct {
		name string
		d    *Delivery
		want Stamp
		ann  map[string]string
		v    Verdict
		cls  fail.Class
	}{
		{"first on empty", first, firstStamp, map[string]string{"x": "y"}, Advance, 0},
		{"second on first", second, secondStamp, with(firstStamp, "", ""), Advance, 0},
		{"replay first", first, firstStamp, with(firstStamp, "", ""), Replay, 0},
		{"replay second", second, secondStamp, with(secondStamp, "", ""), Replay, 0},
		{"second on empty", second, secondStamp, nil, "", fail.Conflict},
		{"first on first's successor", first, firstStamp, with(secondStamp, "", ""), "", fail.Conflict},
		{"wrong predecessor", second, secondStamp, with(firstStamp, AnnotationCredentialID, "cred-x"), "", fail.Conflict},
		{"generation not above", second, secondStamp, with(firstStamp, AnnotationGeneration, "2"), "", fail.Conflict},
		{"same delivery other values", second, secondStamp, with(secondStamp, AnnotationTokenDigest, "hmac-sha256:cc"), "", fail.Conflict},
		{"partial", second, secondStamp, with(firstStamp, AnnotationTokenDigest, ""), "", fail.Tamper},
		{"bad generation", second, secondStamp, with(firstStamp, AnnotationGeneration, "01"), "", fail.Tamper},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := Judge(c.d, c.want, c.ann)
			if c.cls != 0 {
				if !fail.Is(err, c.cls) {
					t.Fatalf("got %v %v, want class %v", v, err, c.cls)
				}
				if strings.Contains(err.Error(), "hmac-sha256") {
					t.Fatalf("error names a token digest: %v", err)
				}
				return
			}
			if err != nil || v != c.v {
				t.Fatalf("got %v %v, want %v", v, err, c.v)
			}
		})
	}
	if !Carries(with(secondStamp, "", ""), secondStamp) || Carries(with(firstStamp, "", ""), secondStamp) {
		t.Fatal("Carries")
	}
}
