package vectors

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
)

// TestWorkerDeliveryVectors runs testdata/vectors/worker-delivery against
// ceremony/worker/delivery (docs/worker.md): delivery files in JSON and
// YAML with their four digests, tokens, and the judgement of a
// PodTemplate's annotations.
func TestWorkerDeliveryVectors(t *testing.T) {
	each(t, "worker-delivery", map[string]procedure{
		"delivery": func(t *testing.T, v vector, input []byte) {
			d, err := delivery.Parse(input)
			verdict(t, v, err)
			if err == nil {
				digests(t, v, deliveryDigests(t, input, v.Parameters), codeDeliveryDigests(t, d, v.Parameters))
			}
		},
		"token": func(t *testing.T, v vector, input []byte) {
			verdict(t, v, delivery.CheckToken(delivery.TrimToken(input)))
		},
		"judge": judgeVector,
	})
}

// judgeVector stamps the delivery with the vector's token and key and
// judges the PodTemplate annotations of its annotations file.
func judgeVector(t *testing.T, v vector, input []byte) {
	d, err := delivery.Parse(input)
	if err != nil {
		t.Fatal(err)
	}
	var ann map[string]string
	if err := json.Unmarshal(file(t, "worker-delivery", v.Annotations), &ann); err != nil {
		t.Fatal(err)
	}
	want, _, err := delivery.StampOf(d, codeDeliveryDigests(t, d, v.Parameters)["tokenDigest"])
	if err != nil {
		t.Fatal(err)
	}
	out, err := delivery.Judge(d, want, ann)
	verdict(t, v, err)
	if err == nil && string(out) != v.Outcome {
		t.Errorf("judgement %q, want %q", out, v.Outcome)
	}
}

// deliveryDigests recomputes docs/worker.md's four digests from the file
// (YAML read as JSON by sigs.k8s.io/yaml), the token and the key, with the
// domain version v2.
func deliveryDigests(t *testing.T, data []byte, p map[string]string) map[string]string {
	t.Helper()
	if !strings.HasPrefix(strings.TrimLeft(string(data), " \t\r\n"), "{") {
		var err error
		if data, err = yaml.YAMLToJSON(data); err != nil {
			t.Fatal(err)
		}
	}
	doc := jsonValue(t, data).(map[string]any)
	target, err := json.Marshal(doc["target"])
	if err != nil {
		t.Fatal(err)
	}
	td := domainDigest("worker-credential-target", "v2", canonical(t, target))
	mac := hmac.New(sha256.New, []byte(p["tokenDigestKey"]))
	mac.Write([]byte("kubectl-ql3/worker-credential-token/v2\x00" + td + "\x00" + doc["credentialId"].(string) + "\x00" + p["token"]))
	tok := "hmac-sha256:" + hex.EncodeToString(mac.Sum(nil))
	pub, err := json.Marshal(map[string]any{"target": td, "deliveryId": doc["deliveryId"], "credentialId": doc["credentialId"],
		"predecessorCredentialId": doc["predecessorCredentialId"], "deploymentGeneration": doc["deploymentGeneration"], "tokenDigest": tok})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"targetDigest":      td,
		"tokenDigest":       tok,
		"publicationDigest": domainDigest("worker-credential-publication", "v2", canonical(t, pub)),
		"deliveryDigest":    domainDigest("worker-credential-delivery", "v2", canonical(t, data)),
	}
}

func codeDeliveryDigests(t *testing.T, d *delivery.Delivery, p map[string]string) map[string]string {
	t.Helper()
	td, err := delivery.TargetDigest(d.Target)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := delivery.TokenDigest([]byte(p["tokenDigestKey"]), td, d.CredentialID, []byte(p["token"]))
	if err != nil {
		t.Fatal(err)
	}
	stamp, _, err := delivery.StampOf(d, tok)
	if err != nil {
		t.Fatal(err)
	}
	pub := stamp[delivery.AnnotationPublicationDigest]
	dd, err := delivery.DeliveryDigest(d)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"targetDigest": td, "tokenDigest": tok, "publicationDigest": pub, "deliveryDigest": dd}
}
