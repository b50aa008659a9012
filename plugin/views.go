package plugin

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/views"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// errChanges is diff --exit-code's "there are changes": exit 1, as kubectl
// diff and diff(1). Every failure of diff is classed (exit 2 or more, see
// diffFailure), so 1 always means differences.
var errChanges = fail.Errorf(fail.Other, "diff: the release would change the cluster (--exit-code)")

// diffFailure classes a failure of diff that fits no class as unavailable
// (4): diff is read-only, the change list could not be decided, and a
// rerun is safe. Exit 1 stays reserved for errChanges.
func diffFailure(err error) error {
	if err != nil && err != errChanges && fail.ClassOf(err) == fail.Other {
		return fail.Wrap(fail.Unavailable, err)
	}
	return err
}

type diffOptions struct {
	flags    *genericclioptions.ConfigFlags
	streams  genericiooptions.IOStreams
	cf       ceremonyFlags
	dir      string
	force    bool
	exitCode bool
}

func newCmdDiff(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &diffOptions{flags: flags, streams: streams}
	cmd := &cobra.Command{
		Use:   "diff DIR",
		Short: "Show what applying a release would create or change (read-only: GET and server-side dry-run)",
		Long: `Diff verifies the release directory against its lock and the cluster identity,
then, for every object, GETs the live object and makes the same server-side apply
dry-run as preflight. Each object is created, changed or unchanged; a changed
one is shown as a unified diff of the live object and the dry-run result, with
what the API server populates removed (managedFields, resourceVersion,
generation, creationTimestamp, uid, status, the last-applied annotation).
Secret values are never shown: a changed key reads "(value changed)".
When the namespace has a Head, the objects it deploys that the release no
longer contains are listed as "would be retired", with the UID and
resourceVersion a retire's preflight would record. Nothing is written.
Exit 0, or with --exit-code 1 when anything would be created, changed or
retired; a failure is always 2 or more (as kubectl diff).`,
		Example: `  kubectl ql3 diff ./release
  kubectl ql3 diff ./release -o json     # the structured change list, for CI
  kubectl ql3 diff ./release --exit-code # 0: no change, 1: changes, >1: error
  kubectl ql3 diff ./release -o name     # the objects that would be created or changed`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.dir = args[0]
			if err := o.cf.validate(); err != nil {
				return err
			}
			return diffFailure(o.Run(cmd.Context()))
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&o.force, "force-conflicts", false, "dry-run as preflight --force-conflicts would apply")
	fs.BoolVar(&o.exitCode, "exit-code", false, "exit 1 when the release would create, change or retire an object, 0 when not (a failure is always 2 or more)")
	o.cf.add(fs, false)
	registerOutputCompletion(cmd)
	return cmd
}

func (o *diffOptions) Run(ctx context.Context) error {
	if err := o.cf.begin(); err != nil {
		return err
	}
	defer o.cf.end(o.streams.ErrOut)
	co, err := o.cf.options(o.flags, o.streams.ErrOut)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return fail.Wrap(fail.Invalid, err)
	}
	rep, err := views.DiffRelease(ctx, co.Cluster, filesys.MakeFsOnDisk(), dir, co.Inventory, co.RenderCache, o.force, co.Parallelism)
	if err != nil {
		return err
	}
	defer rep.Close()
	if co.RenderCache != nil {
		fmt.Fprintf(o.streams.ErrOut, "render: %s, %d objects\n", rep.Render, len(rep.Objects))
	}
	if err := o.print(rep); err != nil {
		return err
	}
	if o.exitCode && rep.HasChanges() {
		return errChanges
	}
	return nil
}

// print writes the report as -o asks: the texts of a spooled report are
// read back one at a time for the human output and -o json, all at once
// for -o yaml and templates.
func (o *diffOptions) print(rep *views.DiffReport) error {
	switch o.cf.output {
	case outputName:
		// the objects that would be created, changed or retired.
		return printIdentityNames(o.streams.Out, rep.Changing())
	case "":
		return printDiff(o.streams.Out, rep)
	case outputJSON:
		return rep.WriteJSON(o.streams.Out)
	}
	if err := rep.Fill(); err != nil {
		return err
	}
	return printObject(o.streams.Out, o.cf.output, rep)
}

// printDiff is diff's human output: one line per object, then the diffs.
func printDiff(w io.Writer, rep *views.DiffReport) error {
	for _, ch := range rep.Objects {
		note := ""
		if ch.Note != "" {
			note = " (" + ch.Note + ")"
		}
		fmt.Fprintf(w, "%-9s %s%s\n", ch.Change, ch.Object, note)
	}
	for _, r := range rep.Retire {
		if r.UID == "" {
			fmt.Fprintf(w, "would be retired %s (already absent)\n", r.Object)
		} else {
			fmt.Fprintf(w, "would be retired %s (uid %s resourceVersion %s)\n", r.Object, r.UID, r.ResourceVersion)
		}
	}
	err := rep.Each(func(ch views.ObjectChange) error {
		// As kubectl diff: a created object's body too (every line "+").
		if ch.Change != views.Unchanged && ch.Diff != "" {
			fmt.Fprint(w, "\n", ch.Diff)
		}
		return nil
	})
	if err != nil {
		return err
	}
	retire := ""
	if len(rep.Retire) > 0 {
		retire = fmt.Sprintf(", %d would be retired (only kubectl ql3 preflight --transition retire can apply this release)", len(rep.Retire))
	}
	_, err = fmt.Fprintf(w, "\n%s %s: %d created, %d changed, %d unchanged%s (diff %s)\n", rep.Namespace, rep.Version, rep.Created, rep.Changed, rep.Unchanged, retire, rep.Digest)
	return err
}

type statusOptions struct {
	flags    *genericclioptions.ConfigFlags
	streams  genericiooptions.IOStreams
	release  string
	secrets  secretFlags
	output   string
	watch    bool
	interval time.Duration
	timeout  time.Duration
}

func newCmdStatus(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &statusOptions{flags: flags, streams: streams}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Compare the cluster with the committed Head: missing, drifted and not-Current objects (read-only)",
		Long: `Status reads the Head of the namespace (-n) and GETs every object of its
inventory (no LIST): each is in-sync, missing (deleted by someone; never
recreated here), drifted (another field manager now owns fields the deployer
applied, from managedFields; with --release, also every value that is not
the release's, whoever wrote it), co-owned (another field manager owns fields
the deployer owns too: the next preflight conflicts on each one its release
changes) or not-current (kstatus). With --release every present object is
dry-run as diff does (server-side apply, dryRun=All, nothing written) and
its values compared with the live object's. Without --release only
managedFields are read, and a field manager is a name any writer may send:
a change written under the deployer's name (kubectl-ql3) or the Head's
(kubectl-ql3-head) looks like the deployer's own, and a removed field
leaves no trace; the report says so and what to run. A Head left applying
is shown with its mutation id, since when, and what resume would do.
Exit 0 when in sync and Current; 3 when an object is missing, drifted or
co-owned or the Head is applying; 4 when objects are only not Current yet; 5 for a
tampered Head; 2 when there is no Head or --release is not the
Head's release. --watch reads again until everything
is in sync and Current, or --timeout passes.`,
		Example: `  kubectl ql3 status -n ql3-demo
  kubectl ql3 status -n ql3-demo --release ./release   # values compared with the release, whoever wrote them
  kubectl ql3 status -n ql3-demo -o json
  kubectl ql3 status -n ql3-demo --watch --timeout 10m   # until in sync and Current`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateOutput(o.output, outputJSON, outputYAML); err != nil {
				return err
			}
			if o.interval <= 0 || o.timeout <= 0 {
				return fail.Errorf(fail.Invalid, "--interval and --timeout must be positive")
			}
			if o.release == "" && (o.secrets.allow || o.secrets.keyFile != "") {
				return fail.Errorf(fail.Invalid, "--allow-secret-data and --secret-digest-key-file only apply with --release")
			}
			if err := o.secrets.validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&o.release, "release", "", "release directory `DIR` the Head deployed (its lock must be the Head's): render it, verify it against its lock, dry-run each object as diff does and report every live value that is not the release's, whoever wrote it")
	o.secrets.add(cmd.Flags())
	cmd.Flags().StringVarP(&o.output, "output", "o", "", outputUsage(outputJSON, outputYAML))
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "read again every --interval, printing each report that differs from the last, until everything is in sync and Current (exit 0) or --timeout passes (the last report's exit code)")
	cmd.Flags().DurationVar(&o.interval, "interval", 2*time.Second, "pause between reads with --watch")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long --watch waits")
	registerOutputCompletion(cmd, outputJSON, outputYAML)
	return cmd
}

func (o *statusOptions) Run(ctx context.Context) error {
	ns, err := namespace(o.flags)
	if err != nil {
		return err
	}
	cl, err := viewCluster(o.flags)
	if err != nil {
		return err
	}
	applied, err := o.applied(cl)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(o.timeout)
	var last []byte
	for {
		rep, err := views.Status(ctx, cl, ns, defaultParallelism, applied)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if o.output != "" {
			err = printObject(&buf, o.output, rep)
		} else {
			printStatus(&buf, rep)
		}
		if err != nil {
			return err
		}
		if !bytes.Equal(buf.Bytes(), last) {
			if last != nil && o.output == "" {
				fmt.Fprintln(o.streams.Out)
			}
			if _, err := o.streams.Out.Write(buf.Bytes()); err != nil {
				return err
			}
			last = buf.Bytes()
		}
		if err := rep.Err(); err == nil || !o.watch || fail.Is(err, fail.Tamper) || time.Now().Add(o.interval).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return rep.Err()
		case <-time.After(o.interval):
		}
	}
}

// applied renders the --release directory (with the cluster's RESTMapper,
// as preflight does) and verifies it against its lock; nil without
// --release.
func (o *statusOptions) applied(cl deploy.Cluster) (*views.Applied, error) {
	if o.release == "" {
		return nil, nil
	}
	opts, err := o.secrets.options()
	if err != nil {
		return nil, err
	}
	opts.Mapper = cl.Mapper()
	rel, lock, err := inventory.LoadRelease(filesys.MakeFsOnDisk(), o.release, opts)
	if err != nil {
		return nil, fmt.Errorf("--release: %w", err)
	}
	digest, err := lock.Digest()
	if err != nil {
		return nil, fmt.Errorf("--release: lock digest: %w", err)
	}
	return &views.Applied{LockDigest: digest, Objects: rel.Objects}, nil
}

func printStatus(w io.Writer, rep *views.StatusReport) {
	fmt.Fprintf(w, "Namespace:   %s\nHead:        generation %d (%s), %s %s, field manager %s\n", rep.Namespace, rep.Generation, rep.Phase, rep.Transition, rep.Version, rep.FieldManager)
	if a := rep.Applying; a != nil {
		fmt.Fprintf(w, "Applying:    mutation %s since %s\nResume:      %s\n", a.MutationID, a.Since, a.Resume)
	}
	printApproval(w, rep)
	fmt.Fprintf(w, "Objects:     %d: %d missing, %d drifted, %d co-owned, %d not Current\n", len(rep.Objects), rep.Missing, rep.Drifted, rep.CoOwned, rep.NotCurrent)
	if rep.ValuesCompared {
		fmt.Fprintf(w, "Release:     compared: every value that is not the release's is drift, whoever wrote it\n\n")
	} else {
		fmt.Fprintf(w, "Release:     not compared: %s\n\n", strings.TrimPrefix(rep.NotSeen, "values not compared: "))
	}
	for _, s := range rep.Objects {
		fmt.Fprintf(w, "%-11s %-11s %s\n", s.State, s.Status, s.Object)
		for _, d := range s.Drift {
			fmt.Fprintf(w, "            %s now owned by %q (%s)\n", d.Field, d.Manager, fieldHow(d))
		}
		for _, d := range s.CoOwned {
			fmt.Fprintf(w, "            %s also owned by %q (%s): a release that changes it conflicts\n", d.Field, d.Manager, fieldHow(d))
		}
		for _, f := range s.Removed {
			fmt.Fprintf(w, "            %s removed (the release sets it)\n", f)
		}
		for _, f := range s.Changed {
			fmt.Fprintf(w, "            %s differs from the release (whoever wrote it)\n", f)
		}
		if s.Message != "" && (s.State == views.StateMissing || s.Status != "Current") {
			fmt.Fprintf(w, "            %s\n", s.Message)
		}
	}
}

// printApproval prints the two-person rule's lines of a status report and
// the evidence of a Head moved outside the tool.
func printApproval(w io.Writer, rep *views.StatusReport) {
	if a := rep.Approval; a != nil {
		line := "two-person rule off after this generation"
		if a.Policy == deploy.ApprovalTwoPerson {
			line = "two-person rule on after this generation"
		}
		if ap := a.Applied; ap != nil {
			line += fmt.Sprintf("; generation %d proposed by %s, approved by %s (approval uid %s)", rep.Generation, ap.Proposer, ap.Approver, ap.UID)
		}
		fmt.Fprintf(w, "Approval:    %s\n", line)
		if o := a.Object; o != nil && o.MatchesHead {
			who := o.Decision
			if o.Decision != record.Pending {
				who += " by " + o.Approver
			}
			fmt.Fprintf(w, "Next:        preflight %s proposed by %s against this Head: %s\n", o.PreflightDigest, o.Proposer, who)
		}
	}
	for _, b := range rep.Bypass {
		fmt.Fprintf(w, "BYPASS:      %s\n", b)
	}
}

// fieldHow is how a manager came to own a field: "Update/scale 2026-…".
func fieldHow(d views.FieldDrift) string {
	s := d.Operation
	if d.Subresource != "" {
		s += "/" + d.Subresource
	}
	if d.Time != "" {
		s += " " + d.Time
	}
	return s
}

type historyOptions struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	output  string
	dir     string
	online  bool
}

func newCmdHistory(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &historyOptions{flags: flags, streams: streams}
	cmd := &cobra.Command{
		Use:   "history DIR",
		Short: "List the deployments recorded in a receipts directory, the chain verified first",
		Long: `History audits the receipts directory DIR as "kubectl ql3 receipt audit" does
(offline; a broken chain is reported, exit 5) and lists each generation:
transition, version, when (the receipt file's time), tool version, inventory
size, objects added and retired against the previous generation, and the
signature's key id. With -n NS it also reads that namespace's Head: the Head's
generation is marked, and receipts the Head has passed but DIR lacks are
flagged (exit 5).`,
		Example: `  kubectl ql3 history ./release/receipts
  kubectl ql3 history ./release/receipts -n ql3-demo -o yaml`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.dir = args[0]
			o.online = cmd.Flag("namespace") != nil && cmd.Flag("namespace").Changed
			if err := validateOutput(o.output, outputJSON, outputYAML); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", outputUsage(outputJSON, outputYAML))
	registerOutputCompletion(cmd, outputJSON, outputYAML)
	return cmd
}

func (o *historyOptions) Run(ctx context.Context) error {
	rep, err := o.history(ctx)
	if err != nil {
		return err
	}
	if o.output != "" {
		err = printObject(o.streams.Out, o.output, rep)
	} else {
		printHistory(o.streams.Out, rep)
	}
	if err != nil {
		return err
	}
	return rep.Err()
}

// history audits the receipts offline, or with -n against the Head.
func (o *historyOptions) history(ctx context.Context) (*views.HistoryReport, error) {
	if !o.online {
		return views.History(o.dir, nil, "")
	}
	ns, err := namespace(o.flags)
	if err != nil {
		return nil, err
	}
	cl, err := viewCluster(o.flags)
	if err != nil {
		return nil, err
	}
	return views.HistoryAtHead(ctx, cl, o.dir, ns)
}

func printHistory(w io.Writer, rep *views.HistoryReport) {
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, "GEN\tTRANSITION\tVERSION\tWHEN\tTOOL\tOBJECTS\tADDED\tRETIRED\tSIGNED BY\tPROPOSED BY\tAPPROVED BY\tVERDICT\t")
	dash := func(s string) string { return cmp.Or(s, "-") }
	for _, e := range rep.Entries {
		added, retired := "?", "?"
		if e.PreviousKnown {
			added, retired = fmt.Sprint(len(e.Added)), fmt.Sprint(len(e.Retired))
		}
		key := "-"
		if e.SignatureKey != "" {
			key = shortDigest(e.SignatureKey) + " (" + e.Signature + ")"
		}
		gen, objects := "-", "-"
		if e.Generation > 0 {
			gen = fmt.Sprint(e.Generation)
		}
		if e.ToolVersion != "" {
			objects = fmt.Sprint(e.Inventory)
		}
		if e.AtHead {
			gen += " *"
		}
		verdict := e.Verdict
		if e.Superseded != nil {
			added, retired, verdict = "-", "-", fmt.Sprintf("superseded by %d", e.SupersededBy)
		}
		approver := dash(e.Approver)
		if e.Unapproved {
			approver = "NONE (rule on)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", gen, dash(e.Transition), dash(e.Version), dash(e.When), dash(e.ToolVersion), objects, added, retired, key, dash(e.Proposer), approver, verdict)
	}
	_ = tw.Flush()
	for _, e := range rep.Entries {
		switch s := e.Superseded; {
		case s != nil:
			fmt.Fprintf(w, "generation %d (%s %s, preflight %s, mutation %s) never committed: superseded by generation %d at %s\n",
				s.Generation, s.Kind, s.Version, s.PreflightDigest, s.MutationID, e.SupersededBy, s.At)
		case e.Verdict != receipts.VerdictOK:
			fmt.Fprintf(w, "%s: %s: %s\n", filepath.Base(e.File), e.Verdict, strings.Join(e.Reasons, "; "))
		}
	}
	fmt.Fprintf(w, "chain: %s\n", rep.Chain.Verdict)
	for _, r := range rep.Chain.Reasons {
		fmt.Fprintf(w, "  - %s\n", r)
	}
	if h := rep.Head; h != nil {
		mark := "marked *"
		if !h.Marked {
			mark = "no receipt here is the Head's"
		}
		fmt.Fprintf(w, "head: %s at generation %d (%s), %s\n", h.Namespace, h.Generation, h.Phase, mark)
	}
}

// shortDigest is "sha256:" and the first 12 hex digits.
func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}

// viewCluster is the read-only views' cluster client, with the ceremony's
// client-side limits: status GETs every object of the inventory, which
// client-go's default 5 QPS would throttle.
func viewCluster(flags *genericclioptions.ConfigFlags) (deploy.Cluster, error) {
	cfg, err := restConfig(flags)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst, cfg.UserAgent = defaultQPS, defaultBurst, "kubectl-ql3/"+version
	cl, err := deploy.NewKubeCluster(cfg)
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "kubeconfig: %w", err)
	}
	return cl, nil
}
