package vectors

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// root is the vectors' folder, relative to this package.
const root = "../../testdata/vectors"

// vector is one entry of a format's vectors.json (docs/vectors.md).
type vector struct {
	Name      string `json:"name"`
	Procedure string `json:"procedure"`
	Input     string `json:"input"`
	Previous  string `json:"previous,omitempty"`
	Ledger    string `json:"ledger,omitempty"`
	Output    string `json:"output,omitempty"`
	// Annotations names a file of a Worker PodTemplate's annotations.
	Annotations string `json:"annotations,omitempty"`
	// Parameters are the procedure's other inputs (a token, a key).
	Parameters map[string]string `json:"parameters,omitempty"`
	// Where is the position an env-bundle error names ("" for none).
	Where *string `json:"where,omitempty"`
	// Carrier names the carrier a names file is merged against.
	Carrier string `json:"carrier,omitempty"`
	// Fleet names the fleet file a fleet plan is matched against.
	Fleet string `json:"fleet,omitempty"`
	// Figures are an accepted carrier's counts and sizes, a merge report's.
	Figures map[string]int `json:"figures,omitempty"`
	// Outcome is an accepted judgement's answer (advance, replay).
	Outcome   string            `json:"outcome,omitempty"`
	Verdict   string            `json:"verdict"`
	Rule      string            `json:"rule,omitempty"`
	Class     int               `json:"class,omitempty"`
	Error     string            `json:"error,omitempty"`
	Digests   map[string]string `json:"digests,omitempty"`
	Note      string            `json:"note"`
	OnCluster *struct {
		Class int    `json:"class"`
		Why   string `json:"why"`
	} `json:"onCluster,omitempty"`
}

type manifest struct {
	Format  string   `json:"format"`
	Doc     string   `json:"doc"`
	Vectors []vector `json:"vectors"`
}

// load reads testdata/vectors/FORMAT/vectors.json strictly and checks each
// vector's form: a known verdict, a rule and class for a reject, the
// files it names present, and every file of the folder used.
func load(t *testing.T, format string) manifest {
	t.Helper()
	dir := filepath.Join(root, format)
	raw, err := os.ReadFile(filepath.Join(dir, "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	var m manifest
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%s/vectors.json: %v", format, err)
	}
	if m.Format != format || len(m.Vectors) == 0 {
		t.Fatalf("%s/vectors.json: format %q, %d vectors", format, m.Format, len(m.Vectors))
	}
	used, names := map[string]bool{"vectors.json": true}, map[string]bool{}
	for _, v := range m.Vectors {
		if names[v.Name] {
			t.Errorf("%s: vector %q twice", format, v.Name)
		}
		names[v.Name] = true
		switch {
		case v.Verdict == "accept" && v.Rule == "" && v.Class == 0:
		case v.Verdict == "reject" && v.Rule != "" && v.Class >= 2 && v.Class <= 5 && len(v.Digests) == 0:
		case v.Verdict == "miss" && v.Rule != "" && v.Class == 0 && len(v.Digests) == 0:
		default:
			t.Errorf("%s/%s: verdict %q with rule %q and class %d", format, v.Name, v.Verdict, v.Rule, v.Class)
		}
		for _, f := range []string{v.Input, v.Previous, v.Ledger, v.Output, v.Annotations, v.Carrier, v.Fleet, v.Parameters["trustedKey"], v.Parameters["keysetSecret"], v.Parameters["release"]} {
			if f != "" {
				used[filepath.ToSlash(strings.SplitN(f, "/", 2)[0])] = true
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !used[e.Name()] {
			t.Errorf("%s/%s: no vector uses it", format, e.Name())
		}
	}
	return m
}

// file reads one file of a format's folder.
func file(t *testing.T, format, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, format, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// verdict checks the code's answer err against the vector: nil for accept;
// for reject, the class's exit code and the rule's error text.
func verdict(t *testing.T, v vector, err error) {
	t.Helper()
	if v.Verdict == "accept" {
		if err != nil {
			t.Fatalf("want accept, got %v (class %d)", err, fail.ClassOf(err).ExitCode())
		}
		return
	}
	if err == nil {
		t.Fatalf("want reject by %s (class %d), got accept", v.Rule, v.Class)
	}
	if got := fail.ClassOf(err).ExitCode(); got != v.Class {
		t.Errorf("class %d, want %d (%s): %v", got, v.Class, v.Rule, err)
	}
	if !strings.Contains(err.Error(), v.Error) {
		t.Errorf("error %q lacks %q (%s)", err, v.Error, v.Rule)
	}
}

// digests compares, for each digest the vector names, the file's value,
// the independent recomputation (want) and the code's (got).
func digests(t *testing.T, v vector, want, got map[string]string) {
	t.Helper()
	for name, inFile := range v.Digests {
		if want[name] != inFile || got[name] != inFile {
			t.Errorf("%s: vector file %s, recomputed %q, code %q", name, inFile, want[name], got[name])
		}
	}
	for name := range want {
		if _, ok := v.Digests[name]; !ok {
			t.Errorf("%s: recomputed but not in the vector", name)
		}
	}
}

// canonical is RFC 8785 of data, by the jcs library, not the project's canon.
func canonical(t *testing.T, data []byte) []byte {
	t.Helper()
	c, err := jcs.Transform(data)
	if err != nil {
		t.Fatalf("RFC 8785: %v", err)
	}
	return c
}

// domainDigest is docs/digests.md's primitive, written out again:
// "sha256:" + hex(SHA-256("kubectl-ql3/" + domain + "/" + version + 0x00 + data)).
func domainDigest(domain, version string, data []byte) string {
	h := sha256.New()
	h.Write([]byte("kubectl-ql3/" + domain + "/" + version + "\x00"))
	h.Write(data)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// jsonValue decodes data (already accepted by the code) into a generic value.
func jsonValue(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// thumbprint is RFC 7638 over a generic JWK: its required members only,
// canonical, SHA-256, base64url without padding.
func thumbprint(t *testing.T, key map[string]any) string {
	t.Helper()
	req := map[string][]string{"OKP": {"crv", "kty", "x"}, "EC": {"crv", "kty", "x", "y"}, "RSA": {"e", "kty", "n"}}[key["kty"].(string)]
	m := map[string]any{}
	for _, name := range req {
		m[name] = key[name]
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(canonical(t, b))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// plainSHA256 is "sha256:" + hex(SHA-256(data)): an OCI digest, a keyId.
func plainSHA256(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// pkixDER is the DER of an Ed25519 public key's SubjectPublicKeyInfo,
// written out from RFC 8410 §4 (the fixed 12-byte prefix, then the key).
func pkixDER(t *testing.T, pub ed25519.PublicKey) []byte {
	t.Helper()
	if len(pub) != ed25519.PublicKeySize {
		t.Fatalf("an Ed25519 public key of %d bytes", len(pub))
	}
	return append([]byte{0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00}, pub...)
}

// procedure is how a format's runner applies one procedure to a vector:
// input is the bytes of its input file (nil when the input is a directory).
type procedure func(t *testing.T, v vector, input []byte)

// each runs every vector of format as a subtest, through the procedure its
// manifest names; an unknown procedure fails.
func each(t *testing.T, format string, procs map[string]procedure) {
	t.Helper()
	for _, v := range load(t, format).Vectors {
		t.Run(v.Name, func(t *testing.T) {
			p, ok := procs[v.Procedure]
			if !ok {
				t.Fatalf("unknown procedure %q", v.Procedure)
			}
			var input []byte
			if st, err := os.Stat(filepath.Join(root, format, v.Input)); err != nil {
				t.Fatal(err)
			} else if !st.IsDir() {
				input = file(t, format, v.Input)
			}
			p(t, v, input)
		})
	}
}

// abs is the absolute path of name in format's folder (the safe file
// readers take absolute paths only).
func abs(t *testing.T, format, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(root, format, name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}
