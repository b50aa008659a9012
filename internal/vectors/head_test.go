package vectors

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
)

// TestHeadVectors runs testdata/vectors/head against ceremony/deploy
// (docs/head.md): head.json documents (ParseHead) and Head ConfigMaps
// (ParseHeadConfigMap); every violation is tamper.
func TestHeadVectors(t *testing.T) {
	each(t, "head", map[string]procedure{
		"head": func(t *testing.T, v vector, input []byte) {
			h, err := deploy.ParseHead(input)
			headVerdict(t, v, h, err, input)
		},
		"head-configmap": func(t *testing.T, v vector, input []byte) {
			var cm corev1.ConfigMap
			if err := yaml.UnmarshalStrict(input, &cm); err != nil {
				t.Fatal(err)
			}
			h, err := deploy.ParseHeadConfigMap(&cm)
			if err == nil { // the digests are recomputed from the text, read here on its own (head.md §2.3)
				headVerdict(t, v, h, err, headText(t, &cm))
				return
			}
			headVerdict(t, v, h, err, nil)
		},
	})
}

// headText is the head.json a Head ConfigMap holds: data["head.json"], or
// binaryData["head.json.gz"] decompressed (head.md §2.3).
func headText(t *testing.T, cm *corev1.ConfigMap) []byte {
	t.Helper()
	member, ok := cm.BinaryData["head.json.gz"]
	if !ok {
		return []byte(cm.Data["head.json"])
	}
	zr, err := gzip.NewReader(bytes.NewReader(member))
	if err != nil {
		t.Fatal(err)
	}
	text, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// headVerdict checks the verdict, and an accepted Head's digests and token
// against those recomputed from its head.json.
func headVerdict(t *testing.T, v vector, h *deploy.Head, err error, headJSON []byte) {
	t.Helper()
	verdict(t, v, err)
	if err == nil {
		got := map[string]string{"deploymentDigest": h.DeploymentDigest, "stateDigest": h.StateDigest,
			"selfDigest": h.SelfDigest, "expected-Head token": h.Expected().String()}
		digests(t, v, headDigests(t, headJSON), got)
	}
}

// headDigests recomputes head.md's three digests and the expected-Head
// token from head.json's bytes: a v2 Head's are its v1 twin's (§2.1).
func headDigests(t *testing.T, data []byte) map[string]string {
	t.Helper()
	h := v1Twin(jsonValue(t, data).(map[string]any))
	without := func(drop ...string) []byte {
		m := map[string]any{}
		for k, v := range h {
			m[k] = v
		}
		for _, k := range drop {
			delete(m, k)
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return canonical(t, b)
	}
	tr, cur := map[string]any{}, map[string]any{}
	for k, v := range h["transition"].(map[string]any) {
		if k != "mutationId" {
			tr[k] = v
		}
	}
	for k, v := range h["current"].(map[string]any) {
		if k != "inventory" {
			cur[k] = v
		}
	}
	dep, err := json.Marshal(map[string]any{"generation": h["generation"], "transition": tr, "current": cur, "previous": h["previous"],
		"target": h["target"], "tool": h["tool"], "previousReceiptDigest": h["previousReceiptDigest"]})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{
		"deploymentDigest": domainDigest("deployment", "v1", canonical(t, dep)),
		"stateDigest":      domainDigest("head-state", "v1", without("stateDigest", "selfDigest")),
		"selfDigest":       domainDigest("head", "v1", without("selfDigest")),
	}
	hex := func(d string) string { return strings.TrimPrefix(d, "sha256:") }
	lock := h["current"].(map[string]any)["lockDigest"].(string)
	out["expected-Head token"] = fmt.Sprintf("ql3h1-%v-%s-%s-%s", h["generation"], hex(out["deploymentDigest"]), hex(lock), hex(out["stateDigest"]))
	return out
}

// v1Twin is head.json's logical document (docs/head.md §2.1): a v2 Head
// with schema @v1, current.inventory decoded from inventoryGroups, and
// retired rebuilt from retiredGroups and retiredStates.
func v1Twin(h map[string]any) map[string]any {
	if h["schema"] != "qinglong/deployment-head@v2" {
		return h
	}
	cur := map[string]any{}
	for k, v := range h["current"].(map[string]any) {
		cur[k] = v
	}
	cur["inventory"] = unpackGroups(cur["inventoryGroups"].([]any))
	delete(cur, "inventoryGroups")
	out := map[string]any{}
	for k, v := range h {
		out[k] = v
	}
	out["schema"], out["current"] = "qinglong/deployment-head@v1", cur
	if groups, ok := h["retiredGroups"].([]any); ok {
		var retired []any
		for i, id := range unpackGroups(groups) {
			s := h["retiredStates"].([]any)[i].([]any)
			r := map[string]any{"id": id, "uid": s[0], "resourceVersion": s[1], "outcome": s[3]}
			if s[2] != "" {
				r["reviewedDigest"] = s[2]
			}
			retired = append(retired, r)
		}
		out["retired"] = retired
		delete(out, "retiredGroups")
		delete(out, "retiredStates")
	}
	return out
}

// unpackGroups decodes packed identities (§2.1): each name the previous
// name's first `shared` characters and the suffix.
func unpackGroups(groups []any) []any {
	ids := []any{}
	for _, g := range groups {
		g := g.(map[string]any)
		prev := []rune{}
		for _, n := range g["names"].([]any) {
			pair := n.([]any)
			name := append(slices.Clone(prev[:int(pair[0].(float64))]), []rune(pair[1].(string))...)
			ids = append(ids, map[string]any{"apiVersion": g["apiVersion"], "kind": g["kind"], "namespace": g["namespace"], "name": string(name)})
			prev = name
		}
	}
	return ids
}
