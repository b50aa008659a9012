package vectors

import (
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/package/intent"
)

// TestPackageIntentVectors runs testdata/vectors/package-intent against
// ceremony/package/intent: activation intents (intent.Parse) and
// active.json (intent.ParseActive), docs/package-pointer.md.
func TestPackageIntentVectors(t *testing.T) {
	each(t, "package-intent", map[string]procedure{
		"intent": func(t *testing.T, v vector, input []byte) {
			in, err := intent.Parse(input)
			verdict(t, v, err)
			if err == nil {
				digests(t, v, intentDigests(t, input), codeIntentDigests(t, in))
			}
		},
		"active": func(t *testing.T, v vector, input []byte) {
			a, err := intent.ParseActive(input)
			verdict(t, v, err)
			if err != nil {
				return
			}
			raw, err := json.Marshal(jsonValue(t, input).(map[string]any)["intent"])
			if err != nil {
				t.Fatal(err)
			}
			want := intentDigests(t, raw)
			want = map[string]string{"intentDigest": want["intentDigest"], "targetDigest": want["targetDigest"]}
			digests(t, v, want, map[string]string{"intentDigest": a.Receipt.IntentDigest, "targetDigest": a.Receipt.TargetDigest})
		},
	})
}

// intentDigests recomputes, from an intent document's bytes alone, the
// intent digest, the target digest and the pointer's name and label.
func intentDigests(t *testing.T, data []byte) map[string]string {
	t.Helper()
	doc := jsonValue(t, data).(map[string]any)
	target := map[string]any{}
	for _, k := range []string{"clusterIdentity", "namespace", "packageId", "projectId"} {
		target[k] = doc[k]
	}
	raw, err := json.Marshal(target)
	if err != nil {
		t.Fatal(err)
	}
	td := domainDigest("package-target", "v1", canonical(t, raw))
	sum, err := hex.DecodeString(strings.TrimPrefix(td, "sha256:"))
	if err != nil {
		t.Fatal(err)
	}
	b32 := base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)
	return map[string]string{
		"intentDigest":                     domainDigest("package-activation-intent", "v1", canonical(t, data)),
		"targetDigest":                     td,
		"ConfigMap name":                   "ql3p-" + b32.EncodeToString(sum[:26]),
		"label qinglong.io/package-target": b32.EncodeToString(sum),
	}
}

func codeIntentDigests(t *testing.T, in intent.Intent) map[string]string {
	t.Helper()
	d, err := intent.Digest(in)
	if err != nil {
		t.Fatal(err)
	}
	n, err := intent.NamingOf(in)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"intentDigest": d, "targetDigest": n.TargetDigest, "ConfigMap name": n.Name, "label qinglong.io/package-target": n.Label}
}
