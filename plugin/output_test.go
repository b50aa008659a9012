package plugin

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/views"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

func TestValidateOutput(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tmpl")
	if err := os.WriteFile(file, []byte("{.namespace}"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		output  string
		formats []string
		wantErr string // "" for accepted; else a substring of the invalid-input error
	}{
		{"empty is the human output", "", nil, ""},
		{"json", "json", nil, ""},
		{"yaml", "yaml", nil, ""},
		{"name", "name", nil, ""},
		{"jsonpath", "jsonpath={.expectedHead}", nil, ""},
		{"jsonpath with = inside", `jsonpath={.items[?(@.kind=="ConfigMap")].metadata.name}`, nil, ""},
		{"jsonpath-as-json", "jsonpath-as-json={.head}", nil, ""},
		{"jsonpath-file", "jsonpath-file=" + file, nil, ""},
		{"go-template", "go-template={{.expectedHead}}", nil, ""},
		{"go-template-file", "go-template-file=" + file, nil, ""},
		{"name refused where not offered", "name", []string{"json", "yaml"}, `--output "name" is not supported; use one of json, yaml, jsonpath=TEMPLATE`},
		{"template accepted where name is not", "jsonpath={.plugin.version}", []string{"json", "yaml"}, ""},
		{"unknown", "wide", nil, `--output "wide" is not supported; use one of json, yaml, name, jsonpath=TEMPLATE`},
		{"case matters", "JSON", nil, `--output "JSON" is not supported`},
		{"jsonpath without template", "jsonpath", nil, `--output "jsonpath": write the template`},
		{"jsonpath with empty template", "jsonpath=", nil, `--output "jsonpath=": template format specified but no template given`},
		{"bad jsonpath", "jsonpath={.a", nil, `--output "jsonpath={.a": error parsing jsonpath {.a, unclosed action`},
		{"bad go-template", "go-template={{.a", nil, `--output "go-template={{.a": error parsing template`},
		{"missing template file", "go-template-file=" + file + ".absent", nil, "no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validateOutput(tt.output, tt.formats...)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("validateOutput(%q) = %v, want nil", tt.output, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || fail.ClassOf(err) != fail.Invalid || strings.Contains(err.Error(), "\n") {
				t.Fatalf("validateOutput(%q) = %v (class %v); want one invalid-input line containing %q", tt.output, err, fail.ClassOf(err), tt.wantErr)
			}
		})
	}
}

func testHeadReport() HeadReport {
	return HeadReport{
		Namespace:    "ql3-demo",
		Present:      true,
		ExpectedHead: "ql3h1-3-abc",
		Head:         &deploy.Head{Generation: 3, Phase: "committed"},
	}
}

// -o json and -o yaml keep the bytes they always had: two-space indented
// JSON with a final newline, and sigs.k8s.io/yaml.
func TestPrintObjectJSONAndYAMLBytes(t *testing.T) {
	rep := HeadReport{Namespace: "ns", Present: false, ExpectedHead: deploy.AbsentToken}
	tests := []struct {
		output string
		want   string
	}{
		{"json", "{\n  \"namespace\": \"ns\",\n  \"present\": false,\n  \"expectedHead\": \"ql3h1-0-none\"\n}\n"},
		{"yaml", "expectedHead: ql3h1-0-none\nnamespace: ns\npresent: false\n"},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		if err := printObject(&b, tt.output, rep); err != nil {
			t.Fatal(err)
		}
		if b.String() != tt.want {
			t.Errorf("-o %s = %q, want %q", tt.output, b.String(), tt.want)
		}
	}
	// A list keeps apiVersion, items, kind: the order of the map it replaced.
	var b bytes.Buffer
	if err := printObject(&b, "json", newObjectList([]any{map[string]any{"kind": "ConfigMap"}})); err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"apiVersion\": \"v1\",\n  \"items\": [\n    {\n      \"kind\": \"ConfigMap\"\n    }\n  ],\n  \"kind\": \"List\"\n}\n"
	if b.String() != want {
		t.Errorf("list -o json = %q, want %q", b.String(), want)
	}
}

// The template printers see the field names -o json prints.
func TestPrintObjectTemplates(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tmpl")
	if err := os.WriteFile(file, []byte(`{{.namespace}} {{.head.generation}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	list := newObjectList([]any{
		map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "a"}},
		map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "b", "namespace": "a"}},
	})
	tests := []struct {
		name   string
		output string
		v      any
		want   string
	}{
		{"jsonpath of a field", "jsonpath={.expectedHead}", testHeadReport(), "ql3h1-3-abc"},
		{"jsonpath of a nested integer", "jsonpath={.head.generation}", testHeadReport(), "3"},
		{"jsonpath of a missing field is empty", "jsonpath={.nothing}", testHeadReport(), ""},
		{"jsonpath over a list", "jsonpath={.items[*].metadata.name}", list, "a b"},
		{"jsonpath with a filter", `jsonpath={.items[?(@.kind=="Deployment")].metadata.namespace}`, list, "a"},
		{"go-template", "go-template={{.expectedHead}}/{{.present}}", testHeadReport(), "ql3h1-3-abc/true"},
		{"go-template-file", "go-template-file=" + file, testHeadReport(), "ql3-demo 3"},
		{"version", "jsonpath={.plugin.version}", VersionInfo{Plugin: PluginVersion{Version: "v1.2.3"}}, "v1.2.3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printObject(&b, tt.output, tt.v); err != nil {
				t.Fatalf("printObject(%q): %v", tt.output, err)
			}
			if b.String() != tt.want {
				t.Fatalf("printObject(%q) = %q, want %q", tt.output, b.String(), tt.want)
			}
		})
	}
}

// A template that fails when it runs is one invalid-input error line,
// without cli-runtime's multi-line debugging dump.
func TestPrintObjectTemplateError(t *testing.T) {
	tests := []struct{ output, want string }{
		{`go-template={{index .head 5}}`, `--output "go-template={{index .head 5}}": error executing template`},
		{`jsonpath={.namespace[0]}`, `--output "jsonpath={.namespace[0]}": error executing jsonpath "{.namespace[0]}": Error executing template: string is not array or slice.`},
	}
	for _, tt := range tests {
		err := printObject(&bytes.Buffer{}, tt.output, testHeadReport())
		if err == nil || fail.ClassOf(err) != fail.Invalid || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("-o %s: err = %q (class %v); want one invalid-input line starting %q", tt.output, err, fail.ClassOf(err), tt.want)
		}
	}
}

func TestPrintNames(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"head present", testHeadReport(), "configmap/qinglong3-deployment-head\n"},
		{"head absent prints nothing", HeadReport{Namespace: "ns", ExpectedHead: deploy.AbsentToken}, ""},
		{"preflight record", &deploy.PreflightResult{Path: "/w/pf.json"}, "/w/pf.json\n"},
		{"apply receipt", &deploy.ApplyResult{Receipt: "/w/receipts/000001-install-3.0.0.receipt.json"}, "/w/receipts/000001-install-3.0.0.receipt.json\n"},
		{"superseded apply without receipt", &deploy.ApplyResult{Outcome: "superseded"}, ""},
		{"lock file", LockReport{Path: "rel/ql3.lock.yaml", State: "verified"}, "rel/ql3.lock.yaml\n"},
		{"receipt audit files", &receipts.Report{Receipts: []receipts.ReceiptVerdict{{File: "r/1.receipt.json"}, {File: "r/2.receipt.json"}}}, "r/1.receipt.json\nr/2.receipt.json\n"},
		{"inventory", InventoryReport{Render: inventory.LockRender{Inventory: []inventory.Identity{
			{APIVersion: "v1", Kind: "Namespace", Name: "a"},
			{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "a", Name: "web"},
			{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role", Namespace: "a", Name: "r"},
		}}}, "namespace/a\ndeployment.apps/web\nrole.rbac.authorization.k8s.io/r\n"},
		{"object list", newObjectList([]any{
			map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c"}},
			map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": map[string]any{"name": "x.example.com"}},
		}), "configmap/c\ncustomresourcedefinition.apiextensions.k8s.io/x.example.com\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printObject(&b, "name", tt.v); err != nil {
				t.Fatalf("printObject(name): %v", err)
			}
			if b.String() != tt.want {
				t.Fatalf("-o name = %q, want %q", b.String(), tt.want)
			}
		})
	}
	// version offers no -o name: a result without names is refused.
	if err := printObject(&bytes.Buffer{}, "name", VersionInfo{}); fail.ClassOf(err) != fail.Invalid {
		t.Fatalf("-o name of VersionInfo: %v, want invalid input", err)
	}
}

// Completion offers the command's formats and the template formats.
func TestOutputCompletion(t *testing.T) {
	tests := []struct {
		formats    []string
		toComplete string
		want       []string
	}{
		{nil, "", []string{"json", "yaml", "name", "jsonpath=", "jsonpath-file=", "go-template=", "go-template-file="}},
		{nil, "js", []string{"json", "jsonpath=", "jsonpath-file="}},
		{[]string{"json", "yaml"}, "", []string{"json", "yaml", "jsonpath=", "jsonpath-file=", "go-template=", "go-template-file="}},
		{nil, "go-template-f", []string{"go-template-file="}},
	}
	for _, tt := range tests {
		cmd := &cobra.Command{Use: "x"}
		cmd.Flags().StringP("output", "o", "", "")
		registerOutputCompletion(cmd, tt.formats...)
		fn, ok := cmd.GetFlagCompletionFunc("output")
		if !ok {
			t.Fatal("no completion for -o")
		}
		got, dir := fn(cmd, nil, tt.toComplete)
		if !slices.Equal(got, tt.want) || dir&cobra.ShellCompDirectiveNoFileComp == 0 {
			t.Errorf("complete -o %q = %v (%v), want %v without file completion", tt.toComplete, got, dir, tt.want)
		}
		// Every offered value is one validateOutput accepts once the
		// template follows its "=".
		for _, v := range got {
			if strings.HasSuffix(v, "=") {
				v += "{.x}"
				if strings.HasSuffix(v, "-file={.x}") {
					continue // a file name, not a template
				}
				if strings.HasPrefix(v, "go-template") {
					v = strings.TrimSuffix(v, "{.x}") + "{{.x}}"
				}
			}
			if err := validateOutput(v, tt.formats...); err != nil {
				t.Errorf("completion offers %q, which validateOutput refuses: %v", v, err)
			}
		}
	}
}

// FuzzValidateOutput: any -o value is accepted or refused as invalid
// input in one line, and an accepted one prints a result without
// panicking; a print error is invalid input too.
func FuzzValidateOutput(f *testing.F) {
	for _, s := range []string{"", "json", "yaml", "name", "wide", "jsonpath", "jsonpath=", "jsonpath={.expectedHead}",
		"jsonpath={.head.current}", `jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}`, "jsonpath-as-json={.head}",
		"go-template={{.expectedHead}}", "go-template={{range .x}}", "go-template={{index .namespace 9}}", "template={{.present}}",
		"jsonpath={.a[", "jsonpath={..}", "jsonpath-file=/nonexistent"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, output string) {
		if strings.Contains(output, "-file=") || strings.HasPrefix(output, "templatefile=") {
			return // would read a file the input names (/dev/zero, a FIFO): TestValidateOutput covers files
		}
		err := validateOutput(output)
		if err != nil {
			if fail.ClassOf(err) != fail.Invalid || strings.Contains(err.Error(), "\n") {
				t.Fatalf("validateOutput(%q) = %q (class %v), want one invalid-input line", output, err, fail.ClassOf(err))
			}
			return
		}
		if output == "" {
			return
		}
		if err := printObject(&bytes.Buffer{}, output, testHeadReport()); err != nil && fail.ClassOf(err) != fail.Invalid {
			t.Fatalf("printObject(%q) = %v (class %v), want nil or invalid input", output, err, fail.ClassOf(err))
		}
	})
}

// diff's exit codes follow kubectl diff: 1 is differences only, so a
// failure that fits no class is unavailable (4), never 1; a classed one
// keeps its class.
func TestDiffFailureNeverExitsOne(t *testing.T) {
	plain := errors.New("write /dev/stdout: broken pipe")
	for _, tt := range []struct {
		err  error
		want int
	}{
		{plain, 4},
		{fail.Wrap(fail.Invalid, plain), 2},
		{fail.Wrap(fail.Tamper, plain), 5},
	} {
		if got := fail.ClassOf(diffFailure(tt.err)).ExitCode(); got != tt.want {
			t.Errorf("%v: exit %d, want %d", tt.err, got, tt.want)
		}
	}
	if diffFailure(nil) != nil || fail.ClassOf(diffFailure(errChanges)).ExitCode() != 1 {
		t.Errorf("nil or differences changed")
	}
}

// TestPrintDiffBodies: the human diff prints the body of every created and
// changed object (a created one is all "+" lines, as kubectl diff shows
// it) and none of an unchanged one.
func TestPrintDiffBodies(t *testing.T) {
	cm := func(name string) inventory.Identity {
		return inventory.Identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: name}
	}
	rep := &views.DiffReport{Namespace: "ns", Version: "3.1.0", Objects: []views.ObjectChange{
		{Object: cm("new"), Change: views.Created, Diff: "--- live/v1.ConfigMap.ns.new\n+++ dry-run/v1.ConfigMap.ns.new\n@@ -0,0 +1 @@\n+data: created-body\n"},
		{Object: cm("old"), Change: views.Changed, Diff: "--- live/x\n+++ dry-run/x\n@@ -1 +1 @@\n-a: 1\n+a: changed-body\n"},
		{Object: cm("same"), Change: views.Unchanged},
	}}
	var b strings.Builder
	if err := printDiff(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"+data: created-body", "+a: changed-body"} {
		if !strings.Contains(out, want) {
			t.Errorf("human diff lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "+++ dry-run/") != 2 {
		t.Errorf("want exactly two bodies:\n%s", out)
	}
}
