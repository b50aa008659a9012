package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// The -o values every command shares (validateOutput, printObject):
//
//   - json and yaml are this plugin's own encodings (JSON indented by two
//     spaces with a final newline; sigs.k8s.io/yaml), byte for byte what
//     they always were: scripts rely on them, and cli-runtime's JSON
//     printer refuses objects without apiVersion and kind, which most of
//     our results are.
//   - name prints what the result names, one per line, as kubectl -o name
//     does for objects (printers.NamePrinter: kind[.group]/name); see
//     printNames for each command's.
//   - the template formats (jsonpath=…, jsonpath-file=…, jsonpath-as-json=…,
//     go-template=…, go-template-file=…, template=…, templatefile=…) are
//     cli-runtime's printers, with kubectl's defaults (missing keys print
//     nothing), run over the very object -o json prints, so a template
//     names the same fields: -o jsonpath='{.expectedHead}'.
const (
	outputJSON = "json"
	outputYAML = "yaml"
	outputName = "name"
)

// defaultFormats are the non-template formats of a command that names
// none: json, yaml and name.
var defaultFormats = []string{outputJSON, outputYAML, outputName}

// templateCompletions are the template formats shell completion offers;
// the template or file follows the "=".
var templateCompletions = []string{"jsonpath=", "jsonpath-file=", "go-template=", "go-template-file="}

// outputUsage is the usage of an -o flag accepting formats and the
// template formats; its value name is FORMAT.
func outputUsage(formats ...string) string {
	if len(formats) == 0 {
		formats = defaultFormats
	}
	return "output `FORMAT`: " + strings.Join(formats, ", ") + ", jsonpath=TEMPLATE, jsonpath-file=FILE, go-template=TEMPLATE or go-template-file=FILE"
}

// isTemplateOutput reports whether output names one of cli-runtime's
// template formats (with or without its "=TEMPLATE").
func isTemplateOutput(output string) bool {
	name, _, _ := strings.Cut(output, "=")
	return slices.Contains(genericclioptions.NewKubeTemplatePrintFlags().AllowedFormats(), name)
}

// templatePrinter parses the template of a template format: a bad
// template, or an unreadable template file, is invalid input.
func templatePrinter(output string) (printers.ResourcePrinter, error) {
	p, err := genericclioptions.NewKubeTemplatePrintFlags().ToPrinter(output)
	switch {
	case err == nil:
		return p, nil
	case !strings.Contains(output, "="):
		return nil, fail.Errorf(fail.Invalid, "--output %q: write the template (or, for a -file format, its file) after \"=\", e.g. -o jsonpath='{.metadata.name}'", output)
	}
	return nil, fail.Errorf(fail.Invalid, "--output %q: %s", output, firstLine(err))
}

// validateOutput checks an -o value before the command does anything:
// "" (the command's own human output), one of formats (json, yaml and
// name when none are given), or a template format whose template parses.
func validateOutput(output string, formats ...string) error {
	if output == "" {
		return nil
	}
	if len(formats) == 0 {
		formats = defaultFormats
	}
	if slices.Contains(formats, output) {
		return nil
	}
	if isTemplateOutput(output) {
		_, err := templatePrinter(output)
		return err
	}
	return fail.Errorf(fail.Invalid, "--output %q is not supported; use one of %s, jsonpath=TEMPLATE, jsonpath-file=FILE, go-template=TEMPLATE, go-template-file=FILE", output, strings.Join(formats, ", "))
}

// printObject prints v, a command's result, in the -o format output,
// which validateOutput accepted.
func printObject(w io.Writer, output string, v any) error {
	switch output {
	case outputJSON, outputYAML:
		var out []byte
		var err error
		if output == outputYAML {
			out, err = yaml.Marshal(v)
		} else {
			out, err = json.MarshalIndent(v, "", "  ")
			out = append(out, '\n')
		}
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	case outputName:
		return printNames(w, v)
	}
	p, err := templatePrinter(output)
	if err != nil {
		return err
	}
	obj, err := toUnstructured(v)
	if err != nil {
		return err
	}
	if err := p.PrintObj(obj, w); err != nil {
		return fail.Errorf(fail.Invalid, "--output %q: %s", output, firstLine(err))
	}
	return nil
}

// toUnstructured is v as -o json prints it, for cli-runtime's printers:
// the same field names, integers as int64 as in any unstructured object.
func toUnstructured(v any) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := utiljson.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("print %T: not a JSON object", v)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// printNames is -o name. Each command's names, one per line:
//
//   - head: configmap/qinglong3-deployment-head when the Head exists,
//     nothing when it does not;
//   - preflight: the preflight record's path;
//   - apply, resume, rollback: the receipt's path (nothing if there is no
//     receipt, as for a superseded apply);
//   - receipt audit: each audited receipt file;
//   - lock, lock verify: the lock file's path;
//   - render (with or without --inventory) and rbac: each object as
//     kind[.group]/name, as kubectl -o name prints it.
func printNames(w io.Writer, v any) error {
	var lines []string
	switch r := v.(type) {
	case HeadReport:
		if !r.Present {
			return nil
		}
		return printObjectNames(w, []*unstructured.Unstructured{stub("v1", "ConfigMap", r.Namespace, deploy.HeadName)})
	case *deploy.PreflightResult:
		lines = []string{r.Path}
	case *deploy.ApplyResult:
		lines = []string{r.Receipt}
	case LockReport:
		lines = []string{r.Path}
	case *receipts.Report:
		for _, row := range r.Receipts {
			lines = append(lines, row.File)
		}
	case InventoryReport:
		return printIdentityNames(w, r.Render.Inventory)
	case objectList:
		items := make([]*unstructured.Unstructured, 0, len(r.Items))
		for _, it := range r.Items {
			u, err := toUnstructured(it)
			if err != nil {
				return err
			}
			items = append(items, u)
		}
		return printObjectNames(w, items)
	default:
		return fail.Errorf(fail.Invalid, "--output name is not supported here; use json or yaml")
	}
	for _, l := range lines {
		if l == "" {
			continue
		}
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}

// objectList is what -o json prints for a list of Kubernetes objects
// (render, rbac): a v1 List.
type objectList struct {
	APIVersion string `json:"apiVersion"`
	Items      []any  `json:"items"`
	Kind       string `json:"kind"` // after items: the order -o json always printed
}

func newObjectList(items []any) objectList {
	return objectList{APIVersion: "v1", Items: items, Kind: "List"}
}

func printIdentityNames(w io.Writer, ids []inventory.Identity) error {
	objs := make([]*unstructured.Unstructured, 0, len(ids))
	for _, id := range ids {
		objs = append(objs, stub(id.APIVersion, id.Kind, id.Namespace, id.Name))
	}
	return printObjectNames(w, objs)
}

// printObjectNames prints kind[.group]/name for each object through
// cli-runtime's NamePrinter.
func printObjectNames(w io.Writer, objs []*unstructured.Unstructured) error {
	p := &printers.NamePrinter{}
	for _, o := range objs {
		if err := p.PrintObj(o, w); err != nil {
			return err
		}
	}
	return nil
}

func stub(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// firstLine is err's first line, without cli-runtime's invitation to read
// the debugging dump it appends: errors print as one line.
func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	s = strings.TrimSuffix(s, " Printing more information for debugging the template:")
	return strings.TrimSpace(s)
}

// registerOutputCompletion completes -o with the command's formats (json,
// yaml and name when none are given) and the template formats, whose
// template follows the "=".
func registerOutputCompletion(cmd *cobra.Command, formats ...string) {
	if len(formats) == 0 {
		formats = defaultFormats
	}
	all := append(slices.Clone(formats), templateCompletions...)
	_ = cmd.RegisterFlagCompletionFunc("output", func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		var out []string
		for _, f := range all {
			if strings.HasPrefix(f, toComplete) {
				out = append(out, f)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	})
}

// printRBAC prints the objects of an `rbac` command: with -o yaml (or no
// -o) a multi-document YAML stream ready for `kubectl apply -f -`, any
// other format over a v1 List.
func printRBAC(w io.Writer, output string, objs []any) error {
	if output != outputYAML && output != "" {
		return printObject(w, output, newObjectList(objs))
	}
	for i, obj := range objs {
		out, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(w, "---")
		}
		if _, err := w.Write(out); err != nil {
			return err
		}
	}
	return nil
}
