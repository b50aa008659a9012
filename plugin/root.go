// Package plugin holds the kubectl ql3 commands: flags, option resolution and
// printing. The work itself is done by ceremony, inventory and receipts.
package plugin

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

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

	root.AddCommand(
		newCmdVersion(flags, streams),
		newCmdRender(flags, streams), newCmdLock(flags, streams),
		newCmdHead(flags, streams),
		newCmdPreflight(flags, streams),
		newCmdApply(flags, streams, false),
		newCmdApply(flags, streams, true),
		newCmdRollback(flags, streams),
		newCmdDiff(flags, streams), newCmdStatus(flags, streams), newCmdHistory(flags, streams),
		newCmdRBAC(flags, streams),
		newCmdReceipt(streams),
		newCmdOperation(streams),
		newCmdKeyset(flags, streams),
		newCmdEnvBundle(flags, streams),
		newCmdPackage(flags, streams),
		newCmdWorker(flags, streams),
		newCmdCache(streams),
	)
	classifyUsageErrors(root)
	return root
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
