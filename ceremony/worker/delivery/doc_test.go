package delivery_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"regexp"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
)

var docBlockRE = regexp.MustCompile("(?ms)^```[a-z]+ (delivery|digest|canonical)=(\\S+)\n(.*?)^```$")

// TestWorkerDoc recomputes every worked value of docs/worker.md from its
// documented inputs with crypto/sha256 and crypto/hmac, then checks the
// code agrees.
func TestWorkerDoc(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/worker.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{}
	for _, m := range docBlockRE.FindAllStringSubmatch(string(doc), -1) {
		blocks[m[1]+"="+m[2]] = m[3]
	}
	need := func(k string) string {
		v, ok := blocks[k]
		if !ok {
			t.Fatalf("docs/worker.md has no block %s", k)
		}
		return v
	}
	trim := func(s string) string { return regexp.MustCompile(`\s+$`).ReplaceAllString(s, "") }
	v2 := func(domain, data string) string {
		s := sha256.Sum256([]byte("kubectl-ql3/" + domain + "/v2\x00" + data))
		return "sha256:" + hex.EncodeToString(s[:])
	}
	key, tok := []byte("0123456789abcdef0123456789abcdef"), []byte("example-token-B-7f3a9c2e")

	d, err := delivery.Parse([]byte(need("delivery=example")))
	if err != nil {
		t.Fatal(err)
	}
	target := v2("worker-credential-target", trim(need("canonical=target")))
	if target != trim(need("digest=target")) {
		t.Fatalf("target digest: documented %s, recomputed %s", trim(need("digest=target")), target)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("kubectl-ql3/worker-credential-token/v2\x00" + target + "\x00" + d.CredentialID + "\x00" + string(tok)))
	token := "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
	if token != trim(need("digest=token")) {
		t.Fatalf("token digest: documented %s, recomputed %s", trim(need("digest=token")), token)
	}
	pub := v2("worker-credential-publication", trim(need("canonical=publication")))
	if pub != trim(need("digest=publication")) {
		t.Fatalf("publication digest: documented %s, recomputed %s", trim(need("digest=publication")), pub)
	}
	// The code agrees.
	if got, _ := delivery.TargetDigest(d.Target); got != target {
		t.Fatalf("TargetDigest = %s", got)
	}
	if got, _ := delivery.TokenDigest(key, target, d.CredentialID, tok); got != token {
		t.Fatalf("TokenDigest = %s", got)
	}
	st, _, err := delivery.StampOf(d, token)
	if err != nil || st[delivery.AnnotationPublicationDigest] != pub {
		t.Fatalf("StampOf = %v, %v", st, err)
	}
}
