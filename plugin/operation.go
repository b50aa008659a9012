package plugin

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/operation"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

func newCmdOperation(streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "operation",
		Short: "Check optional cluster operations offline",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCmdOperationAudit(streams))
	return cmd
}

type operationAuditOptions struct {
	streams    genericiooptions.IOStreams
	dir        string
	repoRoot   string
	deployable bool
	output     string
}

func newCmdOperationAudit(streams genericiooptions.IOStreams) *cobra.Command {
	o := &operationAuditOptions{streams: streams}
	cmd := &cobra.Command{
		Use:   "audit DIR",
		Short: "Audit the plugin package management operation's manifests offline",
		Long: `Render the kustomization in DIR in-process (as kubectl ql3 render does, without
requiring pinned images) and check the rendered objects against the reviewed
shape of the plugin package management operation: one named finding per
violated rule, each with the object, the field path, and what was expected
and found. The rules are in docs/operation-audit.md.

By default DIR is audited as committed: the admin image must carry the
all-zero placeholder digest. With --repo-root, every kustomization in that
checkout is also read: none may reference the operation, none may list a
committed example (*.example.*). With --deployable, DIR is audited as a
deployment controller would apply it: the placeholder digest is forbidden and
QL3_PLUGIN_PACKAGE_MANAGEMENT_ENABLED must be "true".

Offline: no cluster is contacted. Any finding exits 2 after the report is
printed; a single-replica development patch is reported as such.`,
		Example: `  kubectl ql3 operation audit deploy/kubernetes/ql3-cluster/operations/plugin-package-management/cloudnative-pg --repo-root .
  kubectl ql3 operation audit ./private/plugin-package-management --deployable -o json`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.dir = args[0]
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run()
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.deployable, "deployable", false, "audit as deployable: a released admin image digest and the management switch on")
	f.StringVar(&o.repoRoot, "repo-root", "", "repository checkout `DIR` holding the operation; every kustomization in it is checked too")
	f.StringVarP(&o.output, "output", "o", "", outputUsage("json", "yaml"))
	registerOutputCompletion(cmd, "json", "yaml")
	return cmd
}

// Validate checks the flags.
func (o *operationAuditOptions) Validate() error {
	return validateOutput(o.output, "json", "yaml")
}

// Run audits, prints the report, and fails invalid (exit 2) on findings.
func (o *operationAuditOptions) Run() error {
	mode := operation.Committed
	if o.deployable {
		mode = operation.Deployable
	}
	rep, err := operation.Audit(filesys.MakeFsOnDisk(), o.dir, operation.Options{Mode: mode, RepoRoot: o.repoRoot})
	if err != nil {
		return err
	}
	if o.output != "" {
		err = printObject(o.streams.Out, o.output, rep)
	} else {
		err = printOperationReport(o.streams.Out, rep)
	}
	if err != nil {
		return err
	}
	switch n := len(rep.Findings); n {
	case 0:
		return nil
	case 1:
		return fail.Errorf(fail.Invalid, "operation %q: 1 finding in %s mode (rules: docs/operation-audit.md)", o.dir, rep.Mode)
	default:
		return fail.Errorf(fail.Invalid, "operation %q: %d findings in %s mode (rules: docs/operation-audit.md)", o.dir, n, rep.Mode)
	}
}

func printOperationReport(out io.Writer, rep *operation.Report) error {
	shape := string(rep.Shape)
	if rep.Shape == operation.Development {
		shape += " (not production HA evidence)"
	}
	fmt.Fprintf(out, "operation %s: %s mode, shape %s, %d rules checked\n", rep.Dir, rep.Mode, shape, len(rep.Checked))
	if len(rep.NotChecked) > 0 {
		fmt.Fprintf(out, "not checked: %s\n", strings.Join(rep.NotChecked, ", "))
	}
	if len(rep.Findings) == 0 {
		_, err := fmt.Fprintln(out, "no findings")
		return err
	}
	w := printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "RULE\tOBJECT\tPATH\tEXPECTED\tFOUND")
	for _, f := range rep.Findings {
		where := f.File
		if f.Object != nil {
			where = f.Object.String()
		}
		path := f.Path
		if path == "" {
			path = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", f.Rule, where, path, f.Expected, f.Found)
	}
	return w.Flush()
}
