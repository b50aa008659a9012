package plugin

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

func newCmdReceipt(streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "receipt",
		Short: "Verify deployment receipts offline",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCmdReceiptAudit(streams))
	return cmd
}

type receiptAuditOptions struct {
	streams        genericiooptions.IOStreams
	paths          []string
	release        string
	trustedKeys    []string
	fromGeneration int64
	output         string
	secrets        secretFlags
}

func newCmdReceiptAudit(streams genericiooptions.IOStreams) *cobra.Command {
	o := &receiptAuditOptions{streams: streams}
	cmd := &cobra.Command{
		Use:   "audit PATH...",
		Short: "Verify receipts and their hash chain offline, without contacting a cluster",
		Long: `Verify receipt files offline. Each PATH is a receipt file or a directory of
them (*.receipt.json, with optional *.receipt.json.sig signatures beside them).
Every receipt must be canonical JSON of the current schema with every digest
recomputed and every rule holding; all receipts together must form one chain:
generations contiguous from 1 (or from --from-generation), each receipt linked
to the one before by its previous deployment and previous receipt digest, one
target throughout.

With --trusted-key, every receipt needs a valid Ed25519 signature by one of the
given public keys. With --release, the release directory is rendered and
verified against its lock, and must be the newest receipt's deployment.

A PATH named rollout-<digest>.json is a fleet's rollout receipt: it is audited
with the deployment receipts of its targets, found beside it in <target>/
directories (docs/fleet.md §8); give only rollout receipts then.

The audit never contacts a cluster: it does not prove that the Head is still
at the newest audited generation, nor that no later receipt exists. The format
and the checks are in docs/receipts.md. Any failure exits "tamper" (5) after
the report is printed.`,
		Example: `  kubectl ql3 receipt audit ./release/receipts
  kubectl ql3 receipt audit ./release/receipts --trusted-key ops.pub --release ./release
  kubectl ql3 receipt audit 000042-upgrade-3.4.0.receipt.json --from-generation 42 -o json
  kubectl ql3 receipt audit ./release/receipts -o jsonpath='{.verdict}'
  kubectl ql3 receipt audit fleet/receipts/rollout-*.json --trusted-key ops.pub`,
		Args: func(cmd *cobra.Command, args []string) error {
			return fail.Wrap(fail.Invalid, cobra.MinimumNArgs(1)(cmd, args))
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.paths = args
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run()
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.release, "release", "", "release directory `DIR` to re-render, verify against its lock, and compare with the newest receipt")
	f.StringArrayVar(&o.trustedKeys, "trusted-key", nil, "`FILE` holding an Ed25519 public key (PKIX PEM); every receipt must be signed by one of the trusted keys (repeatable)")
	f.Int64Var(&o.fromGeneration, "from-generation", 1, "first generation `N` of a truncated history; its link to the generation before is not checked")
	f.StringVarP(&o.output, "output", "o", "", outputUsage()+"; name prints each receipt file")
	o.secrets.add(f)
	registerOutputCompletion(cmd)
	return cmd
}

func (o *receiptAuditOptions) Validate() error {
	if len(o.paths) == 0 {
		return fail.Errorf(fail.Invalid, "give at least one receipt file or directory")
	}
	if o.fromGeneration < 1 {
		return fail.Errorf(fail.Invalid, "--from-generation %d: want 1 or more", o.fromGeneration)
	}
	if o.release == "" && (o.secrets.allow || o.secrets.keyFile != "") {
		return fail.Errorf(fail.Invalid, "--allow-secret-data and --secret-digest-key-file only apply with --release")
	}
	if err := o.secrets.validate(); err != nil {
		return err
	}
	return validateOutput(o.output)
}

func (o *receiptAuditOptions) Run() error {
	keys, err := receipts.LoadTrustedKeys(o.trustedKeys)
	if err != nil {
		return fmt.Errorf("--trusted-key: %w", err)
	}
	switch roll, err := o.rolloutPaths(); {
	case err != nil:
		return err
	case roll:
		return o.runRollout(keys)
	}
	opts := receipts.AuditOptions{TrustedKeys: keys, BaseGeneration: o.fromGeneration}
	if o.release != "" {
		opts.Release = o.releaseDigests
	}
	rep, err := receipts.Audit(o.paths, opts)
	if err != nil {
		return err
	}
	if o.output != "" {
		err = printObject(o.streams.Out, o.output, rep)
	} else {
		err = printAuditTable(o.streams.Out, rep)
	}
	if err != nil {
		return err
	}
	if !rep.OK() {
		return fail.Errorf(fail.Tamper, "receipt audit failed: %s", auditSummary(rep))
	}
	return nil
}

// releaseDigests renders the --release directory offline (no RESTMapper:
// the built-in scope table and the release's own CRDs) and verifies it
// against its lock, as preflight does.
func (o *receiptAuditOptions) releaseDigests() (receipts.ReleaseDigests, error) {
	opts, err := o.secrets.options()
	if err != nil {
		return receipts.ReleaseDigests{}, err
	}
	rel, lock, err := inventory.LoadRelease(filesys.MakeFsOnDisk(), o.release, opts)
	if err != nil {
		return receipts.ReleaseDigests{}, fmt.Errorf("--release: %w", err)
	}
	lockDigest, err := lock.Digest()
	if err != nil {
		return receipts.ReleaseDigests{}, fmt.Errorf("--release: lock digest: %w", err)
	}
	rendered, err := deploy.RenderedOf(rel)
	if err != nil {
		return receipts.ReleaseDigests{}, fmt.Errorf("--release: %w", err)
	}
	return receipts.ReleaseDigests{Version: lock.Release.Version, LockDigest: lockDigest, InventoryDigest: rel.InventoryDigest, Rendered: rendered}, nil
}

func auditSummary(rep *receipts.Report) string {
	bad := 0
	for _, row := range rep.Receipts {
		if row.Verdict != receipts.VerdictOK {
			bad++
		}
	}
	parts := []string{fmt.Sprintf("%d of %d receipts failed", bad, len(rep.Receipts))}
	if rep.Chain.Verdict != receipts.VerdictOK {
		parts = append(parts, "the chain is broken")
	}
	if rep.Release != nil && rep.Release.Verdict != receipts.VerdictOK {
		parts = append(parts, "the release does not match")
	}
	return strings.Join(parts, ", ")
}

func printAuditTable(out io.Writer, rep *receipts.Report) error {
	w := printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "FILE\tGENERATION\tTRANSITION\tVERSION\tSIGNATURE\tVERDICT\tREASONS")
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, row := range rep.Receipts {
		gen := "-"
		if row.Generation > 0 {
			gen = fmt.Sprint(row.Generation)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.File, gen, dash(row.Transition), dash(row.Version),
			row.Signature, row.Verdict, dash(strings.Join(row.Reasons, "; ")))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	c := rep.Chain
	line := fmt.Sprintf("chain: %s", c.Verdict)
	if c.ToGeneration > 0 {
		line += fmt.Sprintf(", generations %d to %d", c.FromGeneration, c.ToGeneration)
	}
	if c.Target != nil {
		line += fmt.Sprintf(", cluster %s, namespace %q", c.Target.ClusterIdentity, c.Target.Namespace)
	}
	fmt.Fprintln(out, line)
	for _, r := range c.Reasons {
		fmt.Fprintf(out, "  - %s\n", r)
	}
	for _, n := range c.Notes {
		fmt.Fprintf(out, "  note: %s\n", n)
	}
	if rel := rep.Release; rel != nil {
		fmt.Fprintf(out, "release: %s, lock %s, inventory %s", rel.Verdict, rel.Release.LockDigest, rel.Release.InventoryDigest)
		if rel.Generation > 0 {
			fmt.Fprintf(out, ", against generation %d", rel.Generation)
		}
		fmt.Fprintln(out)
		for _, r := range rel.Reasons {
			fmt.Fprintf(out, "  - %s\n", r)
		}
	}
	for _, s := range rep.StrayFiles {
		fmt.Fprintf(out, "stray: %s (temporary file of an interrupted publish; safe to delete)\n", s)
	}
	fmt.Fprintf(out, "verdict: %s\nnote: %s\n", rep.Verdict, rep.Note)
	return nil
}
