package helmchart

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
)

const password = "chart-s3cret-pa55word"

// secretFixture is the fixture with a Secret template whose value comes
// from a values file of the release.
func secretFixture(t *testing.T) string {
	t.Helper()
	dir := fixture(t)
	write(t, filepath.Join(dir, "charts", "web", "templates", "secret.yaml"),
		"apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-db\n  namespace: {{ .Release.Namespace }}\nstringData:\n  password: {{ .Values.db.password | quote }}\n")
	write(t, filepath.Join(dir, "values", "secret.yaml"), "db:\n  password: "+password+"\n")
	edit(t, dir, "kustomization.yaml", replace("  valuesFile: values/prod.yaml\n", "  valuesFile: values/prod.yaml\n  additionalValuesFiles: [values/secret.yaml]\n"))
	return dir
}

// Secret values a chart renders obey the rules of kustomize Secrets: refused
// without --allow-secret-data; with a key, the values file and the
// template are keyed in source.files and so in the chart's bindings, and
// nothing in the lock — nor the chart digest — is a bare hash of a file
// holding the value; without a key they are redacted and not bound.
func TestChartSecrets(t *testing.T) {
	dir := secretFixture(t)
	_, err := inventory.Render(filesys.MakeFsOnDisk(), dir, inventory.Options{})
	if fail.ClassOf(err) != fail.Invalid || !strings.Contains(err.Error(), `Secret "v1/Secret/helm-demo/web-db" carries data`) || strings.Contains(err.Error(), password) {
		t.Fatalf("chart Secret without --allow-secret-data: %v", err)
	}

	key := []byte(strings.Repeat("k", 32))
	r, err := inventory.Render(filesys.MakeFsOnDisk(), dir, inventory.Options{AllowSecretData: true, SecretDigestKey: key})
	if err != nil {
		t.Fatal(err)
	}
	l, err := inventory.NewLock(r, "1.0.0", clusterIdentity, "v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	data, err := l.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	c := l.Helm.Charts[0]
	if len(c.Values) != 2 || c.Values[1].Path != "values/secret.yaml" || !strings.HasPrefix(c.Values[1].Digest, inventory.HMACPrefix) {
		t.Errorf("the values file holding the Secret value is not keyed: %+v", c.Values)
	}
	if !l.Render.SecretValuesCovered {
		t.Error("secretValuesCovered false with a key")
	}
	values, err := os.ReadFile(filepath.Join(dir, "values", "secret.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(filepath.Join(dir, "charts", "web", "templates", "secret.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(password))
	for _, leak := range []string{password, base64.StdEncoding.EncodeToString([]byte(password)), hex.EncodeToString(sum[:]),
		inventory.FileDigest(values), inventory.FileDigest(tmpl)} {
		if strings.Contains(string(data), leak) {
			t.Errorf("the lock holds %q", leak)
		}
	}
	if err := inventory.VerifyLock(l, r); err != nil {
		t.Errorf("verify with the same key: %v", err)
	}

	r, err = inventory.Render(filesys.MakeFsOnDisk(), dir, inventory.Options{AllowSecretData: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.SecretValuesCovered || r.Helm.Charts[0].Values[1].Digest != inventory.RedactedMarker {
		t.Errorf("without a key: covered %v, values %+v", r.SecretValuesCovered, r.Helm.Charts[0].Values)
	}
	if _, err := inventory.NewLock(r, "1.0.0", clusterIdentity, "v0.1.0"); err != nil {
		t.Errorf("a redacted chart lock is invalid: %v", err)
	}
}
