package vectors

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
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
		if r := v.Parameters["release"]; r != "" {
			opts.Release = releaseDigests(abs(t, "receipts", r))
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
	out = append(out, rep.Chain.Reasons...)
	if rep.Release != nil {
		out = append(out, rep.Release.Reasons...)
	}
	return strings.Join(out, "; ")
}

// releaseDigests is what `receipt audit --release dir` compares: the
// release rendered offline, verified against its lock, and its render and
// object digests.
func releaseDigests(dir string) func() (receipts.ReleaseDigests, error) {
	return func() (receipts.ReleaseDigests, error) {
		rel, lock, err := inventory.LoadRelease(filesys.MakeFsOnDisk(), dir, inventory.Options{})
		if err != nil {
			return receipts.ReleaseDigests{}, err
		}
		lockDigest, err := lock.Digest()
		if err != nil {
			return receipts.ReleaseDigests{}, err
		}
		digests, err := rel.ObjectDigests()
		rendered := &receipts.Rendered{RenderDigest: rel.RenderDigest}
		for i, d := range digests {
			rendered.Objects = append(rendered.Objects, receipts.RenderedObject{ID: rel.Inventory[i], Digest: d})
		}
		return receipts.ReleaseDigests{Version: lock.Release.Version, LockDigest: lockDigest, InventoryDigest: rel.InventoryDigest, Rendered: rendered}, err
	}
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
	attestationDigests(t, dir, opts, out)
	return out
}

// renderedSubjects recomputes the render subject and each object's
// (docs/receipts.md §7.2) from rendered-objects.json beside the receipts,
// the release's objects in inventory order, when there is one.
func renderedSubjects(t *testing.T, dir, name string, out map[string]string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "rendered-objects.json"))
	if err != nil {
		return
	}
	var objs []json.RawMessage
	if err := json.Unmarshal(data, &objs); err != nil {
		t.Fatal(err)
	}
	out[name+"kubectl-ql3/render/v1"] = domainDigest("render", "v1", canonical(t, data))
	for _, o := range objs {
		var id struct {
			APIVersion, Kind string
			Metadata         struct{ Namespace, Name string }
		}
		if err := json.Unmarshal(o, &id); err != nil {
			t.Fatal(err)
		}
		group, _, ok := strings.Cut(id.APIVersion, "/")
		if !ok {
			group = ""
		}
		key := strings.Join([]string{group, id.Kind, id.Metadata.Namespace, id.Metadata.Name}, "/")
		out[name+"kubectl-ql3/object/v1/"+key] = domainDigest("object", "v1", canonical(t, o))
	}
}

// attestationDigests recomputes, for each attestation beside its receipt,
// its subjects (docs/receipts.md §7.2) from the receipt file and the
// rendered objects, and
// checks what §7.3 asks with encoding/json, jcs and crypto/ed25519 alone:
// the payload's subjects and predicate, and the signature over the
// pre-authentication encoding written out.
func attestationDigests(t *testing.T, dir string, opts receipts.AuditOptions, out map[string]string) {
	t.Helper()
	atts, err := filepath.Glob(filepath.Join(dir, "*.intoto.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range atts {
		rname := strings.TrimSuffix(filepath.Base(path), ".intoto.json") + ".receipt.json"
		rdata, err := os.ReadFile(filepath.Join(dir, rname))
		if err != nil {
			continue // an orphan: the audit refuses it
		}
		var env struct {
			Payload    string
			Signatures []struct{ Keyid, Sig string }
		}
		if err := json.Unmarshal(file(t, "receipts", filepath.Join(filepath.Base(dir), filepath.Base(path))), &env); err != nil || len(env.Signatures) != 1 {
			t.Fatalf("%s: %v", path, err)
		}
		payload, _ := base64.StdEncoding.DecodeString(env.Payload)
		name := filepath.Base(path) + " subject "
		out[name+rname] = plainSHA256(rdata)
		out[name+"kubectl-ql3/inventory/v1"] = out[rname+" inventoryDigest"]
		var rec struct{ Deployment struct{ LockDigest string } }
		if err := json.Unmarshal(rdata, &rec); err != nil {
			t.Fatal(err)
		}
		out[name+"kubectl-ql3/lock/v1"] = rec.Deployment.LockDigest
		renderedSubjects(t, dir, name, out)
		var st struct {
			Predicate json.RawMessage
			Subject   []struct {
				Name   string
				Digest map[string]string
			}
		}
		if err := json.Unmarshal(payload, &st); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(canonical(t, st.Predicate), rdata) {
			t.Errorf("%s: the predicate is not the receipt", path)
		}
		for _, s := range st.Subject {
			if "sha256:"+s.Digest["sha256"] != out[name+s.Name] {
				t.Errorf("%s: subject %q sha256 %s, recomputed %s", path, s.Name, s.Digest["sha256"], out[name+s.Name])
			}
		}
		sig, _ := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
		pae := fmt.Appendf(nil, "DSSEv1 %d %s %d ", len("application/vnd.in-toto+json"), "application/vnd.in-toto+json", len(payload))
		if pub, ok := opts.TrustedKeys[env.Signatures[0].Keyid]; ok && !ed25519.Verify(pub, append(pae, payload...), sig) {
			t.Errorf("%s: the signature does not verify over PAE", path)
		}
	}
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
	for _, row := range rep.Receipts {
		att := strings.TrimSuffix(row.File, receipts.FileSuffix) + receipts.AttestationSuffix
		if row.Attestation == "" {
			continue
		}
		data, err := row.Receipt.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		env, err := os.ReadFile(att)
		if err != nil {
			t.Fatal(err)
		}
		_, rel, err := receipts.CheckAttestation(env, row.Receipt, data, opts.TrustedKeys)
		if err != nil {
			t.Fatal(err)
		}
		subs, err := receipts.AttestationSubjects(row.Receipt, data, rel)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range subs {
			out[filepath.Base(att)+" subject "+s.Name] = "sha256:" + s.SHA256
		}
	}
	for keyID, pub := range opts.TrustedKeys {
		if k, err := receipts.KeyID(pub); err != nil || k != keyID {
			t.Fatalf("KeyID %s, %v; the trusted set's %s", k, err, keyID)
		}
		out["keyId"] = keyID
	}
	return out
}
