package plugin

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/fleetfile"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/plan"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/safefile"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// fleetFlags are shared by the fleet commands.
type fleetFlags struct {
	flags       *genericclioptions.ConfigFlags
	streams     genericiooptions.IOStreams
	receiptsDir string
	parallel    int
	parallelism int
	qps         float32
	burst       int
	timeout     string
	output      string
	plan        string
	signKey     string
	progress    string
	// kubeconfigDir (fleet apply --kubeconfig-dir, a pod of the fleet's
	// Job): each target's kubeconfig is DIR/<target name>, its current
	// context; the fleet file's kubeconfig and context are not used.
	kubeconfigDir string
}

// addSignKey adds --sign-key to the commands that write receipts.
func (f *fleetFlags) addSignKey(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.signKey, "sign-key", "", "`FILE` holding the Ed25519 private key (PKCS#8 PEM) to sign every receipt and the rollout receipt's attestation with")
}

func (f *fleetFlags) add(cmd *cobra.Command, withPlan bool) {
	fs := cmd.Flags()
	fs.StringVar(&f.receiptsDir, "receipts-dir", "", "`DIR` holding one receipts directory per target, named after it (default: <fleet dir>/receipts)")
	fs.IntVar(&f.parallel, "parallel", 4, "targets locked, preflighted or read at once (apply follows each wave's maxParallel)")
	fs.IntVar(&f.parallelism, "parallelism", defaultParallelism, "within one target, server-side applies, dry-runs and convergence reads in flight at once")
	fs.Float32Var(&f.qps, "qps", defaultQPS, "client-side request rate limit per target (requests per second)")
	fs.IntVar(&f.burst, "burst", defaultBurst, "client-side request burst per target above --qps")
	fs.StringVar(&f.timeout, "timeout", "5m", "bound on each target's convergence")
	fs.StringVarP(&f.output, "output", "o", "", outputUsage()+" (the result on stdout; progress stays on stderr)")
	fs.StringVar(&f.progress, "progress", "auto", "one line per target as it moves, on stderr: auto (when stderr is a terminal), always or never")
	if withPlan {
		fs.StringVar(&f.plan, "plan", "", "the plan record `FILE` fleet preflight wrote (default: <fleet dir>/plan/plan.json)")
	}
	registerOutputCompletion(cmd)
}

// options loads the fleet file and resolves the flags.
func (f *fleetFlags) options(path string) (*fleet.Options, *fleetfile.Fleet, error) {
	return f.optionsWith(func() (*fleetfile.Fleet, error) { return fleetfile.Load(path) })
}

// optionsWith resolves the flags and loads the fleet file with load.
func (f *fleetFlags) optionsWith(load func() (*fleetfile.Fleet, error)) (*fleet.Options, *fleetfile.Fleet, error) {
	if err := validateOutput(f.output); err != nil {
		return nil, nil, err
	}
	if f.parallel < 1 || f.parallel > 256 || f.parallelism < 1 || f.parallelism > 256 {
		return nil, nil, fail.Errorf(fail.Invalid, "--parallel %d, --parallelism %d: want 1 to 256 each", f.parallel, f.parallelism)
	}
	if f.qps <= 0 || f.burst < 1 {
		return nil, nil, fail.Errorf(fail.Invalid, "--qps and --burst must be positive")
	}
	timeout, err := time.ParseDuration(f.timeout)
	if err != nil || timeout <= 0 {
		return nil, nil, fail.Errorf(fail.Invalid, "--timeout %q: want a positive duration such as 5m", f.timeout)
	}
	fl, err := load()
	if err != nil {
		return nil, nil, err
	}
	progress, err := f.progressWriter()
	if err != nil {
		return nil, nil, err
	}
	o := &fleet.Options{Connect: f.connector(), ReceiptsDir: f.receiptsDir, Parallel: f.parallel, Progress: progress,
		Deploy: deploy.Options{FS: filesys.MakeFsOnDisk(), ToolVersion: version, Parallelism: f.parallelism, Timeout: timeout}}
	if f.signKey != "" {
		if o.Deploy.SignKey, err = receipts.LoadSigningKey(f.signKey); err != nil {
			return nil, nil, fail.Wrap(fail.Invalid, fmt.Errorf("--sign-key: %w", err))
		}
	}
	return o, fl, nil
}

// progressWriter is where the progress lines go: stderr when --progress
// is always, or auto and stderr is a terminal (as kubectl's own progress);
// nowhere otherwise — CI reads -o json.
func (f *fleetFlags) progressWriter() (io.Writer, error) {
	switch f.progress {
	case "always":
		return f.streams.ErrOut, nil
	case "never":
		return nil, nil
	case "auto":
		if file, ok := f.streams.ErrOut.(*os.File); ok && term.IsTerminal(int(file.Fd())) {
			return f.streams.ErrOut, nil
		}
		return nil, nil
	}
	return nil, fail.Errorf(fail.Invalid, "--progress %q: want auto, always or never", f.progress)
}

// connector opens a target through its own kubeconfig file (relative to
// the fleet file) and context, or the command's --kubeconfig and
// --context when the target names none; --as and --as-group apply to all.
func (f *fleetFlags) connector() fleet.Connector {
	return func(fl *fleetfile.Fleet, t fleetfile.Target) (deploy.Cluster, error) {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if f.flags.KubeConfig != nil && *f.flags.KubeConfig != "" {
			rules.ExplicitPath = *f.flags.KubeConfig
		}
		if t.Kubeconfig != "" {
			rules.ExplicitPath = fl.Path(t.Kubeconfig)
		}
		over := &clientcmd.ConfigOverrides{}
		if f.flags.Context != nil {
			over.CurrentContext = *f.flags.Context
		}
		if t.Context != "" {
			over.CurrentContext = t.Context
		}
		if f.kubeconfigDir != "" { // the Job's Secret: one kubeconfig per target, its own context
			rules.ExplicitPath, over.CurrentContext = filepath.Join(f.kubeconfigDir, t.Name), ""
		}
		if f.flags.Impersonate != nil {
			over.AuthInfo.Impersonate = *f.flags.Impersonate
		}
		if f.flags.ImpersonateGroup != nil {
			over.AuthInfo.ImpersonateGroups = *f.flags.ImpersonateGroup
		}
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, over).ClientConfig()
		if err != nil {
			return nil, fail.Errorf(fail.Invalid, "kubeconfig of target %s: %w", t.Name, err)
		}
		cfg.QPS, cfg.Burst, cfg.UserAgent = f.qps, f.burst, "kubectl-ql3/"+version
		cl, err := deploy.NewKubeCluster(cfg)
		if err != nil {
			return nil, fail.Errorf(fail.Invalid, "kubeconfig of target %s: %w", t.Name, err)
		}
		return cl, nil
	}
}

// planPath is --plan, or the default plan of the fleet.
func (f *fleetFlags) planPath(fl *fleetfile.Fleet) string {
	if f.plan != "" {
		return f.plan
	}
	return filepath.Join(fl.Dir, "plan", fleet.PlanFile)
}

// readPlan reads and verifies the plan record at path.
func readPlan(path string) (*plan.Plan, error) {
	data, err := safefile.ReadRegular(path, plan.MaxPlanBytes)
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "fleet plan %s: %w (run kubectl ql3 fleet preflight first)", path, err)
	}
	return plan.Parse(path, data)
}

func newCmdFleet(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Roll a release out to many clusters in waves: lock, preflight, apply, status, rollback, job (docs/fleet.md)",
		Long: `A fleet file names targets (a control namespace on a cluster, reached through
a kubeconfig and context, with its release directory) and ordered waves that
select them (docs/fleet.md). Each target moves by the ordinary ceremony through
its own Head; the driver keeps no state of its own, so a rerun resumes.`,
		Args: noArgs,
	}
	cmd.AddCommand(newCmdFleetLock(flags, streams), newCmdFleetPreflight(flags, streams, false),
		newCmdFleetApply(flags, streams), newCmdFleetStatus(flags, streams), newCmdFleetPreflight(flags, streams, true),
		newCmdFleetJob(flags, streams))
	return cmd
}

func newCmdFleetLock(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	f := &fleetFlags{flags: flags, streams: streams}
	var req fleet.LockRequest
	cmd := &cobra.Command{
		Use:     "lock FILE --version VERSION",
		Short:   "Write every target's release lock for that target's cluster",
		Example: "  kubectl ql3 fleet lock fleet.yaml --version 3.1.0",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !strictSemVer(req.Version) {
				return fail.Errorf(fail.Invalid, "--version %q is not strict SemVer 2.0.0", req.Version)
			}
			o, fl, err := f.options(args[0])
			if err != nil {
				return err
			}
			rs, err := fleet.Lock(cmd.Context(), o, fl, req)
			return printTargets(f, rs, err)
		},
	}
	cmd.Flags().StringVar(&req.Version, "version", "", "the release `VERSION` of every target (strict SemVer, required)")
	cmd.Flags().BoolVar(&req.Update, "update", false, "replace existing locks")
	_ = cmd.MarkFlagRequired("version")
	f.add(cmd, false)
	return cmd
}

func newCmdFleetPreflight(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams, rollback bool) *cobra.Command {
	f := &fleetFlags{flags: flags, streams: streams}
	var req fleet.PreflightRequest
	cmd := &cobra.Command{
		Use:     "preflight FILE [--out DIR]",
		Short:   "Preflight every target against its Head and write the plan binding all records",
		Example: "  kubectl ql3 fleet preflight fleet.yaml --out plan/",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, fl, err := f.options(args[0])
			if err != nil {
				return err
			}
			if rollback {
				return runFleetRollback(cmd.Context(), f, o, fl, req)
			}
			_, path, rs, err := fleet.Preflight(cmd.Context(), o, fl, req)
			if err == nil {
				fmt.Fprintf(streams.ErrOut, "next: kubectl ql3 fleet apply %s --plan %s\n", args[0], path)
			}
			return printTargets(f, rs, err)
		},
	}
	if rollback {
		cmd.Use, cmd.Short = "rollback FILE [--out DIR]", "Roll every target back to the release its fleet file names (the previous one): preflight, then apply wave by wave"
		cmd.Example = "  git show v3.0.0:fleet.yaml > prev/fleet.yaml   # the fleet as it was, releases included\n  kubectl ql3 fleet rollback prev/fleet.yaml"
		req.Transition = deploy.TransitionRollback
		f.addSignKey(cmd)
	} else {
		cmd.Flags().StringVar(&req.Transition, "transition", "", "every target's transition: install, upgrade or rollback (default: install where there is no Head, upgrade where there is)")
		cmd.Flags().StringVar(&req.Approval, "approval", "", "the two-person rule for every target: two-person or none (a wave gated by approval is always two-person)")
	}
	cmd.Flags().StringVar(&req.Out, "out", "", "`DIR` for plan.json and preflights/<target>.json (default: <fleet dir>/plan)")
	f.add(cmd, false)
	return cmd
}

func runFleetRollback(ctx context.Context, f *fleetFlags, o *fleet.Options, fl *fleetfile.Fleet, req fleet.PreflightRequest) error {
	p, path, rs, err := fleet.Preflight(ctx, o, fl, req)
	if err != nil {
		return printTargets(f, rs, err)
	}
	rep, err := fleet.Apply(ctx, o, fl, fleet.ApplyRequest{Plan: p, PlanDir: filepath.Dir(path)})
	return printApply(f, rep, err)
}

func newCmdFleetApply(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	f := &fleetFlags{flags: flags, streams: streams}
	one := &oneTarget{index: -1}
	vj := &viaJobFlags{}
	cmd := &cobra.Command{
		Use:   "apply FILE [--plan PLAN] [--target NAME | --wave WAVE --index I | --via-job -n MGMT_NS --image REF]",
		Short: "Apply the plan wave by wave; a rerun skips committed targets and resumes applying ones",
		Example: `  kubectl ql3 fleet apply fleet.yaml --plan plan/plan.json -o json
  kubectl ql3 fleet apply fleet.yaml --target prod-eu    # one target (a CI matrix job)
  kubectl ql3 fleet apply fleet.yaml --via-job -n ql3-fleet --image REGISTRY/kubectl-ql3:v0.1.0@sha256:DIGEST`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := vj.check(cmd, one.set(cmd)); err != nil {
				return err
			}
			if one.set(cmd) {
				return runFleetApplyOne(cmd.Context(), f, one, args[0])
			}
			if f.kubeconfigDir != "" || one.planDigest != "" {
				return fail.Errorf(fail.Invalid, "--kubeconfig-dir and --plan-digest go with --target or --wave and --index (one target)")
			}
			if vj.on {
				return runFleetApplyViaJob(cmd.Context(), f, vj, args[0])
			}
			o, fl, err := f.options(args[0])
			if err != nil {
				return err
			}
			path := f.planPath(fl)
			p, err := readPlan(path)
			if err != nil {
				return err
			}
			rep, err := fleet.Apply(cmd.Context(), o, fl, fleet.ApplyRequest{Plan: p, PlanDir: filepath.Dir(path)})
			return printApply(f, rep, err)
		},
	}
	f.add(cmd, true)
	f.addSignKey(cmd)
	one.add(cmd, f)
	vj.add(cmd)
	return cmd
}

func newCmdFleetStatus(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	f := &fleetFlags{flags: flags, streams: streams}
	cmd := &cobra.Command{
		Use:     "status FILE [--plan PLAN]",
		Short:   "Read every target's Head: exit 0 only when the whole fleet is at the plan",
		Example: "  kubectl ql3 fleet status fleet.yaml",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, fl, err := f.options(args[0])
			if err != nil {
				return err
			}
			o.Progress = io.Discard
			p, err := readPlan(f.planPath(fl))
			if err != nil {
				return err
			}
			rep, err := fleet.Status(cmd.Context(), o, fl, p)
			if rep == nil {
				return err
			}
			if f.output != "" {
				return firstErr(printObject(f.streams.Out, f.output, rep), err)
			}
			w := printers.GetNewTabWriter(f.streams.Out)
			fmt.Fprintln(w, "TARGET\tWAVE\tNAMESPACE\tSTATE\tGENERATION\tPHASE\tVERSION\tPLAN")
			for _, t := range rep.Targets {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%d %s\n", t.Name, t.Wave, t.Namespace, t.State, t.Generation, t.Phase, t.Version, t.PlanGeneration, t.PlanVersion)
			}
			return firstErr(w.Flush(), err)
		},
	}
	f.add(cmd, true)
	return cmd
}

// printTargets prints a lock or preflight's per-target results.
func printTargets(f *fleetFlags, rs []fleet.TargetResult, err error) error {
	if f.output != "" && rs != nil {
		return firstErr(printObject(f.streams.Out, f.output, map[string]any{"targets": rs}), err)
	}
	w := printers.GetNewTabWriter(f.streams.Out)
	fmt.Fprintln(w, "TARGET\tNAMESPACE\tSTATE\tPATH")
	for _, r := range rs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.Name, r.Namespace, r.State, r.Path)
	}
	return firstErr(w.Flush(), err)
}

// printApply prints a fleet apply's report.
func printApply(f *fleetFlags, rep *fleet.ApplyReport, err error) error {
	if rep == nil {
		return err
	}
	if f.output != "" {
		return firstErr(printObject(f.streams.Out, f.output, rep), err)
	}
	w := printers.GetNewTabWriter(f.streams.Out)
	fmt.Fprintln(w, "WAVE\tTARGET\tNAMESPACE\tSTATE\tGENERATION\tVERSION")
	for _, wv := range rep.Waves {
		for _, t := range wv.Targets {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\n", wv.Name, t.Name, t.Namespace, t.State, t.Generation, t.Version)
		}
	}
	return firstErr(w.Flush(), err)
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
