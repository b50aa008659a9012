package plugin

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/qinglong/kubectl-ql3/ceremony/package/intent"
	"github.com/qinglong/kubectl-ql3/ceremony/package/pointer"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// The active pointer's commands: package activate, inspect and intent.

type packagePointerOptions struct {
	flags      *genericclioptions.ConfigFlags
	streams    genericiooptions.IOStreams
	intentFile string
	stage      stageFlags
	output     string
}

// prepare reads the intent and the stage flags and resolves the clients.
func (o *packagePointerOptions) prepare() (intent.Intent, pointer.Options, error) {
	if err := validateOutput(o.output, outputJSON, outputYAML); err != nil {
		return intent.Intent{}, pointer.Options{}, err
	}
	v, err := o.stage.verifier()
	if err != nil {
		return intent.Intent{}, pointer.Options{}, err
	}
	in, err := readIntent(o.intentFile)
	if err != nil {
		return intent.Intent{}, pointer.Options{}, err
	}
	if err := intentNamespace(o.flags, in); err != nil {
		return intent.Intent{}, pointer.Options{}, err
	}
	settle := fmt.Sprintf("`kubectl ql3 package inspect --intent %s` (with the same --layout, --trusted-key and --allow-ref)", o.intentFile)
	po, err := pointerOptions(o.flags, in.Namespace, v, settle, o.streams.ErrOut)
	return in, po, err
}

func (o *packagePointerOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.intentFile, "intent", "", "activation intent `FILE` (qinglong/plugin-package-activation-intent@v1 JSON)")
	o.stage.add(cmd)
	f.StringVarP(&o.output, "output", "o", "", outputUsage(outputJSON, outputYAML))
	_ = cmd.MarkFlagRequired("intent")
	registerOutputCompletion(cmd, outputJSON, outputYAML)
}

func newCmdPackageActivate(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &packagePointerOptions{flags: flags, streams: streams}
	cmd := &cobra.Command{
		Use:   "activate --intent FILE --layout DIR --trusted-key FILE --allow-ref REF...",
		Short: "Make an activation intent the package's active pointer (compare-and-swap)",
		Long: `Write the activation intent in FILE as its package's active pointer: the
ConfigMap ql3p-… in the intent's namespace (docs/package-pointer.md).

The stage evidence is verified first (as verify-stage does) and the intent's
cluster identity must be this cluster's; then the pointer is read and
re-validated. Generation 1 is created only when the pointer is absent; a later
generation requires the pointer to hold generation N-1 with exactly the
intent's previousLockDigest, and is written by an update carrying the
resourceVersion of that read, and only that one, so a winner inserted since is
never overwritten. A pointer already holding exactly this intent is a replay
(exit 0, nothing written). After the write the pointer is read again and the
stage evidence verified again before success is printed.

Exit 3: the pointer holds another generation or intent (a stale writer, or
another activation won), or the stage does not prove the intent; nothing was
written. Exit 4: the stage cannot be read, or the write's answer was lost: the
activation may or may not have landed, nothing is guessed — settle it with
"kubectl ql3 package inspect --intent FILE". Exit 5: the pointer was changed
outside this command (left untouched). Exit 2: bad input or missing
permissions ("package rbac" prints them). No patch, list or watch is sent.`,
		Example: `  kubectl ql3 package activate --intent intent.json --layout ./stage \
    --trusted-key stage-key.pem --allow-ref registry.example.com/qinglong/packages/demo`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, po, err := o.prepare()
			if err != nil {
				return err
			}
			res, err := pointer.Activate(cmd.Context(), po, in)
			if err != nil {
				return err
			}
			if o.output != "" {
				return printObject(o.streams.Out, o.output, res)
			}
			settled := ""
			if res.Settled {
				settled = " (a conflict answer, settled by reading it back)"
			}
			w := o.streams.Out
			fmt.Fprintf(w, "configmap/%s in namespace %s: %s%s, version %s\n", res.Pointer.Name, res.Pointer.Namespace, res.Action, settled, res.Pointer.ResourceVersion)
			fmt.Fprintf(w, "active: %s, lock %s (intent %s, activated %s)\n", res.Active.Intent, res.Active.Intent.LockDigest, res.IntentDigest, res.Active.Receipt.ActivatedAt)
			return nil
		},
	}
	o.addFlags(cmd)
	return cmd
}

func newCmdPackageInspect(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &packagePointerOptions{flags: flags, streams: streams}
	cmd := &cobra.Command{
		Use:   "inspect --intent FILE --layout DIR --trusted-key FILE --allow-ref REF...",
		Short: "Report whether an activation intent is its package's active pointer (settles a lost activate)",
		Long: `Read the intent's active pointer once, re-validate it, verify the stage
evidence, and decide: the pointer holds exactly the intent → "active" (exit 0,
with its activation receipt); no pointer and the intent is generation 1 →
"not-activated" (exit 0: activating it is safe); no pointer although the intent
replaces a previous lock, or a pointer holding another generation or intent →
"conflict" (exit 3, the pointer's state still printed). A pointer changed
outside kubectl ql3 is tamper (exit 5); a stage that cannot be read is exit 4,
one that does not prove the intent exit 3. This is how an activate whose answer
was lost is settled. It never writes; it needs get on the pointer and on the
kube-system Namespace.`,
		Example: `  kubectl ql3 package inspect --intent intent.json --layout ./stage \
    --trusted-key stage-key.pem --allow-ref registry.example.com/qinglong/packages/demo -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, po, err := o.prepare()
			if err != nil {
				return err
			}
			st, err := pointer.Inspect(cmd.Context(), po, in)
			if st == nil {
				return err
			}
			if o.output != "" {
				if perr := printObject(o.streams.Out, o.output, st); perr != nil {
					return perr
				}
				return err
			}
			w := o.streams.Out
			fmt.Fprintf(w, "configmap/%s in namespace %s: %s\n", st.Pointer.Name, st.Pointer.Namespace, st.State)
			if a := st.Active; a != nil {
				fmt.Fprintf(w, "pointer holds: %s, lock %s (intent %s, activated %s), version %s\n", a.Intent, a.Intent.LockDigest, a.Receipt.IntentDigest, a.Receipt.ActivatedAt, st.Pointer.ResourceVersion)
			}
			return err
		},
	}
	o.addFlags(cmd)
	return cmd
}

type packageIntentOptions struct {
	flags     *genericclioptions.ConfigFlags
	streams   genericiooptions.IOStreams
	stage     stageFlags
	lockFile  string
	project   string
	pkg       string
	stageRepo string
}

func newCmdPackageIntent(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &packageIntentOptions{flags: flags, streams: streams}
	cmd := &cobra.Command{
		Use:   "intent --lock FILE --project ID --package ID -n NAMESPACE --layout DIR --trusted-key FILE --allow-ref REF...",
		Short: "Build the next activation intent from a staged OCI layout, the package lock and the pointer on the cluster",
		Long: `Print (on standard output) the activation intent that activates the package
lock in --lock, staged in the OCI layout --layout, as the next generation of
--package in --project, in the namespace (-n, or the kubeconfig's) of this
cluster — so an intent is never written by hand.

The stage is the layout's package manifest whose lock layer has the lock
file's digest (its stage reference is --stage-repo, or the one --allow-ref
NAME, @ the manifest digest); its evidence is verified as verify-stage does.
The pointer is read and re-validated: absent → generation 1 with
previousLockDigest null; present → its generation + 1, previousLockDigest its
lock. A stage already active prints the active intent itself (activate then
replays it). It never writes; it needs get on the pointer and on the
kube-system Namespace.`,
		Example: `  kubectl ql3 package intent --lock package-lock.json --project demo --package weather-tools -n qinglong \
    --layout ./stage --trusted-key stage-key.pem --allow-ref registry.example.com/qinglong/packages/demo > intent.json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.Run(cmd.Context()) },
	}
	f := cmd.Flags()
	f.StringVar(&o.lockFile, "lock", "", "the package lock `FILE` to activate (its bytes are the stage's lock layer)")
	f.StringVar(&o.project, "project", "", "the project `ID`")
	f.StringVar(&o.pkg, "package", "", "the package `ID`")
	f.StringVar(&o.stageRepo, "stage-repo", "", "the stage's repository `NAME` (default: the one --allow-ref's NAME)")
	o.stage.add(cmd)
	for _, name := range []string{"lock", "project", "package"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

func (o *packageIntentOptions) Run(ctx context.Context) error {
	v, err := o.stage.verifier()
	if err != nil {
		return err
	}
	req, err := o.request()
	if err != nil {
		return err
	}
	po, err := pointerOptions(o.flags, req.Namespace, v, "", o.streams.ErrOut)
	if err != nil {
		return err
	}
	p, err := pointer.Propose(ctx, po, v, req)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(p.Intent, "", "  ")
	if err != nil {
		return err
	}
	if _, err := o.streams.Out.Write(append(data, '\n')); err != nil {
		return err
	}
	in, cur := p.Intent, p.Current
	switch {
	case cur == nil:
		fmt.Fprintf(o.streams.ErrOut, "intent: generation 1 of %s (no active pointer %s yet)\n", in, p.Naming.Name)
	case pointer.Same(cur.Intent, in):
		fmt.Fprintf(o.streams.ErrOut, "intent: this stage is already active as %s: this is the active intent (activate replays it)\n", in)
	default:
		fmt.Fprintf(o.streams.ErrOut, "intent: %s, replacing lock %s (generation %d)\n", in, cur.Intent.LockDigest, cur.Intent.Generation)
	}
	return nil
}

// request checks the flags and reads the lock.
func (o *packageIntentOptions) request() (pointer.ProposeRequest, error) {
	repo := o.stageRepo
	if repo == "" {
		if len(o.stage.allowRefs) != 1 {
			return pointer.ProposeRequest{}, fail.Errorf(fail.Invalid, "--stage-repo: give the stage's repository NAME (there is not exactly one --allow-ref to take it from)")
		}
		repo = o.stage.allowRefs[0]
		if name, _, err := intent.SplitReference(repo); err == nil {
			repo = name
		}
	}
	if err := intent.CheckName("--stage-repo", repo); err != nil {
		return pointer.ProposeRequest{}, err
	}
	for _, f := range []struct{ flag, v string }{{"--project", o.project}, {"--package", o.pkg}} {
		if err := intent.CheckID(f.flag, f.v); err != nil {
			return pointer.ProposeRequest{}, err
		}
	}
	ns, err := namespace(o.flags)
	if err != nil {
		return pointer.ProposeRequest{}, err
	}
	if err := intent.CheckID("-n", ns); err != nil {
		return pointer.ProposeRequest{}, err
	}
	lock, err := readBounded(o.lockFile, 16<<20)
	if err != nil {
		return pointer.ProposeRequest{}, fail.Errorf(fail.Invalid, "--lock %s: %w", o.lockFile, err)
	}
	return pointer.ProposeRequest{Namespace: ns, ProjectID: o.project, PackageID: o.pkg, Lock: lock,
		LockName: "--lock " + o.lockFile, StageRepo: repo}, nil
}
