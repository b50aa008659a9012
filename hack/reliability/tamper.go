package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// A receipt history as files: name -> bytes.
type fileSet map[string][]byte

func (fs fileSet) clone() fileSet { return maps.Clone(fs) }

func (fs fileSet) equal(o fileSet) bool {
	return maps.EqualFunc(fs, o, bytes.Equal)
}

// receiptNames are the receipt files in generation order.
func (fs fileSet) receiptNames() []string {
	var out []string
	for n := range fs {
		if strings.HasSuffix(n, receipts.FileSuffix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// A mutation class: it returns the tampered set, or nil when it cannot
// apply to this history. excluded marks a tamper that the offline audit,
// by its documented contract, cannot detect (see docs/receipts.md §5).
type mutation struct {
	class    string
	apply    func(fs fileSet, rng *rand.Rand, signed bool, key ed25519.PrivateKey) (out fileSet, excluded bool)
	weight   int
	byteLike bool
}

func randomDigest(rng *rand.Rand) string {
	b := make([]byte, 32)
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	return inventory.DigestBytes("reliability", b)
}

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// anyFile picks a receipt or signature file.
func anyFile(fs fileSet, rng *rand.Rand) string {
	names := slices.Sorted(maps.Keys(fs))
	return pick(rng, names)
}

func byteMutation(name string, op func(b []byte, rng *rand.Rand) []byte) mutation {
	return mutation{class: name, weight: 15, byteLike: true, apply: func(fs fileSet, rng *rand.Rand, _ bool, _ ed25519.PrivateKey) (fileSet, bool) {
		out := fs.clone()
		f := anyFile(fs, rng)
		out[f] = op(slices.Clone(fs[f]), rng)
		return out, false
	}}
}

// resealed edits one receipt as a typed value and seals it again: a valid
// receipt on its own, whose only defect is its place in the chain.
//
// A forger able to compute digests also recomputes the members the audit
// derives from the others (head.deploymentDigest, docs/receipts.md §2.4):
// rederive. Without it the edit is caught on every receipt.
func resealed(class string, edit func(r *receipts.Receipt, rng *rand.Rand) bool, chainCovered func(r *receipts.Receipt) bool, rederive bool) mutation {
	return mutation{class: class, weight: 4, apply: func(fs fileSet, rng *rand.Rand, signed bool, _ ed25519.PrivateKey) (fileSet, bool) {
		names := fs.receiptNames()
		idx := rng.IntN(len(names))
		r, err := receipts.Parse(fs[names[idx]])
		if err != nil {
			return nil, false
		}
		if !edit(r, rng) {
			return nil, false
		}
		covered := chainCovered
		if rederive {
			if r.Head.DeploymentDigest, err = deploymentDigest(r); err != nil {
				return nil, false
			}
		} else {
			covered = always
		}
		if r.Seal() != nil {
			return nil, false
		}
		data, err := r.Bytes()
		if err != nil {
			return nil, false
		}
		out := fs.clone()
		delete(out, names[idx])
		out[receipts.FileName(r)] = data
		if sig, ok := fs[names[idx]+receipts.SignatureSuffix]; ok {
			delete(out, names[idx]+receipts.SignatureSuffix)
			out[receipts.FileName(r)+receipts.SignatureSuffix] = sig // the old signature stays
		}
		newest := idx == len(names)-1
		// Unsigned, the newest receipt has no successor to link to it and
		// no signature: an edit the chain does not cover is undetectable.
		return out, newest && !signed && !covered(r)
	}}
}

func never(*receipts.Receipt) bool { return false }

func always(*receipts.Receipt) bool { return true }

func deploymentDigest(r *receipts.Receipt) (string, error) {
	return receipts.DeploymentDigest(r.Generation, r.Transition, r.Deployment, r.PreviousDeployment, r.Target, r.Tool, r.PreviousReceiptDigest)
}

// receiptMutations are the classes of the receipt corpus.
func receiptMutations() []mutation {
	ms := []mutation{
		byteMutation("flip bits of a byte", func(b []byte, rng *rand.Rand) []byte {
			b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
			return b
		}),
		byteMutation("insert a byte", func(b []byte, rng *rand.Rand) []byte {
			i := rng.IntN(len(b) + 1)
			return slices.Insert(b, i, byte(rng.IntN(256)))
		}),
		byteMutation("delete a byte", func(b []byte, rng *rand.Rand) []byte {
			i := rng.IntN(len(b))
			return slices.Delete(b, i, i+1)
		}),
		byteMutation("overwrite a byte (may be a no-op)", func(b []byte, rng *rand.Rand) []byte {
			b[rng.IntN(len(b))] = byte(rng.IntN(256))
			return b
		}),
		byteMutation("overwrite a byte with a JSON-significant one", func(b []byte, rng *rand.Rand) []byte {
			b[rng.IntN(len(b))] = pick(rng, []byte(`{}[]:,"\ 0123456789abcdef-.eE`))
			return b
		}),
		{class: "reorder the inventory (digests recomputed)", weight: 4, apply: func(fs fileSet, rng *rand.Rand, _ bool, _ ed25519.PrivateKey) (fileSet, bool) {
			return editJSON(fs, rng, func(m map[string]any) bool {
				inv, _ := m["inventory"].([]any)
				if len(inv) < 2 {
					return false
				}
				i, j := rng.IntN(len(inv)), rng.IntN(len(inv))
				if i == j {
					return false
				}
				inv[i], inv[j] = inv[j], inv[i]
				rehashInventory(m)
				return true
			}), false
		}},
		{class: "duplicate an inventory entry (digests recomputed)", weight: 2, apply: func(fs fileSet, rng *rand.Rand, _ bool, _ ed25519.PrivateKey) (fileSet, bool) {
			return editJSON(fs, rng, func(m map[string]any) bool {
				inv, _ := m["inventory"].([]any)
				if len(inv) < 1 {
					return false
				}
				i := rng.IntN(len(inv))
				m["inventory"] = slices.Insert(inv, i, inv[i])
				rehashInventory(m)
				return true
			}), false
		}},
		{class: "drop an inventory entry (digests recomputed)", weight: 2, apply: func(fs fileSet, rng *rand.Rand, _ bool, _ ed25519.PrivateKey) (fileSet, bool) {
			return editJSON(fs, rng, func(m map[string]any) bool {
				inv, _ := m["inventory"].([]any)
				if len(inv) < 1 {
					return false
				}
				i := rng.IntN(len(inv))
				m["inventory"] = slices.Delete(inv, i, i+1)
				rehashInventory(m)
				return true
			}), false
		}},
		{class: "flip a flag (self digest recomputed)", weight: 2, apply: func(fs fileSet, rng *rand.Rand, _ bool, _ ed25519.PrivateKey) (fileSet, bool) {
			return editJSON(fs, rng, func(m map[string]any) bool {
				f := m["flags"].(map[string]any)
				k := pick(rng, []string{"deploymentHeadCas", "resourceInventoryClosed", "multiResourceTransactional"})
				f[k] = !f[k].(bool)
				return true
			}), false
		}},
		{class: "add an unknown member (self digest recomputed)", weight: 2, apply: func(fs fileSet, rng *rand.Rand, _ bool, _ ed25519.PrivateKey) (fileSet, bool) {
			return editJSON(fs, rng, func(m map[string]any) bool {
				m[pick(rng, []string{"comment", "approvedBy", "z"})] = "x"
				return true
			}), false
		}},
		{class: "null a member (self digest recomputed)", weight: 2, apply: func(fs fileSet, rng *rand.Rand, _ bool, _ ed25519.PrivateKey) (fileSet, bool) {
			return editJSON(fs, rng, func(m map[string]any) bool {
				k := pick(rng, slices.Sorted(maps.Keys(m)))
				if k == "selfDigest" || m[k] == nil {
					return false
				}
				m[k] = nil
				return true
			}), false
		}},
		{class: "pretty-print (non-canonical bytes)", weight: 2, apply: func(fs fileSet, rng *rand.Rand, _ bool, _ ed25519.PrivateKey) (fileSet, bool) {
			names := fs.receiptNames()
			n := pick(rng, names)
			var buf bytes.Buffer
			if json.Indent(&buf, fs[n], "", pick(rng, []string{" ", "  ", "\t"})) != nil {
				return nil, false
			}
			out := fs.clone()
			out[n] = buf.Bytes()
			return out, false
		}},
		{class: "append a newline", weight: 1, apply: func(fs fileSet, rng *rand.Rand, _ bool, _ ed25519.PrivateKey) (fileSet, bool) {
			n := pick(rng, fs.receiptNames())
			out := fs.clone()
			out[n] = append(slices.Clone(fs[n]), '\n')
			return out, false
		}},
		{class: "drop a receipt (and its signature)", weight: 3, apply: func(fs fileSet, rng *rand.Rand, _ bool, _ ed25519.PrivateKey) (fileSet, bool) {
			names := fs.receiptNames()
			i := rng.IntN(len(names))
			out := fs.clone()
			delete(out, names[i])
			delete(out, names[i]+receipts.SignatureSuffix)
			// Removing the newest receipts with their signatures is not
			// detectable offline: docs/receipts.md §5.
			return out, i == len(names)-1
		}},
		{class: "drop a receipt, keep its signature", weight: 2, apply: func(fs fileSet, rng *rand.Rand, signed bool, _ ed25519.PrivateKey) (fileSet, bool) {
			if !signed {
				return nil, false
			}
			names := fs.receiptNames()
			i := rng.IntN(len(names))
			out := fs.clone()
			delete(out, names[i])
			return out, false
		}},
		{class: "drop a signature", weight: 2, apply: func(fs fileSet, rng *rand.Rand, signed bool, _ ed25519.PrivateKey) (fileSet, bool) {
			if !signed {
				return nil, false
			}
			out := fs.clone()
			delete(out, pick(rng, fs.receiptNames())+receipts.SignatureSuffix)
			return out, false
		}},
		{class: "swap two receipts' contents", weight: 3, apply: func(fs fileSet, rng *rand.Rand, _ bool, _ ed25519.PrivateKey) (fileSet, bool) {
			names := fs.receiptNames()
			i, j := rng.IntN(len(names)), rng.IntN(len(names))
			if i == j {
				return nil, false
			}
			out := fs.clone()
			out[names[i]], out[names[j]] = fs[names[j]], fs[names[i]]
			return out, false
		}},
		{class: "swap two signatures", weight: 2, apply: func(fs fileSet, rng *rand.Rand, signed bool, _ ed25519.PrivateKey) (fileSet, bool) {
			if !signed {
				return nil, false
			}
			names := fs.receiptNames()
			i, j := rng.IntN(len(names)), rng.IntN(len(names))
			if i == j {
				return nil, false
			}
			a, b := names[i]+receipts.SignatureSuffix, names[j]+receipts.SignatureSuffix
			out := fs.clone()
			out[a], out[b] = fs[b], fs[a]
			return out, false
		}},
		{class: "rename a receipt", weight: 2, apply: func(fs fileSet, rng *rand.Rand, _ bool, _ ed25519.PrivateKey) (fileSet, bool) {
			n := pick(rng, fs.receiptNames())
			out := fs.clone()
			delete(out, n)
			out[strings.TrimLeft(n, "0")] = fs[n] // "1-install-3.0.0.receipt.json"
			return out, false
		}},
		{class: "copy a receipt under another generation's name", weight: 2, apply: func(fs fileSet, rng *rand.Rand, _ bool, _ ed25519.PrivateKey) (fileSet, bool) {
			names := fs.receiptNames()
			i, j := rng.IntN(len(names)), rng.IntN(len(names))
			if i == j {
				return nil, false
			}
			out := fs.clone()
			out[names[j]] = fs[names[i]]
			return out, false
		}},
		{class: "re-sign an edited receipt with an untrusted key", weight: 3, apply: func(fs fileSet, rng *rand.Rand, signed bool, _ ed25519.PrivateKey) (fileSet, bool) {
			if !signed {
				return nil, false
			}
			names := fs.receiptNames()
			n := pick(rng, names)
			r, err := receipts.Parse(fs[n])
			if err != nil {
				return nil, false
			}
			r.Steps.Apply = randomDigest(rng)
			if r.Seal() != nil {
				return nil, false
			}
			data, _ := r.Bytes()
			seed := make([]byte, ed25519.SeedSize)
			for i := range seed {
				seed[i] = byte(rng.IntN(256))
			}
			other := ed25519.NewKeyFromSeed(seed)
			sig, err := receipts.Sign(r, other)
			if err != nil {
				return nil, false
			}
			out := fs.clone()
			out[n], out[n+receipts.SignatureSuffix] = data, sig
			return out, false
		}},
		{class: "re-seal and re-link the whole chain from one edit", weight: 3, apply: func(fs fileSet, rng *rand.Rand, signed bool, _ ed25519.PrivateKey) (fileSet, bool) {
			names := fs.receiptNames()
			from := rng.IntN(len(names))
			out := fs.clone()
			prevDigest := ""
			var prevDep *receipts.Deployment
			for i, n := range names {
				r, err := receipts.Parse(fs[n])
				if err != nil {
					return nil, false
				}
				switch {
				case i == from:
					r.Tool.Version = "v9.9.9-forged"
				case i > from:
					r.PreviousReceiptDigest = prevDigest
					r.PreviousDeployment = prevDep
				}
				if i >= from {
					if r.Head.DeploymentDigest, err = deploymentDigest(r); err != nil || r.Seal() != nil {
						return nil, false
					}
				}
				data, err := r.Bytes()
				if err != nil {
					return nil, false
				}
				out[n] = data
				prevDigest, prevDep = r.SelfDigest, &r.Deployment
			}
			// Without signatures a consistent rewrite of every receipt
			// from one point on is a new, valid history: undetectable
			// offline by construction (the receipts are self-certifying).
			return out, !signed
		}},
	}
	// Field edits that re-seal a valid receipt (the chain must catch them).
	type edit struct {
		name    string
		fn      func(r *receipts.Receipt, rng *rand.Rand) bool
		covered func(r *receipts.Receipt) bool // the chain covers it even on the newest receipt
	}
	edits := []edit{
		{"tool.version", func(r *receipts.Receipt, _ *rand.Rand) bool { r.Tool.Version = "v0.0.1-forged"; return true }, never},
		{"steps.apply", func(r *receipts.Receipt, rng *rand.Rand) bool { r.Steps.Apply = randomDigest(rng); return true }, never},
		{"head.stateDigest", func(r *receipts.Receipt, rng *rand.Rand) bool { r.Head.StateDigest = randomDigest(rng); return true }, never},
		{"transition.forceConflicts", func(r *receipts.Receipt, _ *rand.Rand) bool {
			r.Transition.ForceConflicts = !r.Transition.ForceConflicts
			return true
		}, never},
		{"deployment.lockDigest", func(r *receipts.Receipt, rng *rand.Rand) bool {
			r.Deployment.LockDigest = randomDigest(rng)
			return true
		}, func(r *receipts.Receipt) bool { return r.Transition.Kind == receipts.KindRollback }},
		{"deployment.version", func(r *receipts.Receipt, _ *rand.Rand) bool {
			r.Deployment.Version = "9.9.9"
			return true
		}, func(r *receipts.Receipt) bool { return r.Transition.Kind == receipts.KindRollback }},
		{"target.namespace", func(r *receipts.Receipt, _ *rand.Rand) bool { r.Target.Namespace = "elsewhere"; return true },
			func(r *receipts.Receipt) bool { return r.Generation > 1 }},
		{"previousReceiptDigest", func(r *receipts.Receipt, rng *rand.Rand) bool {
			if r.Generation == 1 {
				return false
			}
			r.PreviousReceiptDigest = randomDigest(rng)
			return true
		}, func(*receipts.Receipt) bool { return true }},
		{"previousDeployment.lockDigest", func(r *receipts.Receipt, rng *rand.Rand) bool {
			if r.PreviousDeployment == nil {
				return false
			}
			p := *r.PreviousDeployment
			p.LockDigest = randomDigest(rng)
			r.PreviousDeployment = &p
			return true
		}, func(*receipts.Receipt) bool { return true }},
		{"inventory (an object added)", func(r *receipts.Receipt, _ *rand.Rand) bool {
			r.Inventory = append(slices.Clone(r.Inventory), inventory.Identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: r.Target.Namespace, Name: "zz-forged"})
			inventory.SortIdentities(r.Inventory)
			r.Deployment.InventoryCount = len(r.Inventory)
			r.Deployment.InventoryDigest, _ = inventory.InventoryDigest(r.Inventory)
			return true
		}, never},
	}
	for _, e := range edits {
		ms = append(ms, resealed("edit "+e.name+" and re-seal", e.fn, e.covered, true))
	}
	// The same edits by a forger who recomputes the self digest but not
	// head.deploymentDigest: the audit's recomputation catches each one,
	// on any receipt, signed or not.
	for _, e := range edits {
		if e.name == "steps.apply" || e.name == "head.stateDigest" {
			continue // not an input of the deployment digest
		}
		ms = append(ms, resealed("edit "+e.name+", re-seal, deployment digest kept", e.fn, nil, false))
	}
	return ms
}

// editJSON decodes one receipt, edits it as plain JSON, recomputes its
// self digest and writes it back canonically: only the rules, not the
// digests, can catch such a file.
func editJSON(fs fileSet, rng *rand.Rand, edit func(m map[string]any) bool) fileSet {
	n := pick(rng, fs.receiptNames())
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(fs[n]))
	dec.UseNumber()
	if dec.Decode(&m) != nil || !edit(m) {
		return nil
	}
	delete(m, "selfDigest")
	unsealed, err := inventory.Canonical(m)
	if err != nil {
		return nil
	}
	m["selfDigest"] = inventory.DigestBytes(inventory.DomainReceipt, unsealed)
	data, err := inventory.Canonical(m)
	if err != nil {
		return nil
	}
	out := fs.clone()
	out[n] = data
	return out
}

func rehashInventory(m map[string]any) {
	inv, _ := inventory.Canonical(m["inventory"])
	d := m["deployment"].(map[string]any)
	d["inventoryDigest"] = inventory.DigestBytes(inventory.DomainInventory, inv)
	d["inventoryCount"] = json.Number(fmt.Sprint(len(m["inventory"].([]any))))
}

// history deploys install, upgrade, upgrade, rollback in one namespace and
// returns the four receipts (and the namespace, whose Head is committed).
func (c *campaign) history() (fileSet, string, error) {
	ns, err := c.namespace("tamper")
	if err != nil {
		return nil, "", err
	}
	rdir := filepath.Join(c.work, "receipts", ns)
	o, err := c.adminOptions(rdir)
	if err != nil {
		return nil, "", err
	}
	exp := deploy.ExpectedHead{}
	for _, step := range []struct{ fixture, kind string }{
		{"v3.0.0", deploy.TransitionInstall}, {"v3.1.0", deploy.TransitionUpgrade},
		{"v3.1.1", deploy.TransitionUpgrade}, {"v3.1.0", deploy.TransitionRollback},
	} {
		dir, err := c.release(step.fixture, ns, "")
		if err != nil {
			return nil, "", err
		}
		res, err := c.deploy(o, dir, step.kind, exp)
		if err != nil {
			return nil, "", fmt.Errorf("%s %s: %w", step.kind, step.fixture, err)
		}
		exp = res.Head.Expected()
	}
	fs := fileSet{}
	entries, err := os.ReadDir(rdir)
	if err != nil {
		return nil, "", err
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(rdir, e.Name()))
		if err != nil {
			return nil, "", err
		}
		fs[e.Name()] = data
	}
	if len(fs.receiptNames()) != 4 {
		return nil, "", fmt.Errorf("history has %d receipts, want 4", len(fs.receiptNames()))
	}
	return fs, ns, nil
}

// auditSet writes fs into dir (emptied first) and audits it.
func auditSet(dir string, fs fileSet, keys receipts.TrustedKeys) (bool, error) {
	if err := os.RemoveAll(dir); err != nil {
		return false, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	for n, data := range fs {
		if err := os.WriteFile(filepath.Join(dir, n), data, 0o644); err != nil {
			return false, err
		}
	}
	rep, err := receipts.Audit([]string{dir}, receipts.AuditOptions{TrustedKeys: keys})
	if err != nil {
		// No receipts at all, or none readable: the audit refuses (exit 2).
		return false, nil
	}
	return rep.OK(), nil
}

type tamperCount struct {
	mu                                       sync.Mutex
	generated, noop, excluded, counted, miss int
	excludedUndetected                       int
	byClass                                  map[string][2]int // class -> {counted, detected}
	excludedClasses                          map[string]int
	missed                                   []string
}

// caseTamper: random single-byte and structural mutations of a real
// receipt history, unsigned and signed, and every Head tamper class.
func caseTamper(c *campaign, cs *caseState) []Row {
	fs, ns, err := c.history()
	if err != nil {
		cs.failf("history: %v", err)
		return []Row{{Case: "tamper: receipts"}}
	}
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	keys := receipts.TrustedKeys{}
	kid, _ := receipts.KeyID(key.Public().(ed25519.PublicKey))
	keys[kid] = key.Public().(ed25519.PublicKey)
	signed := fs.clone()
	for _, n := range fs.receiptNames() {
		r, err := receipts.Parse(fs[n])
		if err != nil {
			cs.failf("genuine receipt %s: %v", n, err)
			return []Row{{Case: "tamper: receipts"}}
		}
		sig, err := receipts.Sign(r, key)
		if err != nil {
			cs.failf("sign: %v", err)
			return []Row{{Case: "tamper: receipts"}}
		}
		signed[n+receipts.SignatureSuffix] = sig
	}
	var rows []Row
	ms := receiptMutations()
	for _, mode := range []struct {
		name string
		set  fileSet
		keys receipts.TrustedKeys
		n    int
	}{
		{"tamper: receipts (unsigned)", fs, nil, c.runs(6500, 600)},
		{"tamper: receipts (signed, --trusted-key)", signed, keys, c.runs(5000, 450)},
	} {
		t0 := time.Now()
		isSigned := mode.keys != nil
		if ok, err := auditSet(filepath.Join(c.work, "tamper-genuine"), mode.set, mode.keys); err != nil || !ok {
			cs.failf("%s: the genuine history does not pass the audit: %v", mode.name, err)
			continue
		}
		tc := &tamperCount{byClass: map[string][2]int{}, excludedClasses: map[string]int{}}
		total := 0
		for _, m := range ms {
			total += m.weight
		}
		var seq atomic.Int64
		c.parallel(mode.n, func(i int) {
			rng := cs.rng(i + 10_000_000*len(rows))
			dir := filepath.Join(c.work, fmt.Sprintf("tamper-%d-%d", len(rows), seq.Add(1)))
			defer os.RemoveAll(dir)
			// Draw until a class applies.
			for {
				w := rng.IntN(total)
				var m mutation
				for _, m = range ms {
					if w < m.weight {
						break
					}
					w -= m.weight
				}
				out, excluded := m.apply(mode.set, rng, isSigned, key)
				if out == nil {
					continue
				}
				tc.mu.Lock()
				tc.generated++
				tc.mu.Unlock()
				if out.equal(mode.set) {
					tc.mu.Lock()
					tc.noop++ // byte-identical: not a mutation; draw again
					tc.mu.Unlock()
					continue
				}
				ok, err := auditSet(dir, out, mode.keys)
				tc.mu.Lock()
				defer tc.mu.Unlock()
				if err != nil {
					tc.missed = append(tc.missed, fmt.Sprintf("%s: %v", m.class, err))
					tc.counted++
					tc.miss++
					return
				}
				if excluded {
					tc.excluded++
					tc.excludedClasses[m.class]++
					if ok {
						tc.excludedUndetected++
					}
					return
				}
				tc.counted++
				bc := tc.byClass[m.class]
				bc[0]++
				if !ok {
					bc[1]++
				} else {
					tc.miss++
					if len(tc.missed) < 5 {
						tc.missed = append(tc.missed, fmt.Sprintf("%s (run %d)", m.class, i))
					}
				}
				tc.byClass[m.class] = bc
				return
			}
		})
		row := Row{Case: mode.name, Runs: tc.counted,
			Expected: "100% of mutations detected (audit FAIL or refused)"}
		detected := tc.counted - tc.miss
		row.Observed = fmt.Sprintf("%d/%d detected (%.2f%%); %d byte-identical draws redrawn; %d out of the offline audit's reach, not counted",
			detected, tc.counted, 100*float64(detected)/float64(max(tc.counted, 1)), tc.noop, tc.excluded)
		row.Pass = tc.miss == 0 && tc.counted > 0
		classes := map[string]string{}
		for k, v := range tc.byClass {
			classes[k] = fmt.Sprintf("%d/%d", v[1], v[0])
		}
		row.Details = map[string]any{"byClass": classes, "notCounted": tc.excludedClasses, "notCountedAndUndetected": tc.excludedUndetected, "byteIdenticalRedrawn": tc.noop}
		for _, m := range tc.missed {
			cs.failf("%s: undetected: %s [replay: -seed %d -case tamper]", mode.name, m, cs.seed)
		}
		row.Seconds = time.Since(t0).Seconds()
		row.Failures = cs.failures()
		cs.fail, cs.nf = nil, 0
		rows = append(rows, row)
	}
	rows = append(rows, c.headTamper(cs, ns))
	return rows
}

// --- the Head ---------------------------------------------------------------

type headMutation struct {
	class string
	fn    func(cm *corev1.ConfigMap, rng *rand.Rand) bool
}

// resealHead edits head.json as a typed Head, recomputes every digest and
// the annotation: only the Head's rules can catch it.
func resealHead(edit func(h *deploy.Head)) func(cm *corev1.ConfigMap, _ *rand.Rand) bool {
	return func(cm *corev1.ConfigMap, _ *rand.Rand) bool {
		// ParseHead reads either stored form as the logical Head (a v2
		// head.json, unmarshalled as is, would lose its packed inventory).
		parsed, err := deploy.ParseHead([]byte(cm.Data[deploy.HeadKey]))
		if err != nil {
			return false
		}
		h := *parsed
		edit(&h)
		if h.Seal() != nil {
			return false
		}
		data, err := h.Bytes()
		if err != nil {
			return false
		}
		cm.Data[deploy.HeadKey] = string(data)
		cm.Annotations[deploy.AnnotationSelfDigest] = h.SelfDigest
		return true
	}
}

func headMutations() []headMutation {
	setJSON := func(f func(s string, rng *rand.Rand) string) func(cm *corev1.ConfigMap, rng *rand.Rand) bool {
		return func(cm *corev1.ConfigMap, rng *rand.Rand) bool {
			cm.Data[deploy.HeadKey] = f(cm.Data[deploy.HeadKey], rng)
			return true
		}
	}
	now := metav1.Now()
	return []headMutation{
		{"extra data key", func(cm *corev1.ConfigMap, _ *rand.Rand) bool { cm.Data["extra"] = "x"; return true }},
		{"data key renamed", func(cm *corev1.ConfigMap, _ *rand.Rand) bool {
			cm.Data = map[string]string{"head.yaml": cm.Data[deploy.HeadKey]}
			return true
		}},
		{"no data", func(cm *corev1.ConfigMap, _ *rand.Rand) bool { cm.Data = nil; return true }},
		{"binaryData", func(cm *corev1.ConfigMap, _ *rand.Rand) bool {
			cm.BinaryData = map[string][]byte{"b": {1}}
			return true
		}},
		{"head.json moved to binaryData", func(cm *corev1.ConfigMap, _ *rand.Rand) bool {
			cm.BinaryData = map[string][]byte{deploy.HeadKey: []byte(cm.Data[deploy.HeadKey])}
			cm.Data = nil
			return true
		}},
		{"finalizer", func(cm *corev1.ConfigMap, _ *rand.Rand) bool {
			cm.Finalizers = []string{"example.com/hold"}
			return true
		}},
		{"owner reference", func(cm *corev1.ConfigMap, _ *rand.Rand) bool {
			cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "1"}}
			return true
		}},
		{"deletion timestamp", func(cm *corev1.ConfigMap, _ *rand.Rand) bool { cm.DeletionTimestamp = &now; return true }},
		{"immutable", func(cm *corev1.ConfigMap, _ *rand.Rand) bool { t := true; cm.Immutable = &t; return true }},
		{"immutable=false", func(cm *corev1.ConfigMap, _ *rand.Rand) bool { f := false; cm.Immutable = &f; return true }},
		{"label value changed", func(cm *corev1.ConfigMap, _ *rand.Rand) bool { cm.Labels[deploy.LabelHeadSchema] = "v0"; return true }},
		{"label removed", func(cm *corev1.ConfigMap, _ *rand.Rand) bool { delete(cm.Labels, deploy.LabelManagedBy); return true }},
		{"extra label", func(cm *corev1.ConfigMap, _ *rand.Rand) bool { cm.Labels["team"] = "x"; return true }},
		{"extra annotation", func(cm *corev1.ConfigMap, _ *rand.Rand) bool { cm.Annotations["note"] = "x"; return true }},
		{"annotation removed", func(cm *corev1.ConfigMap, _ *rand.Rand) bool { cm.Annotations = nil; return true }},
		{"annotation digest mismatch", func(cm *corev1.ConfigMap, rng *rand.Rand) bool {
			cm.Annotations[deploy.AnnotationSelfDigest] = randomDigest(rng)
			return true
		}},
		{"annotation not a digest", func(cm *corev1.ConfigMap, _ *rand.Rand) bool {
			cm.Annotations[deploy.AnnotationSelfDigest] = "trust-me"
			return true
		}},
		{"name changed", func(cm *corev1.ConfigMap, _ *rand.Rand) bool { cm.Name = "qinglong3-deployment-head-2"; return true }},
		{"in another namespace", func(cm *corev1.ConfigMap, _ *rand.Rand) bool { cm.Namespace = "elsewhere"; return true }},
		{"non-canonical: leading space", setJSON(func(s string, _ *rand.Rand) string { return " " + s })},
		{"non-canonical: trailing newline", setJSON(func(s string, _ *rand.Rand) string { return s + "\n" })},
		{"non-canonical: indented", setJSON(func(s string, _ *rand.Rand) string {
			var b bytes.Buffer
			json.Indent(&b, []byte(s), "", "  ")
			return b.String()
		})},
		{"unknown field", setJSON(func(s string, _ *rand.Rand) string {
			return strings.Replace(s, `{"current"`, `{"comment":"x","current"`, 1)
		})},
		{"duplicate field", setJSON(func(s string, _ *rand.Rand) string {
			return strings.Replace(s, `{"current"`, `{"phase":"committed","current"`, 1)
		})},
		{"trailing data", setJSON(func(s string, _ *rand.Rand) string { return s + "{}" })},
		{"content edited, digests kept", setJSON(func(s string, _ *rand.Rand) string {
			return strings.Replace(s, `"generation":`, `"generation":1`, 1)
		})},
		{"oversize", setJSON(func(s string, _ *rand.Rand) string { return s + strings.Repeat(" ", deploy.HeadMaxBytes) })},
		{"re-sealed: phase unknown", resealHead(func(h *deploy.Head) { h.Phase = "done" })},
		{"re-sealed: generation 0", resealHead(func(h *deploy.Head) { h.Generation = 0 })},
		{"re-sealed: install at generation 2", resealHead(func(h *deploy.Head) { h.Transition.Kind = deploy.TransitionInstall })},
		{"re-sealed: mutation id not hex", resealHead(func(h *deploy.Head) { h.Transition.MutationID = strings.ToUpper(h.Transition.MutationID) })},
		{"re-sealed: version with a v", resealHead(func(h *deploy.Head) { h.Current.Version = "v" + h.Current.Version })},
		{"re-sealed: inventory unsorted", resealHead(func(h *deploy.Head) {
			inv := slices.Clone(h.Current.Inventory)
			inv[0], inv[1] = inv[1], inv[0]
			h.Current.Inventory = inv
		})},
		{"re-sealed: inventory count wrong", resealHead(func(h *deploy.Head) { h.Current.InventoryCount++ })},
		{"re-sealed: inventory digest wrong", resealHead(func(h *deploy.Head) { h.Current.InventoryDigest = h.Current.LockDigest })},
		{"re-sealed: committed without step digests", resealHead(func(h *deploy.Head) { h.Steps.Apply = "" })},
		{"re-sealed: applying with step digests", resealHead(func(h *deploy.Head) { h.Phase = deploy.PhaseApplying })},
		{"re-sealed: no previous on an upgrade", resealHead(func(h *deploy.Head) { h.Previous = nil })},
		{"re-sealed: target namespace elsewhere", resealHead(func(h *deploy.Head) { h.Target.Namespace = "elsewhere" })},
		{"re-sealed: tool name empty", resealHead(func(h *deploy.Head) { h.Tool.Name = "" })},
		{"re-sealed: bad digest", resealHead(func(h *deploy.Head) { h.Steps.DryRun = "sha256:xyz" })},
		{"re-sealed: wrong schema", resealHead(func(h *deploy.Head) { h.Schema = "qinglong/deployment-head@v2" })},
	}
}

// headByteMutation changes head.json bytes, leaving the annotation.
func headByteMutation(cm *corev1.ConfigMap, rng *rand.Rand) bool {
	b := []byte(cm.Data[deploy.HeadKey])
	switch rng.IntN(4) {
	case 0:
		b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
	case 1:
		b = slices.Insert(b, rng.IntN(len(b)+1), byte(rng.IntN(256)))
	case 2:
		i := rng.IntN(len(b))
		b = slices.Delete(b, i, i+1)
	default:
		b[rng.IntN(len(b))] = pick(rng, []byte(`{}[]:,"\ 0123456789abcdef-.`))
	}
	if string(b) == cm.Data[deploy.HeadKey] {
		return false
	}
	cm.Data[deploy.HeadKey] = string(b)
	return true
}

// headTamper checks every Head tamper class and random byte mutations of
// head.json offline (the parser the ceremony reads the Head with), and
// every class against the cluster through the built plugin: `head` and
// `apply` exit 5 and leave the tampered Head untouched.
func (c *campaign) headTamper(cs *caseState, ns string) (row Row) {
	row = Row{Case: "tamper: Head", Expected: "every tamper class and mutation refused as tamper (exit 5), the Head never repaired"}
	t0 := time.Now()
	defer func() { row.Seconds = time.Since(t0).Seconds() }()
	ctx := context.Background()
	cms := c.admin.CoreV1().ConfigMaps(ns)
	genuine, err := cms.Get(ctx, deploy.HeadName, metav1.GetOptions{})
	if err != nil {
		cs.failf("head: %v", err)
		row.Failures = cs.failures()
		return row
	}
	if _, err := deploy.ParseHeadConfigMap(genuine); err != nil {
		cs.failf("the genuine Head does not parse: %v", err)
	}
	classes := headMutations()
	offline, detected := 0, 0
	check := func(class string, cm *corev1.ConfigMap) {
		offline++
		_, err := deploy.ParseHeadConfigMap(cm)
		if fail.Is(err, fail.Tamper) {
			detected++
		} else {
			cs.failf("head %s: parsed as %v, want tamper", class, err)
		}
	}
	for i, m := range classes {
		cm := genuine.DeepCopy()
		if !m.fn(cm, cs.rng(i)) {
			cs.failf("head class %s could not be applied", m.class)
			continue
		}
		check(m.class, cm)
	}
	byteRuns := c.runs(3000, 300)
	noop := 0
	for i := 0; i < byteRuns; i++ {
		cm := genuine.DeepCopy()
		if !headByteMutation(cm, cs.rng(20_000_000+i)) {
			noop++
			continue
		}
		check("byte mutation", cm)
	}
	// Online: each class written to the cluster (those the API server
	// accepts), then `head` and `apply` as the plugin.
	dir, err := c.release("v3.1.1", ns, "3.2.0")
	if err != nil {
		cs.failf("release: %v", err)
	}
	h, _ := deploy.ParseHeadConfigMap(genuine)
	admin, _ := c.adminOptions(filepath.Join(c.work, "receipts", ns+"-upgrade"))
	pf, err := c.preflight(admin, dir, deploy.TransitionUpgrade, h.Expected())
	if err != nil {
		cs.failf("preflight: %v", err)
		row.Failures = cs.failures()
		return row
	}
	online, onlineOK, rejected := 0, 0, 0
	// "immutable" last: an immutable Head cannot be restored for the next.
	order := slices.Clone(classes)
	slices.SortStableFunc(order, func(a, b headMutation) int {
		return boolInt(a.class == "immutable") - boolInt(b.class == "immutable")
	})
	for i, m := range order {
		if c.cfg.Quick && i%6 != 0 {
			continue
		}
		switch m.class {
		case "name changed", "in another namespace", "deletion timestamp", "no data", "head.json moved to binaryData", "data key renamed":
			// Not writable in place (name, namespace, deletion are not
			// update fields), or covered by the offline check alone.
			continue
		}
		cur, err := cms.Get(ctx, deploy.HeadName, metav1.GetOptions{})
		if err != nil {
			cs.failf("head: %v", err)
			break
		}
		tampered := cur.DeepCopy()
		tampered.Labels, tampered.Annotations, tampered.Data = maps.Clone(genuine.Labels), maps.Clone(genuine.Annotations), maps.Clone(genuine.Data)
		tampered.Finalizers, tampered.OwnerReferences, tampered.BinaryData, tampered.Immutable = nil, nil, nil, nil
		if tampered.Annotations == nil {
			tampered.Annotations = map[string]string{}
		}
		m.fn(tampered, cs.rng(i))
		if m.class == "owner reference" {
			continue // the garbage collector would delete the Head: offline only
		}
		written, err := cms.Update(ctx, tampered, metav1.UpdateOptions{})
		if err != nil {
			rejected++ // the API server itself refused this shape
			continue
		}
		online++
		_, kc, _ := c.user("tamper-reader", "system:masters")
		hr := c.runBinary(kc, nil, "head", "-n", ns)
		ar := c.runBinary(kc, nil, "apply", "--preflight", pf.Path, "--receipts-dir", filepath.Join(c.work, "receipts", ns+"-upgrade"))
		after, err := cms.Get(ctx, deploy.HeadName, metav1.GetOptions{})
		okHead := hr.code == 5 && errorLines(hr.stderr) == 1
		okApply := ar.code == 5 && errorLines(ar.stderr) == 1
		untouched := err == nil && after.ResourceVersion == written.ResourceVersion
		if okHead && okApply && untouched {
			onlineOK++
		} else {
			cs.failf("head %s on the cluster: head exit %d, apply exit %d, untouched %v: %s %s", m.class, hr.code, ar.code, untouched, hr.stderr, ar.stderr)
		}
	}
	// Restore the genuine Head (unless it was made immutable).
	if cur, err := cms.Get(ctx, deploy.HeadName, metav1.GetOptions{}); err == nil && (cur.Immutable == nil || !*cur.Immutable) {
		restored := genuine.DeepCopy()
		restored.ResourceVersion = cur.ResourceVersion
		_, _ = cms.Update(ctx, restored, metav1.UpdateOptions{})
	}
	row.Runs = offline + online
	row.Observed = fmt.Sprintf("%d/%d offline detected (%d classes, %d byte mutations; %d byte-identical redrawn); on the cluster %d/%d classes exit 5 for head and apply, Head untouched",
		detected, offline, len(classes), offline-len(classes), noop, onlineOK, online)
	row.Pass = detected == offline && onlineOK == online && online > 0
	row.Details = map[string]any{"classes": len(classes), "onlineClasses": online, "refusedByAPIServer": rejected}
	row.Failures = cs.failures()
	cs.fail, cs.nf = nil, 0
	return row
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
