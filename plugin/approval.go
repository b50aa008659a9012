package plugin

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/approval"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/views"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// approvalOptions are the flags of propose, approve and reject.
type approvalOptions struct {
	flags    *genericclioptions.ConfigFlags
	streams  genericiooptions.IOStreams
	record   string
	reason   string
	replace  bool
	output   string
	decision string // "" for propose
	release  string // approve and reject: --release DIR
	deployed string // --deployed DIR_OLD
	secrets  secretFlags
}

func (o *approvalOptions) say() cas.Progress {
	return func(format string, args ...any) { fmt.Fprintf(o.streams.ErrOut, format+"\n", args...) }
}

func newCmdPropose(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &approvalOptions{flags: flags, streams: streams}
	cmd := &cobra.Command{
		Use:   "propose --preflight FILE",
		Short: "Propose a preflight record for a second person's approval (the two-person rule)",
		Long: `Propose the preflight record FILE for approval: create the approval object
(ConfigMap ` + record.Name + ` next to the Head, in the record's namespace),
pending, in your name as the API server authenticated you (SelfSubjectReview).
The record is read exactly as apply reads it, and the Head must still be the
Head it expects. The same record already proposed by you is a replay (exit 0).
An approval of another record that is decided, or proposed against a Head that
is gone, is replaced (a delete fenced by its UID and resourceVersion); a pending
one still valid is replaced only with --replace. The API server enforces who
may write what through the policy of "kubectl ql3 approval policy"
(docs/approval.md).`,
		Example: `  kubectl ql3 propose --preflight pf.json
  kubectl ql3 propose --preflight pf.json --replace`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context()) },
	}
	cmd.Flags().BoolVar(&o.replace, "replace", false, "replace a pending proposal of another preflight (or a rejection of this one)")
	o.addFlags(cmd)
	return cmd
}

func newCmdDecide(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams, decision string) *cobra.Command {
	o := &approvalOptions{flags: flags, streams: streams, decision: decision}
	verb := map[string]string{record.Approved: "approve", record.Rejected: "reject"}[decision]
	cmd := &cobra.Command{
		Use:   verb + " --preflight FILE",
		Short: map[string]string{record.Approved: "Approve", record.Rejected: "Reject"}[decision] + " a proposed preflight record as a second person (the two-person rule)",
		Long: `Decide the pending approval of the preflight record FILE you reviewed, in your
name as the API server authenticated you: the approval object must be for
exactly that record (its preflight and command digests and expected Head), and
the Head must still be that Head. The proposer cannot decide their own
proposal (exit 2), nor can a ServiceAccount; the API server refuses both too.
A decision is final. Two people deciding at once: exactly one wins, the other
exits 3 naming the winner. A lost answer is settled by reading the object
again (docs/approval.md).

The record holds digests, not content. With --release DIR the release you
reviewed is rendered and verified against the record exactly as apply will
verify it (its lock, source, render and inventory digests), and with
--deployed DIR_OLD (the release the Head deploys, verified against the Head's
lock) what it changes is shown, object by object, before the decision is
written. A release that is not the record's is refused (exit 2), nothing
written. This needs no permission beyond the approver role: the releases are
compared offline. Without --release only digests are compared, and the
output says so (stderr, and contentChecked false in -o json).`,
		Example: "  kubectl ql3 " + verb + " --preflight pf.json --release ./release --deployed ./release-prev --reason 'reviewed the diff'\n" +
			"  kubectl ql3 " + verb + " --preflight pf.json --release ./release --reason 'reviewed the release'   # an install: nothing deployed",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context()) },
	}
	cmd.Flags().StringVar(&o.reason, "reason", "", fmt.Sprintf("why (one printable line, at most %d bytes)", record.MaxReason))
	if decision == record.Rejected {
		_ = cmd.MarkFlagRequired("reason")
	}
	cmd.Flags().StringVar(&o.release, "release", "", "the release directory `DIR` you reviewed: verify it is the one the record binds, and show what it changes, before deciding")
	cmd.Flags().StringVar(&o.deployed, "deployed", "", "with --release, the release directory `DIR_OLD` the Head deploys (verified against the Head's lock), to compare with")
	o.secrets.add(cmd.Flags())
	o.addFlags(cmd)
	return cmd
}

func (o *approvalOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.record, "preflight", "", "the preflight record `FILE`")
	_ = cmd.MarkFlagRequired("preflight")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", outputUsage(outputJSON, outputYAML))
	registerOutputCompletion(cmd, outputJSON, outputYAML)
}

func (o *approvalOptions) run(ctx context.Context) error {
	if err := validateOutput(o.output, outputJSON, outputYAML); err != nil {
		return err
	}
	c, err := approvalClients(o.flags)
	if err != nil {
		return err
	}
	var res *approval.Result
	if o.decision == "" {
		res, err = approval.Propose(ctx, c, approval.ProposeRequest{Record: o.record, Replace: o.replace, Say: o.say(), Show: o.say()})
	} else {
		review, rerr := o.review()
		if rerr != nil {
			return rerr
		}
		res, err = approval.Decide(ctx, c, approval.DecideRequest{Record: o.record, Decision: o.decision, Reason: o.reason, Review: review, Say: o.say(), Show: o.say()})
	}
	if err != nil {
		return err
	}
	if o.output != "" {
		return printObject(o.streams.Out, o.output, res)
	}
	a := res.Approval
	fmt.Fprintf(o.streams.Out, "%s: %s/%s (uid %s, resourceVersion %s)\n", res.Outcome, res.Subject.Namespace, record.Name, res.UID, res.ResourceVersion)
	fmt.Fprintf(o.streams.Out, "decision %s, proposer %s, approver %q\n", a.Decision, a.Proposer, a.Approver)
	return nil
}

// review is --release: the release to check against the record and the
// changes to show (views.ReleaseChanges); nil without --release.
func (o *approvalOptions) review() (*approval.ReviewRequest, error) {
	if o.release == "" {
		if o.deployed != "" || o.secrets.allow || o.secrets.keyFile != "" {
			return nil, fail.Errorf(fail.Invalid, "--deployed, --allow-secret-data and --secret-digest-key-file only apply with --release")
		}
		return nil, nil
	}
	if err := o.secrets.validate(); err != nil {
		return nil, err
	}
	inv, err := o.secrets.options()
	if err != nil {
		return nil, err
	}
	return &approval.ReviewRequest{
		Release: o.release, Deployed: o.deployed,
		Options: deploy.Options{FS: filesys.MakeFsOnDisk(), ToolVersion: version, Inventory: inv},
		Changes: func(deployed, release []*unstructured.Unstructured, ns, version string) (any, error) {
			return views.ReleaseChanges(deployed, release, ns, version)
		},
		Show: func(r *approval.Reviewed) {
			if o.output == "" { // -o prints it in the result
				printReview(o.streams.Out, r)
			}
		},
	}, nil
}

// printReview shows what --release checked and what the release changes:
// one line per object, the objects that would be retired, the diffs.
func printReview(w io.Writer, r *approval.Reviewed) {
	fmt.Fprintf(w, "checked: %s\n", r.Verified)
	rep, ok := r.Changes.(*views.DiffReport)
	if !ok {
		return
	}
	for _, ch := range rep.Objects {
		fmt.Fprintf(w, "%-9s %s\n", ch.Change, ch.Object)
	}
	for _, rt := range rep.Retire {
		fmt.Fprintf(w, "would be retired %s (the release no longer has it)\n", rt.Object)
	}
	for _, ch := range rep.Objects {
		if ch.Change != views.Unchanged && ch.Diff != "" {
			fmt.Fprint(w, "\n", ch.Diff)
		}
	}
	against := "against the deployed release"
	if r.Deployed == "" {
		against = "(nothing deployed)"
	}
	fmt.Fprintf(w, "\n%s %s %s: %d created, %d changed, %d unchanged, %d would be retired (changes %s)\n",
		rep.Namespace, rep.Version, against, rep.Created, rep.Changed, rep.Unchanged, len(rep.Retire), rep.Digest)
}

// approvalClients are the approval ceremony's clients of the kubeconfig flags.
func approvalClients(flags *genericclioptions.ConfigFlags) (approval.Clients, error) {
	cfg, err := restConfig(flags)
	if err != nil {
		return approval.Clients{}, err
	}
	return approval.NewClients(cfg)
}

func newCmdApproval(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approval",
		Short: "Show a namespace's approval, or print the admission policy that enforces the two-person rule",
		Args:  noArgs,
	}
	cmd.AddCommand(newCmdApprovalStatus(flags, streams), newCmdApprovalPolicy(streams))
	return cmd
}

func newCmdApprovalStatus(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the approval object of a namespace and whether it still matches the Head (read-only)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateOutput(output, outputJSON, outputYAML); err != nil {
				return err
			}
			ns, err := namespace(flags)
			if err != nil {
				return err
			}
			c, err := approvalClients(flags)
			if err != nil {
				return err
			}
			rep, err := approval.Status(cmd.Context(), c, ns)
			if err != nil {
				return err
			}
			if output != "" {
				return printObject(streams.Out, output, rep)
			}
			printApprovalStatus(streams.Out, rep)
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", outputUsage(outputJSON, outputYAML))
	registerOutputCompletion(cmd, outputJSON, outputYAML)
	return cmd
}

func printApprovalStatus(w io.Writer, rep *approval.StatusReport) {
	fmt.Fprintf(w, "Namespace:   %s\n", rep.Namespace)
	if !rep.Present {
		fmt.Fprintf(w, "Approval:    absent (nothing proposed)\nHead:        %s\n", rep.Head)
		return
	}
	a := rep.Approval
	fmt.Fprintf(w, "Decision:    %s\nProposer:    %s\nApprover:    %s\n", a.Decision, a.Proposer, a.Approver)
	if a.Reason != "" {
		fmt.Fprintf(w, "Reason:      %s\n", a.Reason)
	}
	fmt.Fprintf(w, "Preflight:   %s\nCommand:     %s\nExpected:    %s\nHead:        %s\n", a.PreflightDigest, a.CommandDigest, a.ExpectedHead, rep.Head)
	fmt.Fprintf(w, "Matches:     %t\nObject:      uid %s, resourceVersion %s\n", rep.MatchesHead, rep.UID, rep.ResourceVersion)
}

func newCmdApprovalPolicy(streams genericiooptions.IOStreams) *cobra.Command {
	output := outputYAML
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Print the ValidatingAdmissionPolicy and binding that enforce the two-person rule (apply them as a cluster admin)",
		Long: `Print the ValidatingAdmissionPolicy ` + gate.PolicyName + ` and its binding
(validationActions [Deny], failurePolicy Fail): the API server then lets the
approval object be created only pending by the proposer it names, and changed
only once, to approved or rejected, by the approver it names, who is not the
proposer. apply's gate refuses unless exactly these are installed and enforced.
Offline.`,
		Example: "  kubectl ql3 approval policy | kubectl apply -f -",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateOutput(output, outputJSON, outputYAML); err != nil {
				return err
			}
			return printRBAC(streams.Out, output, gate.Policies())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", outputYAML, outputUsage(outputJSON, outputYAML)+"; yaml is a multi-document stream, the others see a v1 List")
	registerOutputCompletion(cmd, outputJSON, outputYAML)
	return cmd
}
