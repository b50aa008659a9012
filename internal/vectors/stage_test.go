package vectors

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/package/intent"
	"github.com/qinglong/kubectl-ql3/ceremony/package/stagelayout"
)

// TestStageVectors runs testdata/vectors/stage through the stage evidence
// port (docs/package-pointer.md, "Verification, step by step"): each
// vector is a directory holding an OCI layout and the intent to verify
// against it, with the trusted key and allowlist of its parameters.
func TestStageVectors(t *testing.T) {
	each(t, "stage", map[string]procedure{"verify-stage": func(t *testing.T, v vector, _ []byte) {
		in, err := intent.Parse(file(t, "stage", filepath.Join(v.Input, "intent.json")))
		if err != nil {
			t.Fatal(err)
		}
		layout := abs(t, "stage", filepath.Join(v.Input, "layout"))
		ver := stagelayout.Verifier{Layout: layout}
		if a := v.Parameters["allowRef"]; a != "" {
			ver.Allow = []string{a}
		}
		if k := v.Parameters["trustedKey"]; k != "" {
			pub, err := stagelayout.ParsePublicKey(k, file(t, "stage", k))
			if err != nil {
				t.Fatal(err)
			}
			ver.TrustedKeys = []ed25519.PublicKey{pub}
		}
		ev, err := ver.Verify(in)
		verdict(t, v, err)
		if err == nil {
			got := map[string]string{"stageReference": ev.StageReference, "lockDigest": ev.LockDigest, "contentDigest": ev.ContentDigest,
				"adapterEvidenceDigest": ev.AdapterEvidenceDigest, "stageReceiptDigest": ev.StageReceiptDigest}
			digests(t, v, stageDigests(t, layout, in), got)
		}
	}})
}

// stageDigests recomputes the five fields from the layout's files: the
// OCI digest (plain SHA-256) of the manifest blob, of the blobs its config
// and layers name, and of the stage receipt index.json lists for it.
func stageDigests(t *testing.T, layout string, in intent.Intent) map[string]string {
	t.Helper()
	blob := func(d string) []byte {
		b, err := os.ReadFile(filepath.Join(layout, "blobs", "sha256", strings.TrimPrefix(d, "sha256:")))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sum := func(b []byte) string { s := sha256.Sum256(b); return "sha256:" + hex.EncodeToString(s[:]) }
	name, md, _ := strings.Cut(in.StageReference, "@")
	mb := blob(md)
	out := map[string]string{"stageReference": name + "@" + sum(mb)}
	man := jsonValue(t, mb).(map[string]any)
	out["adapterEvidenceDigest"] = sum(blob(man["config"].(map[string]any)["digest"].(string)))
	for _, l := range man["layers"].([]any) {
		d := l.(map[string]any)
		switch d["mediaType"] {
		case "application/vnd.qinglong.plugin-package.lock.v1+json":
			out["lockDigest"] = sum(blob(d["digest"].(string)))
		case "application/vnd.qinglong.plugin-package.bundle.v1.tar+gzip":
			out["contentDigest"] = sum(blob(d["digest"].(string)))
		}
	}
	index, err := os.ReadFile(filepath.Join(layout, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range jsonValue(t, index).(map[string]any)["manifests"].([]any) {
		rb := blob(e.(map[string]any)["digest"].(string))
		r := jsonValue(t, rb).(map[string]any)
		if s, ok := r["subject"].(map[string]any); ok && s["digest"] == md && r["artifactType"] == "application/vnd.qinglong.plugin-package.stage-receipt.v1" &&
			(out["stageReceiptDigest"] == "" || sum(rb) == in.StageReceiptDigest) {
			out["stageReceiptDigest"] = sum(rb)
		}
	}
	return out
}
