package vectors

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
)

// TestRetiredObjectVectors runs testdata/vectors/retired-object through
// the reviewed digest preflight records and apply compares
// (docs/digests.md, ceremony.md §11.2): each input is an object as a GET
// returns it; the digest is recomputed by hand — the four members
// removed, RFC 8785 by jcs, the retired-object domain — and by
// deploy.ReviewedDigest on the object decoded as the API server's answer
// is.
func TestRetiredObjectVectors(t *testing.T) {
	each(t, "retired-object", map[string]procedure{"reviewed-digest": func(t *testing.T, v vector, input []byte) {
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(input); err != nil {
			t.Fatal(err)
		}
		got, err := deploy.ReviewedDigest(&u)
		verdict(t, v, err)
		obj := jsonValue(t, input).(map[string]any)
		delete(obj, "status")
		for _, m := range []string{"resourceVersion", "managedFields", "generation"} {
			delete(obj["metadata"].(map[string]any), m)
		}
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		digests(t, v, map[string]string{"reviewedDigest": domainDigest("retired-object", "v1", canonical(t, b))}, map[string]string{"reviewedDigest": got})
	}})
}

// The doc-example vector is the worked example of docs/digests.md, byte
// for byte, with its digest.
func TestRetiredObjectVectorIsTheDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/digests.md")
	if err != nil {
		t.Fatal(err)
	}
	block := func(role string) string {
		m := regexp.MustCompile("(?ms)^```[a-z]+ " + role + "=retired-object\n(.*?)^```$").FindSubmatch(doc)
		if m == nil {
			t.Fatalf("docs/digests.md has no %s=retired-object block", role)
		}
		return string(m[1])
	}
	if in := string(file(t, "retired-object", "doc-example.json")); in != block("input") {
		t.Errorf("doc-example.json is not digests.md's input=retired-object:\n%s\n%s", in, block("input"))
	}
	for _, v := range load(t, "retired-object").Vectors {
		if v.Name == "doc-example" && v.Digests["reviewedDigest"] != strings.TrimSuffix(block("digest"), "\n") {
			t.Errorf("doc-example's reviewedDigest %s is not digests.md's %s", v.Digests["reviewedDigest"], block("digest"))
		}
	}
}
