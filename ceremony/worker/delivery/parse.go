package delivery

import (
	"bytes"
	"unicode/utf8"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/internal/strictjson"
)

var members = []string{"schema", "deliveryId", "credentialId", "predecessorCredentialId", "deploymentGeneration", "target"}
var targetMembers = []string{"clusterIdentity", "namespace", "secret", "key", "deployment"}

// Parse reads a delivery file: at most MaxFileBytes of UTF-8, JSON (its
// first non-blank byte is '{') or YAML (read as JSON by sigs.k8s.io/yaml,
// strictly: a duplicate key is refused). The document is one object with
// exactly the members of docs/worker.md, no unknown, missing or duplicate
// member, strings as strings, deploymentGeneration a plain decimal integer,
// predecessorCredentialId a string or null; then Validate.
func Parse(data []byte) (*Delivery, error) {
	if len(data) > MaxFileBytes {
		return nil, invalidf("the file is %d bytes, at most %d are allowed", len(data), MaxFileBytes)
	}
	if !utf8.Valid(data) {
		return nil, invalidf("the file is not UTF-8")
	}
	js, yamlGen := data, ""
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		var err error
		if js, err = yaml.YAMLToJSONStrict(data); err != nil {
			return nil, invalidf("not valid YAML: %v", err)
		}
		yamlGen = yamlScalar(data, "deploymentGeneration")
	}
	m, err := strict.Object("the file", js, members)
	if err != nil {
		return nil, err
	}
	// One rule for both forms: the generation as written in the file is
	// plain decimal digits. YAML's conversion to JSON would turn 2.0, 2e0,
	// 0x2 or 0002 into 2, so a YAML file is judged by its own text.
	if yamlGen != "" {
		if _, err := ParseGeneration(yamlGen); err != nil {
			return nil, invalidf("deploymentGeneration: %v", err)
		}
	}
	d := &Delivery{}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"schema", &d.Schema}, {"deliveryId", &d.DeliveryID}, {"credentialId", &d.CredentialID}} {
		if *f.dst, err = strict.String(f.name, m[f.name]); err != nil {
			return nil, err
		}
	}
	if raw := m["predecessorCredentialId"]; !bytes.Equal(raw, []byte("null")) {
		p, err := strict.String("predecessorCredentialId", raw)
		if err != nil {
			return nil, invalidf("predecessorCredentialId: write a credential id or null (null only for the first delivery)")
		}
		d.Predecessor = &p
	}
	g := string(m["deploymentGeneration"])
	if d.Generation, err = ParseGeneration(g); err != nil {
		return nil, invalidf("deploymentGeneration: %v", err)
	}
	tm, err := strict.Object("target", m["target"], targetMembers)
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"clusterIdentity", &d.Target.ClusterIdentity}, {"namespace", &d.Target.Namespace}, {"secret", &d.Target.Secret}, {"key", &d.Target.Key}, {"deployment", &d.Target.Deployment}} {
		if *f.dst, err = strict.String("target."+f.name, tm[f.name]); err != nil {
			return nil, err
		}
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return d, nil
}

// strict reads the members with this format's error texts (pinned by its
// test vectors).
var strict = strictjson.Reader{Invalid: invalidf, NotString: "is not a string"}

// yamlScalar is the source text of the plain (unquoted) scalar that key
// maps to at the top level of a YAML document, or "" when there is none
// (the key is absent, quoted, or not a scalar: the JSON rules judge those).
func yamlScalar(data []byte, key string) string {
	var doc yamlv3.Node
	if yamlv3.Unmarshal(data, &doc) != nil || doc.Kind != yamlv3.DocumentNode || len(doc.Content) != 1 {
		return ""
	}
	m := doc.Content[0]
	if m.Kind != yamlv3.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Value == key && v.Kind == yamlv3.ScalarNode && v.Style == 0 {
			return v.Value
		}
	}
	return ""
}
