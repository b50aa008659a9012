package plugin

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/qinglong/kubectl-ql3/ceremony/fleet"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/fleetfile"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// oneTarget are the flags of `fleet apply` that move one target only: a
// pod of the fleet's Job (--wave, --index), a job of a CI matrix
// (--target).
type oneTarget struct {
	target     string
	wave       string
	index      int
	planDigest string
}

func (one *oneTarget) add(cmd *cobra.Command, f *fleetFlags) {
	fs := cmd.Flags()
	fs.StringVar(&one.target, "target", "", "move only the target `NAME` of the plan, then read its Head back (the exit code is its own)")
	fs.StringVar(&one.wave, "wave", "", "with --index: move only the target at that index of the wave `NAME` (a pod of the Indexed Job fleet job prints)")
	fs.IntVar(&one.index, "index", -1, "with --wave: the target's index `I` in the wave, from 0 in the plan's order (the Job's $(JOB_COMPLETION_INDEX))")
	fs.StringVar(&one.planDigest, "plan-digest", "", "refuse (exit 5) a plan whose digest is not `DIGEST` (the Job pins the plan it was printed for)")
	fs.StringVar(&f.kubeconfigDir, "kubeconfig-dir", "", "with one target: its kubeconfig is `DIR`/<target name>, with that file's current context (the Job's Secret), instead of the fleet file's")
}

// set says whether one target is asked for, and checks the flags agree.
func (one *oneTarget) set(cmd *cobra.Command) bool {
	return one.target != "" || one.wave != "" || cmd.Flags().Changed("index")
}

// runFleetApplyOne is `fleet apply FILE --target NAME` or `--wave W
// --index I`: the plan is read first (the index is the plan's), then the
// fleet file, checking on disk only that target's paths.
func runFleetApplyOne(ctx context.Context, f *fleetFlags, one *oneTarget, path string) error {
	switch {
	case one.target != "" && (one.wave != "" || one.index >= 0):
		return fail.Errorf(fail.Invalid, "--target and --wave/--index: give one target either by name or by wave and index")
	case one.target == "" && (one.wave == "" || one.index < 0):
		return fail.Errorf(fail.Invalid, "--wave and --index go together (--index from 0)")
	}
	planPath := f.plan
	if planPath == "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return fail.Errorf(fail.Invalid, "fleet file %s: %w", path, err)
		}
		planPath = filepath.Join(filepath.Dir(abs), "plan", fleet.PlanFile)
	}
	p, err := readPlan(planPath)
	if err != nil {
		return err
	}
	if one.planDigest != "" {
		if err := fleet.CheckPlanDigest(p, one.planDigest); err != nil {
			return err
		}
	}
	name := one.target
	if name == "" {
		if name, err = fleet.WaveTarget(p, one.wave, one.index); err != nil {
			return err
		}
	}
	o, fl, err := f.optionsWith(func() (*fleetfile.Fleet, error) { return fleetfile.LoadTarget(path, name, f.kubeconfigDir != "") })
	if err != nil {
		return err
	}
	r, err := fleet.ApplyOne(ctx, o, fl, fleet.ApplyRequest{Plan: p, PlanDir: filepath.Dir(planPath)}, name)
	return printTargets(f, []fleet.TargetResult{r}, err)
}

// jobFlags are `fleet job`'s own.
type jobFlags struct {
	fleetFlags
	req      fleet.JobRequest
	rbac     bool
	bindUser string
	retries  int32
}

func newCmdFleetJob(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	j := &jobFlags{fleetFlags: fleetFlags{flags: flags, streams: streams}}
	cmd := &cobra.Command{
		Use:   "job FILE --wave WAVE -n MGMT_NS --image REF [--plan PLAN] | job --rbac -n MGMT_NS [--bind-user NAME]",
		Short: "Print a wave's Indexed Job (and its ConfigMap) for a management cluster, or with --rbac the namespace's RBAC",
		Long: `Print, for kubectl apply -f - on a management cluster, the Indexed Job that runs one wave
of the plan on the Kubernetes Job controller: index i is the wave's i-th target, each pod runs
"fleet apply --wave W --index i" in the project's image with the target's kubeconfig from the
Secret <name>-kubeconfigs (one key per target, named after it; not printed: it holds
credentials), and the ConfigMap <name> holds the fleet file, the wave's releases, the plan and
the wave's preflight records (docs/fleet.md §9). With --rbac, print instead what the management
namespace needs: the pods' ServiceAccount (bound to nothing) and the driver's Role.`,
		Example: `  kubectl ql3 fleet job --rbac -n ql3-fleet --bind-user ci-bot | kubectl apply -f -
  kubectl ql3 fleet job fleet.yaml --wave prod -n ql3-fleet --image REGISTRY/kubectl-ql3:v0.1.0@sha256:DIGEST | kubectl apply -f -`,
		Args: func(cmd *cobra.Command, args []string) error {
			if j.rbac {
				return noArgs(cmd, args)
			}
			return exactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error { return j.run(args) },
	}
	fs := cmd.Flags()
	fs.StringVar(&j.req.Wave, "wave", "", "the wave `NAME` the Job runs (required)")
	fs.StringVar(&j.req.Image, "image", "", "the project's image `REF`, pinned by digest (required)")
	fs.StringVar(&j.req.Name, "name", "", "`NAME` of the Job and its ConfigMap; the Secret is NAME-kubeconfigs (default ql3-fleet-<wave>)")
	fs.StringVar(&j.req.ReceiptsClaim, "receipts-claim", fleet.DefaultReceiptsClaim, "the PersistentVolumeClaim `NAME` the pods write receipts to, one directory per target")
	fs.Int32Var(&j.retries, "backoff-limit-per-index", fleet.DefaultBackoffLimitPerIndex, "retries of one target after an unknown outcome (exit 4, or a crash): the Job's backoffLimitPerIndex, 0 to 10")
	fs.BoolVar(&j.rbac, "rbac", false, "print the management namespace's ServiceAccount and the driver's Role instead (no FILE)")
	fs.StringVar(&j.bindUser, "bind-user", "", "with --rbac: also bind the driver's Role to the user `NAME` (system:serviceaccount:NS:NAME for a ServiceAccount)")
	fs.StringVarP(&j.output, "output", "o", "yaml", outputUsage()+"; yaml is a multi-document stream, the others see a v1 List")
	fs.StringVar(&j.plan, "plan", "", "the plan record `FILE` fleet preflight wrote (default: <fleet dir>/plan/plan.json)")
	registerOutputCompletion(cmd)
	return cmd
}

func (j *jobFlags) run(args []string) error {
	if err := validateOutput(j.output); err != nil {
		return err
	}
	ns := ""
	if j.flags.Namespace != nil {
		ns = *j.flags.Namespace
	}
	if ns == "" {
		return fail.Errorf(fail.Invalid, "--namespace (-n): the management namespace the objects go in is required")
	}
	if j.rbac {
		objs, err := fleet.JobRBAC(ns, j.bindUser)
		if err != nil {
			return err
		}
		return printPrinted(j.streams, j.output, objs)
	}
	if j.bindUser != "" {
		return fail.Errorf(fail.Invalid, "--bind-user goes with --rbac")
	}
	if j.req.Wave == "" {
		return fail.Errorf(fail.Invalid, "--wave: the wave the Job runs is required")
	}
	if j.retries < 0 || j.retries > 10 {
		return fail.Errorf(fail.Invalid, "--backoff-limit-per-index %d: want 0 to 10", j.retries)
	}
	fl, err := fleetfile.Load(args[0])
	if err != nil {
		return err
	}
	path := j.planPath(fl)
	p, err := readPlan(path)
	if err != nil {
		return err
	}
	j.req.FleetPath, j.req.Plan, j.req.PlanDir, j.req.Namespace = args[0], p, filepath.Dir(path), ns
	j.req.BackoffLimitPerIndex = j.retries
	if j.retries == 0 {
		j.req.BackoffLimitPerIndex = -1 // JobRequest's 0 is the default
	}
	objs, err := fleet.Job(fl, j.req)
	if err != nil {
		return err
	}
	var keys []string
	for _, t := range objs.Targets {
		keys = append(keys, "--from-file="+t+"=KUBECONFIG_OF_"+strings.ToUpper(strings.ReplaceAll(t, "-", "_")))
	}
	fmt.Fprintf(j.streams.ErrOut, "the Job reads each target's kubeconfig (its current context, the target's deployer) from the Secret %s:\n  kubectl -n %s create secret generic %s %s\n",
		objs.SecretName, ns, objs.SecretName, strings.Join(keys, " "))
	return printPrinted(j.streams, j.output, []any{objs.ConfigMap, objs.Job})
}

// printPrinted prints typed objects as printRBAC does, without the
// fields a typed object always carries and a manifest leaves out
// (metadata.creationTimestamp: null, status: {}).
func printPrinted(streams genericiooptions.IOStreams, output string, objs []any) error {
	clean := make([]any, 0, len(objs))
	for _, o := range objs {
		u, err := toUnstructured(o)
		if err != nil {
			return err
		}
		delete(u.Object, "status")
		pruneNullTimestamps(u.Object)
		clean = append(clean, u.Object)
	}
	return printRBAC(streams.Out, output, clean)
}

// pruneNullTimestamps removes every creationTimestamp: null under m.
func pruneNullTimestamps(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			if k == "creationTimestamp" {
				delete(m, k)
			}
		case map[string]any:
			pruneNullTimestamps(v)
		}
	}
}

// viaJobFlags are `fleet apply --via-job`'s: each wave as the Job `fleet
// job` prints, on the management cluster.
type viaJobFlags struct {
	on            bool
	image         string
	receiptsClaim string
	retries       int32
	kubeconfig    string
	context       string
}

func (vj *viaJobFlags) add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.BoolVar(&vj.on, "via-job", false, "run each wave as the Indexed Job fleet job prints, in the management namespace -n, and wait on it; then read every target back (docs/fleet.md §9.4)")
	fs.StringVar(&vj.image, "image", "", "with --via-job: the project's image `REF`, pinned by digest")
	fs.StringVar(&vj.receiptsClaim, "receipts-claim", fleet.DefaultReceiptsClaim, "with --via-job: the PersistentVolumeClaim `NAME` the pods write receipts to")
	fs.Int32Var(&vj.retries, "backoff-limit-per-index", fleet.DefaultBackoffLimitPerIndex, "with --via-job: the Jobs' backoffLimitPerIndex, 0 to 10")
	fs.StringVar(&vj.kubeconfig, "job-kubeconfig", "", "with --via-job: the management cluster's kubeconfig `FILE` (default: --kubeconfig and --context)")
	fs.StringVar(&vj.context, "job-context", "", "with --via-job and --job-kubeconfig: its context `NAME` (default: its current context)")
}

// check refuses --via-job with one target, and its flags without it.
func (vj *viaJobFlags) check(cmd *cobra.Command, one bool) error {
	if vj.on && one {
		return fail.Errorf(fail.Invalid, "--via-job runs every wave; --target, --wave and --index move one target: give one or the other")
	}
	for _, name := range []string{"image", "receipts-claim", "backoff-limit-per-index", "job-kubeconfig", "job-context"} {
		if !vj.on && cmd.Flags().Changed(name) {
			return fail.Errorf(fail.Invalid, "--%s goes with --via-job", name)
		}
	}
	return nil
}

// runFleetApplyViaJob is `fleet apply FILE --via-job`.
func runFleetApplyViaJob(ctx context.Context, f *fleetFlags, vj *viaJobFlags, path string) error {
	ns := ""
	if f.flags.Namespace != nil {
		ns = *f.flags.Namespace
	}
	imageErr := fleet.CheckImage(vj.image)
	switch {
	case ns == "":
		return fail.Errorf(fail.Invalid, "--via-job: --namespace (-n), the management namespace, is required")
	case imageErr != nil:
		return fmt.Errorf("--via-job: %w", imageErr)
	case vj.retries < 0 || vj.retries > 10:
		return fail.Errorf(fail.Invalid, "--backoff-limit-per-index %d: want 0 to 10", vj.retries)
	case vj.context != "" && vj.kubeconfig == "":
		return fail.Errorf(fail.Invalid, "--job-context goes with --job-kubeconfig")
	}
	cfg, err := f.flags.ToRESTConfig()
	if vj.kubeconfig != "" {
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: vj.kubeconfig},
			&clientcmd.ConfigOverrides{CurrentContext: vj.context}).ClientConfig()
	}
	if err != nil {
		return fail.Errorf(fail.Invalid, "the management cluster's kubeconfig: %w", err)
	}
	cfg.UserAgent = "kubectl-ql3/" + version
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fail.Errorf(fail.Invalid, "the management cluster's kubeconfig: %w", err)
	}
	o, fl, err := f.options(path)
	if err != nil {
		return err
	}
	planPath := f.planPath(fl)
	p, err := readPlan(planPath)
	if err != nil {
		return err
	}
	retries := vj.retries
	if retries == 0 {
		retries = -1 // JobRequest's 0 is the default
	}
	job := fleet.JobRequest{FleetPath: path, Namespace: ns, Image: vj.image, ReceiptsClaim: vj.receiptsClaim, BackoffLimitPerIndex: retries}
	rep, err := fleet.ApplyViaJob(ctx, o, fl, fleet.ApplyRequest{Plan: p, PlanDir: filepath.Dir(planPath)}, fleet.ViaJob{Client: client, Job: job})
	return printApply(f, rep, err)
}
