package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// pauseImage is pinned by digest, as a locked release requires. Every
// Deployment has replicas: 0, so it is never pulled.
const pauseImage = "registry.k8s.io/pause:3.10@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a"

var roles = []string{"control", "control-ai", "admin", "worker"}

// mix is the object mix of issue #8: 70% ConfigMaps of about 1 KiB, 10%
// Services, 10% ServiceAccounts, 10% Deployments with zero replicas, each
// Deployment labelled with one of the four roles.
type mix struct {
	configMaps, services, serviceAccounts, deployments int
}

func newMix(n int) mix {
	m := mix{services: n / 10, serviceAccounts: n / 10, deployments: n / 10}
	if m.deployments < len(roles) {
		m.deployments = len(roles)
	}
	m.configMaps = n - m.services - m.serviceAccounts - m.deployments
	return m
}

// objects builds the mix in namespace ns. revision goes into every
// ConfigMap, so a higher revision changes every ConfigMap and nothing else.
func objects(n int, ns string, revision int) []map[string]any {
	m := newMix(n)
	var out []map[string]any
	meta := func(name string, labels map[string]any) map[string]any {
		md := map[string]any{"name": name, "namespace": ns}
		if labels != nil {
			md["labels"] = labels
		}
		return md
	}
	for i := range m.configMaps {
		name := fmt.Sprintf("cm-%05d", i)
		out = append(out, map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": meta(name, nil),
			"data": map[string]any{
				"revision":  fmt.Sprint(revision),
				"log-level": "info",
				"queue":     "ql3-tasks-" + name,
				"payload":   payload(name, revision),
			},
		})
	}
	for i := range m.services {
		name := fmt.Sprintf("svc-%05d", i)
		out = append(out, map[string]any{
			"apiVersion": "v1", "kind": "Service",
			"metadata": meta(name, nil),
			"spec": map[string]any{
				"type":     "ClusterIP",
				"selector": map[string]any{"app.kubernetes.io/name": fmt.Sprintf("deploy-%05d", i%m.deployments)},
				"ports":    []any{map[string]any{"name": "http", "port": 80, "targetPort": "http"}},
			},
		})
	}
	for i := range m.serviceAccounts {
		out = append(out, map[string]any{
			"apiVersion": "v1", "kind": "ServiceAccount",
			"metadata": meta(fmt.Sprintf("sa-%05d", i), nil),
		})
	}
	for i := range m.deployments {
		name := fmt.Sprintf("deploy-%05d", i)
		role := roles[i%len(roles)]
		sa := "default"
		if m.serviceAccounts > 0 {
			sa = fmt.Sprintf("sa-%05d", i%m.serviceAccounts)
		}
		out = append(out, map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": meta(name, map[string]any{"qinglong.io/role": role}),
			"spec": map[string]any{
				"replicas": 0,
				"selector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": name}},
				"template": map[string]any{
					"metadata": map[string]any{"labels": map[string]any{"app.kubernetes.io/name": name, "qinglong.io/role": role}},
					"spec": map[string]any{
						"serviceAccountName": sa,
						"containers": []any{map[string]any{
							"name": "app", "image": pauseImage,
							"ports": []any{map[string]any{"name": "http", "containerPort": 8080}},
						}},
					},
				},
			},
		})
	}
	return out
}

// payload is about 900 bytes of deterministic text.
func payload(name string, revision int) string {
	var b strings.Builder
	for i := 0; b.Len() < 900; i++ {
		fmt.Fprintf(&b, "%s/r%d/line-%02d;", name, revision, i)
	}
	return b.String()
}

// writeRelease writes a kustomization release of objs into dir: one file
// per kind and a kustomization naming them and the namespace.
func writeRelease(dir, ns string, objs []map[string]any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	byKind := map[string][]map[string]any{}
	var kinds []string
	for _, o := range objs {
		k := strings.ToLower(o["kind"].(string)) + "s.yaml"
		if byKind[k] == nil {
			kinds = append(kinds, k)
		}
		byKind[k] = append(byKind[k], o)
	}
	for _, k := range kinds {
		if err := writeYAMLStream(filepath.Join(dir, k), byKind[k]); err != nil {
			return err
		}
	}
	kust := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + ns + "\nresources:\n"
	for _, k := range kinds {
		kust += "- " + k + "\n"
	}
	return os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kust), 0o644)
}

func writeYAMLStream(path string, objs []map[string]any) error {
	var b strings.Builder
	for i, o := range objs {
		y, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// writeChart writes a Helm chart whose one template is objs, verbatim (the
// generated objects hold no template actions).
func writeChart(dir string, objs []map[string]any) error {
	if err := os.MkdirAll(filepath.Join(dir, "templates"), 0o755); err != nil {
		return err
	}
	chart := "apiVersion: v2\nname: bench\nversion: 1.0.0\n"
	if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte(chart), 0o644); err != nil {
		return err
	}
	return writeYAMLStream(filepath.Join(dir, "templates", "objects.yaml"), objs)
}

func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// genMain is `bench gen -n N -namespace NS [-revision R] DIR`: write the
// mix as a kustomization release (to lock and deploy by hand, or to
// profile a render).
func genMain(args []string) {
	fs := flag.NewFlagSet("gen", flag.ExitOnError)
	n := fs.Int("n", 1000, "objects")
	ns := fs.String("namespace", "ql3-bench", "namespace of every object (and the control namespace)")
	rev := fs.Int("revision", 1, "revision written into every ConfigMap")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		die(fmt.Errorf("usage: bench gen [-n N] [-namespace NS] [-revision R] DIR"))
	}
	if err := writeRelease(fs.Arg(0), *ns, objects(*n, *ns, *rev)); err != nil {
		die(err)
	}
}
