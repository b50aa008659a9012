package deploy_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy/deploytest"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// TestHeadAtTenThousand, on a real API server: a v1 Head of 10,001
// objects as the first format wrote it (its ConfigMap 92% of the API's
// 1 MiB) is read, and the ceremony's next Head writes (applying, then
// committed: the compare-and-swap and settle reads apply uses) supersede
// it in the v2 form; and the Heads of 10k releases with realistic names
// (serial, and hashed) are written and read back, then a retire of 1,000
// of their objects (head.json compressed, docs/head.md §2.3). Each
// ConfigMap, as the API returns it, is measured: the v2 ones are within
// 256 KiB, and each read
// gives the logical Head whose receipt is the written Head's, byte for
// byte.
func TestHeadAtTenThousand(t *testing.T) {
	ctx := context.Background()
	cl := cluster(t, cp.RESTConfig())
	o := options(t, cl, t.TempDir())
	identity, err := deploy.ReadClusterIdentity(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	ns := targetNamespace(t)
	old := scaleHead(t, identity, ns, testkit.ShortNames("ql3-scale"))
	rv := writeV1Head(t, ns, old)
	if size, schema := apiHeadSize(t, ns); schema != deploy.HeadSchema {
		t.Fatalf("the old Head is stored as %s", schema)
	} else {
		t.Logf("v1 Head of %d objects: the ConfigMap is %d bytes as the API returns it", len(old.Current.Inventory), size)
	}
	read := readScaleHead(t, ns, old)
	n := deploytest.Next(t, read, "3.1.0")
	next := &n
	next.Phase, next.Steps.Apply, next.Steps.Converge, next.Steps.FinalIdentity = deploy.PhaseApplying, "", "", ""
	sealScale(t, next)
	if rv, err = o.WriteHead(ctx, ns, rv, read, next); err != nil {
		t.Fatalf("write generation 2 (applying) over the v1 Head: %v", err)
	}
	committed := *next
	committed.Phase, committed.Steps = deploy.PhaseCommitted, old.Steps
	sealScale(t, &committed)
	if _, err = o.WriteHead(ctx, ns, rv, next, &committed); err != nil {
		t.Fatalf("commit generation 2: %v", err)
	}
	checkV2Head(t, ns, &committed)

	for _, hashed := range []bool{false, true} {
		ns := targetNamespace(t)
		install := scaleHead(t, identity, ns, testkit.TenThousand(hashed))
		rv, err := o.WriteHead(ctx, ns, "", nil, install)
		if err != nil {
			t.Fatalf("write the Head of a 10k release with realistic names (hashed: %v): %v", hashed, err)
		}
		checkV2Head(t, ns, install)
		retire := retireScale(t, install, 1000)
		if _, err := o.WriteHead(ctx, ns, rv, install, retire); err != nil {
			t.Fatalf("write the Head of a retire of 1,000 of them (hashed: %v): %v", hashed, err)
		}
		checkV2Head(t, ns, retire)
	}
}

// retireScale is the committed retire Head after h that retires every
// tenth object of h's inventory, n in all, each with a UID, a
// resourceVersion and a reviewed digest as random as real ones.
func retireScale(t *testing.T, h *deploy.Head, n int) *deploy.Head {
	t.Helper()
	next := deploytest.Next(t, h, "3.1.0")
	next.Transition.Kind, next.Current.Inventory = deploy.TransitionRetire, nil
	for i, id := range h.Current.Inventory {
		if i%10 != 9 || len(next.Retired) == n {
			next.Current.Inventory = append(next.Current.Inventory, id)
			continue
		}
		x := fmt.Sprintf("%x", sha256.Sum256(fmt.Appendf(nil, "retired %d", i)))
		next.Retired = append(next.Retired, receipts.Retired{ID: id, UID: x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32],
			ResourceVersion: fmt.Sprint(4_100_000 + i), ReviewedDigest: inventory.DigestPrefix + x, Outcome: receipts.OutcomeDeleted})
	}
	if len(next.Retired) != n {
		t.Fatalf("%d objects retired, want %d", len(next.Retired), n)
	}
	var err error
	next.Current.InventoryCount = len(next.Current.Inventory)
	if next.Current.InventoryDigest, err = inventory.InventoryDigest(next.Current.Inventory); err != nil {
		t.Fatal(err)
	}
	sealScale(t, &next)
	return &next
}

// scaleHead is a committed install Head of inventory inv in namespace ns.
func scaleHead(t *testing.T, identity, ns string, inv []inventory.Identity) *deploy.Head {
	t.Helper()
	d := func(s string) string { return inventory.DigestPrefix + strings.Repeat(s, 64) }
	h := &deploy.Head{
		Schema: deploy.HeadSchema, Phase: deploy.PhaseCommitted, Generation: 1,
		Transition: deploy.HeadTransition{Transition: receipts.Transition{Kind: deploy.TransitionInstall, CommandDigest: d("1"), PreflightDigest: d("2")},
			MutationID: strings.Repeat("ab", 16)},
		Current: deploy.HeadDeployment{Deployment: receipts.Deployment{Version: "3.0.0", LockDigest: d("3"), InventoryCount: len(inv)}, Inventory: inv},
		Target:  receipts.Target{ClusterIdentity: identity, Namespace: ns},
		Tool:    receipts.Tool{Name: deploy.ToolName, Version: toolVersion, FieldManager: inventory.FieldManager},
		Steps:   receipts.Steps{Identity: d("6"), DryRun: d("7"), Apply: d("8"), Converge: d("9"), FinalIdentity: d("6")},
	}
	var err error
	if h.Current.InventoryDigest, err = inventory.InventoryDigest(inv); err != nil {
		t.Fatal(err)
	}
	sealScale(t, h)
	return h
}

func sealScale(t *testing.T, h *deploy.Head) {
	t.Helper()
	if err := h.Seal(); err != nil {
		t.Fatal(err)
	}
}

// writeV1Head creates h's Head ConfigMap exactly as the first format wrote
// it (head.json the canonical logical Head, label deployment-head-v1) and
// returns its resourceVersion.
func writeV1Head(t *testing.T, ns string, h *deploy.Head) string {
	t.Helper()
	data, err := inventory.Canonical(h)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: deploy.HeadName, Namespace: ns,
			Labels:      map[string]string{deploy.LabelManagedBy: deploy.LabelManagedByValue, deploy.LabelHeadSchema: deploy.LabelHeadSchemaValue},
			Annotations: map[string]string{deploy.AnnotationSelfDigest: h.SelfDigest}},
		Data: map[string]string{deploy.HeadKey: string(data)},
	}
	got, err := cp.Clientset().CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{FieldManager: deploy.HeadFieldManager})
	if err != nil {
		t.Fatal(err)
	}
	return got.ResourceVersion
}

// apiHeadSize is the Head ConfigMap's size as the API returns it (the JSON
// of a GET) and the schema its head.json is stored in.
func apiHeadSize(t *testing.T, ns string) (int, string) {
	t.Helper()
	raw, err := cp.Clientset().CoreV1().RESTClient().Get().Namespace(ns).Resource("configmaps").Name(deploy.HeadName).DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	var head struct{ Schema string }
	if err := json.Unmarshal(raw, &cm); err != nil {
		t.Fatal(err)
	}
	text, _, err := deploy.StoredHeadJSON(&cm)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(text, &head); err != nil {
		t.Fatal(err)
	}
	return len(raw), head.Schema
}

// readScaleHead reads the Head as every command does and requires it to
// be want, its receipt want's byte for byte.
func readScaleHead(t *testing.T, ns string, want *deploy.Head) *deploy.Head {
	t.Helper()
	got := headOf(t, ns)
	if got == nil || got.SelfDigest != want.SelfDigest || len(got.Current.Inventory) != len(want.Current.Inventory) {
		t.Fatalf("the Head read is not the Head written")
	}
	if want.Phase == deploy.PhaseCommitted {
		a, b := receiptBytes(t, got), receiptBytes(t, want)
		if string(a) != string(b) {
			t.Fatalf("the receipt rebuilt from the Head read differs from the written Head's")
		}
	}
	return got
}

func receiptBytes(t *testing.T, h *deploy.Head) []byte {
	t.Helper()
	r, err := deploy.ReceiptFromHead(h)
	if err != nil {
		t.Fatal(err)
	}
	data, err := r.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// checkV2Head requires the Head of ns to be want, stored in v2 within
// 256 KiB as the API returns it.
func checkV2Head(t *testing.T, ns string, want *deploy.Head) {
	t.Helper()
	size, schema := apiHeadSize(t, ns)
	t.Logf("generation %d of %d objects: the ConfigMap is %d bytes as the API returns it (%s)", want.Generation, len(want.Current.Inventory), size, schema)
	if schema != deploy.HeadSchemaV2 || size > 256<<10 {
		t.Fatalf("the Head is stored as %s in %d bytes: want %s within 256 KiB", schema, size, deploy.HeadSchemaV2)
	}
	readScaleHead(t, ns, want)
}
