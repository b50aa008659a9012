// Package plugin holds the kubectl ql3 commands: flags, option resolution and
// printing. The work itself is done by ceremony, inventory and receipts.
package plugin

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/helmchart"
)

// Every command renders vendored Helm charts with the linked Helm SDK
// (docs/lock.md, "Helm charts").
func init() { helmchart.Register() }

// version is the plugin's own version, stamped at build time with
// -ldflags "-X github.com/qinglong/kubectl-ql3/plugin.version=vX.Y.Z".
var version = "v0.0.0-dev"

// Version is the stamped plugin version.
func Version() string { return version }

// NewCmdRoot builds `kubectl ql3` and every subcommand.
func NewCmdRoot(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{
		Use:   "kubectl-ql3",
		Short: "Deploy a locked release with a compare-and-swap Head and verifiable receipts",
		Long: `kubectl ql3 deploys a versioned, locked set of Kubernetes manifests and proves
afterwards what it did. One small Head ConfigMap on the target cluster moves
through "applying" and "committed" by resourceVersion compare-and-swap, so two
operators can never silently overwrite each other, and every deployment leaves
a receipt that "kubectl ql3 receipt audit" verifies offline.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl ql3"},
		Args:          noArgs,
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	flags.AddFlags(root.PersistentFlags())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return fail.Wrap(fail.Invalid, err) })
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)

	addGroups(root,
		group{"ceremony", "Deployment ceremony (the Head):", []*cobra.Command{
			newCmdLock(flags, streams), newCmdPreflight(flags, streams), newCmdApply(flags, streams, false),
			newCmdRollback(flags, streams), newCmdApply(flags, streams, true), newCmdHead(flags, streams), newCmdRBAC(flags, streams),
			newCmdFleet(flags, streams)}},
		group{"approval", "Two-person rule (approval of a preflight):", []*cobra.Command{
			newCmdPropose(flags, streams), newCmdDecide(flags, streams, record.Approved), newCmdDecide(flags, streams, record.Rejected), newCmdApproval(flags, streams)}},
		group{"views", "Read-only views:", []*cobra.Command{
			newCmdRender(flags, streams), newCmdDiff(flags, streams), newCmdStatus(flags, streams), newCmdHistory(flags, streams)}},
		group{"siblings", "Sibling ceremonies:", []*cobra.Command{
			newCmdPackage(flags, streams), newCmdKeyset(flags, streams), newCmdWorker(flags, streams),
			newCmdEnvBundle(flags, streams), newCmdOperation(streams)}},
		group{"audits", "Offline audits:", []*cobra.Command{newCmdReceipt(streams)}},
		group{groupOther, "Other commands:", []*cobra.Command{newCmdCache(streams), newCmdVersion(flags, streams)}},
	)
	root.SetHelpCommandGroupID(groupOther)
	root.SetCompletionCommandGroupID(groupOther)
	classifyUsageErrors(root)
	return root
}

// groupOther holds what is not a ceremony, a view or an audit: cache,
// version, and cobra's completion and help.
const groupOther = "other"

// group is a command group of `kubectl ql3 --help`.
type group struct {
	id, title string
	cmds      []*cobra.Command
}

// addGroups adds each group and its commands to root, so that --help
// lists the deployment ceremony, the views, the sibling ceremonies and the
// offline audits apart.
func addGroups(root *cobra.Command, groups ...group) {
	for _, g := range groups {
		root.AddGroup(&cobra.Group{ID: g.id, Title: g.title})
		for _, c := range g.cmds {
			c.GroupID = g.id
			root.AddCommand(c)
		}
	}
}

// classifyUsageErrors makes every usage error cobra itself returns —
// positional arguments, required flags, flag groups — invalid input
// (exit 2): cobra returns them unclassified, which would exit 1.
func classifyUsageErrors(root *cobra.Command) {
	// Runs before cobra's own required-flag and flag-group checks.
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := cmd.ValidateRequiredFlags(); err != nil {
			return fail.Wrap(fail.Invalid, err)
		}
		return fail.Wrap(fail.Invalid, cmd.ValidateFlagGroups())
	}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if args := c.Args; args != nil {
			c.Args = func(cmd *cobra.Command, a []string) error { return fail.Wrap(fail.Invalid, args(cmd, a)) }
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// noArgs is cobra.NoArgs classified as invalid input.
func noArgs(cmd *cobra.Command, args []string) error {
	return fail.Wrap(fail.Invalid, cobra.NoArgs(cmd, args))
}

// exactArgs is cobra.ExactArgs classified as invalid input.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		return fail.Wrap(fail.Invalid, cobra.ExactArgs(n)(cmd, args))
	}
}
