package intent_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/qinglong/kubectl-ql3/ceremony/package/intent"
	"github.com/qinglong/kubectl-ql3/ceremony/package/stagelayout"
	"github.com/qinglong/kubectl-ql3/ceremony/package/stagelayout/stagelayouttest"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// docBlockRE matches a fenced block whose info string carries a role, e.g.
// "```json canonical=intent".
var docBlockRE = regexp.MustCompile("(?ms)^```[a-z]+ (blob|digest|canonical|pem|intent|name|label|active)=(\\S+)\n(.*?)^```$")

func ociDigest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func domainDigest(domain string, b []byte) string {
	return ociDigest(append([]byte("kubectl-ql3/"+domain+"/v1\x00"), b...))
}

// TestPackagePointerDoc recomputes every worked value in
// docs/package-pointer.md from its documented inputs by the documented
// algorithms, then checks the code agrees.
func TestPackagePointerDoc(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/package-pointer.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{}
	for _, m := range docBlockRE.FindAllStringSubmatch(string(doc), -1) {
		key := m[1] + "=" + m[2]
		if _, dup := blocks[key]; dup {
			t.Fatalf("two %s blocks", key)
		}
		blocks[key] = strings.TrimSuffix(m[3], "\n")
	}
	need := func(key string) string {
		t.Helper()
		v, ok := blocks[key]
		if !ok {
			t.Fatalf("docs/package-pointer.md has no %s block", key)
		}
		return v
	}

	// Every blob's OCI digest.
	for _, part := range []string{"config", "lock", "bundle", "manifest", "statement", "receipt", "previous-lock"} {
		if got := ociDigest([]byte(need("blob=" + part))); got != need("digest="+part) {
			t.Errorf("%s: sha256 of the blob is %s, doc says %s", part, got, need("digest="+part))
		}
	}
	// The manifests name the documented blobs.
	var m, r stagelayout.Manifest
	if err := json.Unmarshal([]byte(need("blob=manifest")), &m); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(need("blob=receipt")), &r); err != nil {
		t.Fatal(err)
	}
	if string(m.Config.Digest) != need("digest=config") || len(m.Layers) != 2 || string(m.Layers[0].Digest) != need("digest=lock") || string(m.Layers[1].Digest) != need("digest=bundle") {
		t.Errorf("manifest does not name the config, lock and bundle: %+v", m)
	}
	if r.Subject == nil || string(r.Subject.Digest) != need("digest=manifest") || r.Subject.Size != int64(len(need("blob=manifest"))) ||
		string(r.Layers[0].Digest) != need("digest=statement") || r.Layers[0].Size != int64(len(need("blob=statement"))) ||
		r.Annotations[stagelayout.AnnotationLockDigest] != need("digest=lock") {
		t.Errorf("receipt does not refer to the manifest and statement: %+v", r)
	}

	// The statement: its unsigned canonical form and its signature.
	var st map[string]string
	if err := json.Unmarshal([]byte(need("blob=statement")), &st); err != nil {
		t.Fatal(err)
	}
	sig, err := base64.StdEncoding.DecodeString(st["signature"])
	if err != nil {
		t.Fatal(err)
	}
	delete(st, "signature")
	unsigned, _ := canon.Canonical(st)
	if string(unsigned) != need("canonical=statement") {
		t.Errorf("unsigned statement:\n got %s\nwant %s", unsigned, need("canonical=statement"))
	}
	key, err := stagelayout.ParsePublicKey("doc", []byte(need("pem=stage-key")+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !ed25519.Verify(key, append([]byte("kubectl-ql3/stage-receipt/v1\x00"), unsigned...), sig) {
		t.Error("the statement's signature does not verify with the documented key")
	}
	if !key.Equal(stagelayouttest.Key(1).Public()) {
		t.Error("the documented key is not the seed-0x01 key")
	}
	if st["stageReference"] != "registry.example.com/qinglong/packages/demo@"+need("digest=manifest") || st["lockDigest"] != need("digest=lock") ||
		st["contentDigest"] != need("digest=bundle") || st["adapterEvidenceDigest"] != need("digest=config") {
		t.Errorf("statement does not describe the manifest: %v", st)
	}

	// The intent: its five stage fields are the table's OCI digests.
	in, err := intent.Parse([]byte(need("intent=example")))
	if err != nil {
		t.Fatalf("example intent: %v", err)
	}
	if in.StageReference != st["stageReference"] || in.LockDigest != need("digest=lock") || in.ContentDigest != need("digest=bundle") ||
		in.AdapterEvidenceDigest != need("digest=config") || in.StageReceiptDigest != need("digest=receipt") ||
		*in.PreviousLockDigest != need("digest=previous-lock") || in.ClusterIdentity != canon.ClusterIdentity("6a1f2e1c-3b5d-4c8e-9f70-2d4b6a8c0e12") {
		t.Errorf("example intent does not bind the example stage: %+v", in)
	}
	var raw any
	_ = json.Unmarshal([]byte(need("intent=example")), &raw)
	byHand, _ := canon.Canonical(raw)
	if string(byHand) != need("canonical=intent") {
		t.Errorf("canonical intent:\n got %s\nwant %s", byHand, need("canonical=intent"))
	}
	if got := domainDigest("package-activation-intent", byHand); got != need("digest=intent") {
		t.Errorf("intent digest by hand %s, doc says %s", got, need("digest=intent"))
	}
	if c, _ := intent.Canonical(in); string(c) != need("canonical=intent") {
		t.Errorf("intent.Canonical %s", c)
	}
	if d, _ := intent.Digest(in); d != need("digest=intent") {
		t.Errorf("intent.Digest %s", d)
	}

	// Target, name and label.
	rm := raw.(map[string]any)
	target, _ := canon.Canonical(map[string]any{"clusterIdentity": rm["clusterIdentity"], "namespace": rm["namespace"], "projectId": rm["projectId"], "packageId": rm["packageId"]})
	if string(target) != need("canonical=target") {
		t.Errorf("canonical target %s", target)
	}
	td := domainDigest("package-target", target)
	if td != need("digest=target") {
		t.Errorf("target digest by hand %s, doc says %s", td, need("digest=target"))
	}
	tb, _ := hex.DecodeString(strings.TrimPrefix(td, "sha256:"))
	enc := func(b []byte) string {
		return strings.ToLower(strings.TrimRight(base32.StdEncoding.EncodeToString(b), "="))
	}
	if name := "ql3p-" + enc(tb[:26]); name != need("name=pointer") {
		t.Errorf("name by hand %s, doc says %s", name, need("name=pointer"))
	}
	if label := enc(tb); label != need("label=pointer") {
		t.Errorf("label by hand %s, doc says %s", label, need("label=pointer"))
	}
	nm, err := intent.NamingOf(in)
	if err != nil || nm.TargetDigest != td || nm.Name != need("name=pointer") || nm.Label != need("label=pointer") {
		t.Errorf("NamingOf %+v %v", nm, err)
	}

	// active.json: built by the code, read back, bound by hand.
	_, active, err := intent.BuildActive(in, time.Date(2026, 7, 24, 1, 30, 0, 0, time.UTC))
	if err != nil || string(active) != need("active=example") {
		t.Errorf("BuildActive:\n got %s\nwant %s\n%v", active, need("active=example"), err)
	}
	if _, err := intent.ParseActive([]byte(need("active=example"))); err != nil {
		t.Errorf("ParseActive(example): %v", err)
	}
	if !strings.Contains(string(doc), "(1266\nbytes)") || len(need("active=example")) != 1266 {
		t.Errorf("active.json is %d bytes; fix the size the doc states", len(need("active=example")))
	}
	var a struct {
		Receipt struct{ IntentDigest, TargetDigest string }
		Intent  json.RawMessage
	}
	_ = json.Unmarshal([]byte(need("active=example")), &a)
	if a.Receipt.IntentDigest != need("digest=intent") || a.Receipt.TargetDigest != need("digest=target") || string(a.Intent) != need("canonical=intent") {
		t.Errorf("active.json receipt does not bind the intent: %+v", a.Receipt)
	}

	// The layout writer writes exactly the documented blobs, and the
	// verifier accepts the example intent against it.
	s, err := stagelayouttest.Write(t.TempDir(), stagelayouttest.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"config", "lock", "bundle", "manifest", "statement", "receipt"} {
		if b, _ := os.ReadFile(s.Blobs[part]); string(b) != need("blob="+part) {
			t.Errorf("ocistagetest writes another %s blob:\n%s", part, b)
		}
	}
	v := &stagelayout.Verifier{Layout: s.Dir, TrustedKeys: []ed25519.PublicKey{key}, Allow: []string{"registry.example.com/qinglong/packages/demo"}}
	if _, err := v.Verify(in); err != nil {
		t.Errorf("Verify(example intent): %v", err)
	}
}
