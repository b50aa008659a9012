package vectors

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// TestReceiptsVectors runs testdata/vectors/receipts through the offline
// audit (docs/receipts.md §5): each vector is a directory of receipt and
// signature files, audited from parameters.fromGeneration with
// parameters.trustedKey when given. A failed audit is tamper (§5.4).
func TestReceiptsVectors(t *testing.T) {
	each(t, "receipts", map[string]procedure{"audit": func(t *testing.T, v vector, _ []byte) {
		base, err := strconv.ParseInt(v.Parameters["fromGeneration"], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		opts := receipts.AuditOptions{BaseGeneration: base}
		if k := v.Parameters["trustedKey"]; k != "" {
			if opts.TrustedKeys, err = receipts.LoadTrustedKeys([]string{abs(t, "receipts", k)}); err != nil {
				t.Fatal(err)
			}
		}
		dir := abs(t, "receipts", v.Input)
		rep, err := receipts.Audit([]string{dir}, opts)
		if err == nil && !rep.OK() {
			err = fail.Errorf(fail.Tamper, "%s", auditReasons(rep))
		}
		verdict(t, v, err)
		if err == nil {
			digests(t, v, receiptDigests(t, dir, opts), codeReceiptDigests(t, rep, opts))
		}
	}})
}

// auditReasons joins every reason of a failed audit's rows and chain.
func auditReasons(rep *receipts.Report) string {
	var out []string
	for _, row := range rep.Receipts {
		for _, r := range row.Reasons {
			out = append(out, row.File+": "+r)
		}
	}
	return strings.Join(append(out, rep.Chain.Reasons...), "; ")
}

// receiptDigests recomputes §2.2 and §2.4 from each receipt file's bytes,
// and the keyId of §3 from the trusted key.
func receiptDigests(t *testing.T, dir string, opts receipts.AuditOptions) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.receipt.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, path := range files {
		data := file(t, "receipts", filepath.Join(filepath.Base(dir), filepath.Base(path)))
		r := jsonValue(t, data).(map[string]any)
		name := filepath.Base(path) + " "
		inv, _ := json.Marshal(r["inventory"])
		out[name+"inventoryDigest"] = domainDigest("inventory", "v1", canonical(t, inv))
		delete(r, "selfDigest")
		self, _ := json.Marshal(r)
		out[name+"selfDigest"] = domainDigest("receipt", "v1", canonical(t, self))
		dep, _ := json.Marshal(map[string]any{"generation": r["generation"], "transition": r["transition"], "current": r["deployment"],
			"previous": r["previousDeployment"], "target": r["target"], "tool": r["tool"], "previousReceiptDigest": r["previousReceiptDigest"]})
		out[name+"head.deploymentDigest"] = domainDigest("deployment", "v1", canonical(t, dep))
		id, _ := json.Marshal(map[string]any{"record": map[string]any{"clusterIdentity": r["target"].(map[string]any)["clusterIdentity"]}, "step": "identity"})
		out[name+"steps.identity"] = domainDigest("transcript", "v1", canonical(t, id))
	}
	for _, pub := range opts.TrustedKeys {
		out["keyId"] = plainSHA256(pkixDER(t, pub))
	}
	return out
}

func codeReceiptDigests(t *testing.T, rep *receipts.Report, opts receipts.AuditOptions) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, row := range rep.Receipts {
		r, name := row.Receipt, filepath.Base(row.File)+" "
		self, err := receipts.SelfDigestOf(r)
		if err != nil {
			t.Fatal(err)
		}
		dep, err := receipts.DeploymentDigest(r.Generation, r.Transition, r.Deployment, r.PreviousDeployment, r.Target, r.Tool, r.PreviousReceiptDigest)
		if err != nil {
			t.Fatal(err)
		}
		id, err := receipts.IdentityStepDigest(r.Target.ClusterIdentity)
		if err != nil {
			t.Fatal(err)
		}
		out[name+"inventoryDigest"], out[name+"selfDigest"], out[name+"head.deploymentDigest"], out[name+"steps.identity"] = r.Deployment.InventoryDigest, self, dep, id
	}
	for keyID, pub := range opts.TrustedKeys {
		if k, err := receipts.KeyID(pub); err != nil || k != keyID {
			t.Fatalf("KeyID %s, %v; the trusted set's %s", k, err, keyID)
		}
		out["keyId"] = keyID
	}
	return out
}
