package plugin

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/views"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// Client-side rate limits for the ceremony. client-go's default of 5 QPS /
// 10 burst would throttle a deploy of hundreds of objects; the API server's
// priority and fairness, and 429 Retry-After answers (honoured by
// client-go), are the real back-pressure, and --parallelism bounds the
// requests in flight. The limits sit above what one client was measured
// to reach (issue #8: about 1,100 dry-runs/s against a local API server),
// so that they never pace a deploy: at 500/1000 a 3,000-object dry-run
// would have waited for tokens. `make bench` checks that no request waited.
//
// Parallelism: 32 requests in flight gave the shortest 1,000-object
// dry-run in `make bench` runs (medians 4.40 s at 16, 3.95 s at 32, 4.28 s
// at 64 on a loaded 2-core machine); the API server is the bottleneck
// beyond that.
const (
	defaultQPS         = 2000
	defaultBurst       = 4000
	defaultParallelism = 32
)

// ceremonyFlags are shared by preflight, apply, resume and rollback.
type ceremonyFlags struct {
	parallelism int
	qps         float32
	burst       int
	timeout     time.Duration
	receiptsDir string
	signKey     string
	secrets     secretFlags
	output      string
	cpuProfile  string
	memProfile  string
	noCache     bool

	limiter *countingLimiter
}

func (f *ceremonyFlags) add(fs *pflag.FlagSet, receiptsFlags bool) {
	fs.IntVar(&f.parallelism, "parallelism", defaultParallelism, "server-side applies, dry-runs and convergence reads in flight at once within a stage")
	fs.Float32Var(&f.qps, "qps", defaultQPS, "client-side request rate limit (requests per second); the API server's priority and fairness and 429 Retry-After still apply")
	fs.IntVar(&f.burst, "burst", defaultBurst, "client-side request burst above --qps")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "bound on waiting for CRDs to be Established and objects to converge")
	f.secrets.add(fs)
	addNoCacheFlag(fs, &f.noCache)
	fs.StringVarP(&f.output, "output", "o", "", outputUsage()+" (the result on stdout; progress stays on stderr)")
	// Profiling the plugin process itself (make bench uses them); hidden.
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of this command to `FILE`")
	fs.StringVar(&f.memProfile, "memprofile", "", "write an allocation profile of this command to `FILE`")
	_ = fs.MarkHidden("cpuprofile")
	_ = fs.MarkHidden("memprofile")
	if receiptsFlags {
		fs.StringVar(&f.receiptsDir, "receipts-dir", "", "`DIR` where receipts are published (default: <release dir>/receipts)")
		fs.StringVar(&f.signKey, "sign-key", "", "`FILE` holding the Ed25519 private key (PKCS#8 PEM) to sign the receipt with")
	}
}

func (f *ceremonyFlags) validate() error {
	if f.parallelism < 1 || f.parallelism > 256 {
		return fail.Errorf(fail.Invalid, "--parallelism %d: want 1 to 256", f.parallelism)
	}
	if f.qps <= 0 || f.burst < 1 {
		return fail.Errorf(fail.Invalid, "--qps and --burst must be positive")
	}
	if f.timeout <= 0 {
		return fail.Errorf(fail.Invalid, "--timeout must be positive")
	}
	if err := f.secrets.validate(); err != nil {
		return err
	}
	return validateOutput(f.output)
}

// options resolves the flags into ceremony options with a real cluster.
func (f *ceremonyFlags) options(flags *genericclioptions.ConfigFlags, errOut io.Writer) (deploy.Options, error) {
	cfg, err := restConfig(flags)
	if err != nil {
		return deploy.Options{}, err
	}
	// One limiter for every client of the command (discovery, typed,
	// dynamic), so --qps and --burst bound the process, and so that any
	// request it delays is counted and reported (see end).
	f.limiter = &countingLimiter{RateLimiter: flowcontrol.NewTokenBucketRateLimiter(f.qps, f.burst)}
	cfg.QPS, cfg.Burst, cfg.RateLimiter = f.qps, f.burst, f.limiter
	cfg.UserAgent = "kubectl-ql3/" + version
	cl, err := deploy.NewKubeCluster(cfg)
	if err != nil {
		return deploy.Options{}, fail.Errorf(fail.Invalid, "kubeconfig: %w", err)
	}
	inv, err := f.secrets.options()
	if err != nil {
		return deploy.Options{}, err
	}
	o := deploy.Options{
		Cluster:     cl,
		FS:          filesys.MakeFsOnDisk(),
		ToolVersion: version,
		Inventory:   inv,
		Parallelism: f.parallelism,
		Timeout:     f.timeout,
		ReceiptsDir: f.receiptsDir,
		Progress:    errOut,
	}
	o.RenderCache = renderCache(f.noCache, errOut)
	if f.signKey != "" {
		var key ed25519.PrivateKey
		if key, err = receipts.LoadSigningKey(f.signKey); err != nil {
			return o, fail.Wrap(fail.Invalid, fmt.Errorf("--sign-key: %w", err))
		}
		o.SignKey = key
	}
	return o, nil
}

// begin starts the CPU profile if asked for; end stops the profiles and
// says whether the client-side rate limit delayed any request: the
// defaults are meant never to, so that only the API server's priority and
// fairness (429 with Retry-After, which client-go honours) paces a deploy.
func (f *ceremonyFlags) begin() error {
	if f.cpuProfile == "" {
		return nil
	}
	out, err := os.Create(f.cpuProfile)
	if err != nil {
		return fail.Errorf(fail.Invalid, "--cpuprofile: %w", err)
	}
	return pprof.StartCPUProfile(out)
}

func (f *ceremonyFlags) end(errOut io.Writer) {
	if f.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if f.memProfile != "" {
		if out, err := os.Create(f.memProfile); err == nil {
			runtime.GC()
			_ = pprof.Lookup("allocs").WriteTo(out, 0)
			out.Close()
		}
	}
	if l := f.limiter; l != nil && l.delayed.Load() > 0 {
		fmt.Fprintf(errOut, "client: %d request(s) waited for the client-side rate limit (%s in all, at most %s; --qps %g, --burst %d): client-side throttling, not the API server, slowed this command\n",
			l.delayed.Load(), time.Duration(l.waited.Load()).Round(time.Millisecond), time.Duration(l.longest.Load()).Round(time.Millisecond), f.qps, f.burst)
	}
}

// countingLimiter is the client-side token bucket, counting the requests
// it held back: those that found no token ready.
type countingLimiter struct {
	flowcontrol.RateLimiter
	delayed, waited, longest atomic.Int64
}

func (l *countingLimiter) Wait(ctx context.Context) error {
	if l.RateLimiter.TryAccept() {
		return nil // a token was ready: not throttled
	}
	start := time.Now()
	err := l.RateLimiter.Wait(ctx)
	d := int64(time.Since(start))
	l.delayed.Add(1)
	l.waited.Add(d)
	for m := l.longest.Load(); d > m && !l.longest.CompareAndSwap(m, d); m = l.longest.Load() {
	}
	return err
}

func (f *ceremonyFlags) print(w io.Writer, res any, human func()) error {
	if f.output != "" {
		return printObject(w, f.output, res)
	}
	human()
	return nil
}

type preflightOptions struct {
	flags     *genericclioptions.ConfigFlags
	streams   genericiooptions.IOStreams
	cf        ceremonyFlags
	dir       string
	kind      string
	expected  string
	out       string
	force     bool
	diff      bool
	supersede int64
	approval  string
	apply     bool
}

func newCmdPreflight(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &preflightOptions{flags: flags, streams: streams}
	cmd := &cobra.Command{
		Use:   "preflight DIR --transition install|upgrade|rollback|retire --expected-head TOKEN",
		Short: "Verify a release against its lock, the cluster and the Head, dry-run it, and write a preflight record",
		Long: `Preflight is read-only against the cluster (--apply then applies, below).
It verifies the release directory against its lock, reads the cluster
identity and the Head, applies the Head rules (install only onto no Head;
upgrade only to a strictly greater version
that keeps every live object; rollback only to the exact previous deployment;
retire only to a strictly greater version that drops objects and adds none),
server-side dry-runs every object, and writes the preflight record without
replacing any file. Pass the record to "kubectl ql3 apply --preflight".

A retire records, and prints, the UID and resourceVersion of each object it
retires (or "absent"), and dry-runs each delete with those preconditions;
apply then deletes exactly those objects in exactly those states
(docs/ceremony.md §11).

An upgrade or rollback whose Head is applying a generation that can never
converge (resume exits 4 every time) may supersede it: --supersede N names
that generation and --expected-head is the applying Head's token. An upgrade
must be above both the stuck and the last committed version; a rollback
returns to the last committed deployment (docs/ceremony.md §7.5).

--approval two-person turns the two-person rule on for this namespace's
Head, --approval none turns it off; without the flag the committed Head's
policy is kept. When the Head has the rule on, or this preflight turns it
on, the record names you (as the API server authenticated you) as its
proposer, and apply refuses it until another person approved it
(kubectl ql3 propose, then kubectl ql3 approve; docs/approval.md).

--apply then applies the record in the same process, exactly as
"kubectl ql3 apply --preflight" would (one process start, one render): for a
pipeline that applies what it preflighted without a review in between. It
prints what apply prints; the record is still written, for resume after a
crash. Under the two-person rule apply refuses the record until another
person approved it, and nothing is acquired.`,
		Example: `  kubectl ql3 head -n ql3-demo                # prints the expected-Head token
  kubectl ql3 preflight ./release --transition install --expected-head ql3h1-0-none --out pf.json
  kubectl ql3 preflight ./release-2.0.0 --transition upgrade --expected-head ql3h1-1-… --apply --receipts-dir ./receipts
  kubectl ql3 preflight ./release-2.0.1 --transition upgrade --supersede 4 --expected-head ql3h1-4-… --out pf.json`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.dir = args[0]
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.kind, "transition", "", "`TRANSITION`: install, upgrade, rollback or retire (required)")
	fs.StringVar(&o.expected, "expected-head", "", "the Head `TOKEN` printed by kubectl ql3 head (required)")
	fs.StringVar(&o.out, "out", "", "`FILE` to write the preflight record to (never replaced; default ql3-preflight-g<N>-<transition>-<version>.json)")
	fs.BoolVar(&o.force, "force-conflicts", false, "take over fields owned by other field managers (recorded in the command digest)")
	fs.Int64Var(&o.supersede, "supersede", 0, "supersede the applying `GENERATION` that can never converge (an upgrade or rollback; --expected-head is then that applying Head's token)")
	fs.BoolVar(&o.diff, "diff", false, "also print what the release would change, as kubectl ql3 diff does (with -o, as the result's diff member), and record the change list's digest in the record (diffDigest)")
	fs.StringVar(&o.approval, "approval", "", "the two-person rule after this transition: `POLICY` two-person or none (default: the committed Head's; no Head: none)")
	fs.BoolVar(&o.apply, "apply", false, "then apply the record in this process, as kubectl ql3 apply --preflight does (--receipts-dir and --sign-key are apply's)")
	o.cf.add(fs, true)
	for _, name := range []string{"receipts-dir", "sign-key"} {
		fs.Lookup(name).Usage += " (with --apply)"
	}
	_ = cmd.MarkFlagRequired("transition")
	_ = cmd.MarkFlagRequired("expected-head")
	_ = cmd.RegisterFlagCompletionFunc("approval", fixedCompletion(deploy.ApprovalTwoPerson, deploy.ApprovalNone))
	_ = cmd.RegisterFlagCompletionFunc("transition", fixedCompletion("install", "upgrade", "rollback", "retire"))
	registerOutputCompletion(cmd)
	return cmd
}

func (o *preflightOptions) Validate() error {
	switch o.kind {
	case deploy.TransitionInstall, deploy.TransitionUpgrade, deploy.TransitionRollback, deploy.TransitionRetire:
	default:
		return fail.Errorf(fail.Invalid, "--transition %q: want install, upgrade, rollback or retire", o.kind)
	}
	if err := validateSupersede(o.supersede, o.expected); err != nil {
		return err
	}
	if err := deploy.CheckApprovalFlag(o.approval); err != nil {
		return err
	}
	switch {
	case o.apply && o.diff:
		return fail.Errorf(fail.Invalid, "--diff is for a review before apply: run preflight --diff, then kubectl ql3 apply --preflight, or leave out --diff")
	case !o.apply && (o.cf.receiptsDir != "" || o.cf.signKey != ""):
		return fail.Errorf(fail.Invalid, "--receipts-dir and --sign-key are apply's: pass them to kubectl ql3 apply --preflight, or add --apply")
	}
	return o.cf.validate()
}

// validateSupersede checks --supersede against --expected-head, which it
// parses: the generation named is the token's, the applying Head's.
func validateSupersede(generation int64, expected string) error {
	exp, err := deploy.ParseExpectedHead(expected)
	switch {
	case err != nil:
		return err
	case generation < 0:
		return fail.Errorf(fail.Invalid, "--supersede %d: want the applying generation that kubectl ql3 head shows", generation)
	case generation != 0 && generation != exp.Generation:
		return fail.Errorf(fail.Invalid, "--supersede %d, but --expected-head names generation %d: pass the token kubectl ql3 head prints for the applying generation", generation, exp.Generation)
	}
	return nil
}

func (o *preflightOptions) Run(ctx context.Context) error {
	exp, _ := deploy.ParseExpectedHead(o.expected)
	if err := o.cf.begin(); err != nil {
		return err
	}
	defer o.cf.end(o.streams.ErrOut)
	co, err := o.cf.options(o.flags, o.streams.ErrOut)
	if err != nil {
		return err
	}
	req := deploy.PreflightRequest{
		Dir: o.dir, Transition: o.kind, Expected: exp, ForceConflicts: o.force, Out: o.out, Supersede: o.supersede,
		Approval: o.approval,
	}
	if o.apply {
		res, err := deploy.RunPreflightApply(ctx, co, req)
		if err != nil {
			return err
		}
		return o.cf.print(o.streams.Out, res, func() { printApplyResult(o.streams.Out, res) })
	}
	var res *deploy.PreflightResult
	var diff *views.DiffReport
	if o.diff {
		res, diff, err = views.PreflightWithDiff(ctx, co, req)
	} else {
		res, err = deploy.RunPreflight(ctx, co, req)
	}
	if err != nil {
		return err
	}
	if diff != nil {
		if o.cf.output != "" && o.cf.output != outputName {
			return o.cf.print(o.streams.Out, struct {
				*deploy.PreflightResult
				Diff *views.DiffReport `json:"diff"`
			}{res, diff}, nil)
		}
		if o.cf.output == "" {
			if err := printDiff(o.streams.Out, diff); err != nil {
				return err
			}
		}
	}
	return o.cf.print(o.streams.Out, res, func() {
		fmt.Fprintf(o.streams.Out, "preflight %s\n", res.Record.SelfDigest)
		for _, r := range res.Record.Retired {
			if r.UID == "" {
				fmt.Fprintf(o.streams.Out, "retire %s: absent\n", r.ID)
			} else {
				fmt.Fprintf(o.streams.Out, "retire %s: uid %s resourceVersion %s\n", r.ID, r.UID, r.ResourceVersion)
			}
		}
		if res.Record.Proposer != "" {
			fmt.Fprintf(o.streams.Out, "record: %s\nnext: kubectl ql3 propose --preflight %s (the two-person rule: another person approves it before apply)\n", res.Path, res.Path)
			return
		}
		fmt.Fprintf(o.streams.Out, "record: %s\nnext: kubectl ql3 apply --preflight %s\n", res.Path, res.Path)
	})
}

type applyOptions struct {
	flags        *genericclioptions.ConfigFlags
	streams      genericiooptions.IOStreams
	cf           ceremonyFlags
	preflight    string
	dir          string
	resume       bool
	leaveChanged bool
}

func newCmdApply(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams, resume bool) *cobra.Command {
	o := &applyOptions{flags: flags, streams: streams, resume: resume}
	cmd := &cobra.Command{
		Use:   "apply --preflight FILE [DIR]",
		Short: "Acquire the Head, server-side apply the release, converge, commit and publish the receipt",
		Long: `Apply re-verifies the release directory against the preflight record, acquires
the Head ("applying", by create or resourceVersion compare-and-swap), server-side
applies every object with the fixed field manager (Namespaces and CRDs first),
waits for convergence, commits the Head and publishes a no-replace receipt.
Running it again after a crash or a lost response is always safe: a committed
preflight is a replay that writes no workload object.`,
		Example: `  kubectl ql3 apply --preflight pf.json
  kubectl ql3 apply --preflight pf.json --parallelism 32 --timeout 10m -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.dir = args[0]
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	if resume {
		cmd.Use = "resume --preflight FILE [DIR]"
		cmd.Short = "Take over an applying Head with the same preflight and finish it"
		cmd.Long = `Resume continues a transition whose apply died (the Head is "applying" with this
preflight's command): it takes the applying intent over with a
resourceVersion-carrying update that records a new mutation id, re-applies
every object (server-side apply is idempotent), converges, commits and
publishes the receipt. It refuses a Head applying any other preflight.

For a retire it finishes the deletes still pending (objects already gone
count as done). An object changed after the preflight is never deleted:
restore it and resume, or keep it on the cluster, unmanaged, with
--leave-changed (the receipt records "left: changed").`
		cmd.Example = `  kubectl ql3 resume --preflight pf.json
  kubectl ql3 resume --preflight pf-retire.json --leave-changed`
	}
	fs := cmd.Flags()
	fs.StringVar(&o.preflight, "preflight", "", "the preflight record `FILE` written by kubectl ql3 preflight (required)")
	if resume {
		fs.BoolVar(&o.leaveChanged, "leave-changed", false, "retire: leave each retired object changed since the preflight on the cluster, unmanaged (outcome \"left: changed\"), instead of failing")
	}
	o.cf.add(fs, true)
	_ = cmd.MarkFlagRequired("preflight")
	registerOutputCompletion(cmd)
	return cmd
}

func (o *applyOptions) Validate() error { return o.cf.validate() }

func (o *applyOptions) Run(ctx context.Context) error {
	rec, err := deploy.ReadPreflight(o.preflight)
	if err != nil {
		return err
	}
	if err := o.cf.begin(); err != nil {
		return err
	}
	defer o.cf.end(o.streams.ErrOut)
	co, err := o.cf.options(o.flags, o.streams.ErrOut)
	if err != nil {
		return err
	}
	res, err := deploy.RunApply(ctx, co, deploy.ApplyRequest{Preflight: rec, Dir: o.dir, Resume: o.resume, LeaveChanged: o.leaveChanged})
	if err != nil {
		if res != nil && o.cf.output != "" {
			// A result that is also an error (superseded): scripts read
			// its outcome from -o json as well as from the exit code.
			_ = o.cf.print(o.streams.Out, res, nil)
		}
		return err
	}
	return o.cf.print(o.streams.Out, res, func() { printApplyResult(o.streams.Out, res) })
}

func printApplyResult(w io.Writer, res *deploy.ApplyResult) {
	fmt.Fprintf(w, "%s: generation %d, %s %s\nreceipt: %s (%s)\n", res.Outcome, res.Generation, res.Transition, res.Version, res.Receipt, res.ReceiptState)
	for _, r := range res.Retired {
		fmt.Fprintf(w, "retired %s: %s\n", r.ID, r.Outcome)
	}
	if res.Note != "" {
		fmt.Fprintf(w, "note: %s\n", res.Note)
	}
	fmt.Fprintf(w, "expected head for the next preflight: %s\n", res.ExpectedHead)
}

type rollbackOptions struct {
	flags     *genericclioptions.ConfigFlags
	streams   genericiooptions.IOStreams
	cf        ceremonyFlags
	dir       string
	expected  string
	out       string
	supersede int64
}

func newCmdRollback(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &rollbackOptions{flags: flags, streams: streams}
	cmd := &cobra.Command{
		Use:   "rollback DIR --expected-head TOKEN [--supersede GENERATION]",
		Short: "Roll back to the exact previous deployment (DIR is that release, e.g. from git history)",
		Long: `Rollback runs preflight with --transition rollback and then apply, in one command.
DIR must be exactly the Head's previous deployment (same version and lock
digest), and current, target and previous inventories must be identical. The
preflight record is written (never replaced) so a crash can be resumed; a
receipts directory that cannot be written is refused before it is.

With --supersede N, the Head is applying generation N, which can never
converge, and --expected-head is its token: DIR is the last committed
deployment, which the rollback restores in its place (docs/ceremony.md §7.5).`,
		Example: `  git worktree add /tmp/prev HEAD~1
  kubectl ql3 rollback /tmp/prev/release --expected-head ql3h1-2-… --receipts-dir ./release/receipts
  kubectl ql3 rollback ./release-1.0.0 --expected-head ql3h1-4-… --supersede 4   # generation 4 never converges`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.dir = args[0]
			if err := validateSupersede(o.supersede, o.expected); err != nil {
				return err
			}
			if err := o.cf.validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.expected, "expected-head", "", "the Head `TOKEN` printed by kubectl ql3 head (required)")
	fs.StringVar(&o.out, "out", "", "`FILE` to write the preflight record to (never replaced; default ql3-preflight-g<N>-rollback-<version>.json, which resume --preflight takes after a crash)")
	fs.Int64Var(&o.supersede, "supersede", 0, "supersede the applying `GENERATION` that can never converge, returning to the last committed deployment (--expected-head is then that applying Head's token)")
	o.cf.add(fs, true)
	_ = cmd.MarkFlagRequired("expected-head")
	registerOutputCompletion(cmd)
	return cmd
}

func (o *rollbackOptions) Run(ctx context.Context) error {
	exp, _ := deploy.ParseExpectedHead(o.expected)
	if err := o.cf.begin(); err != nil {
		return err
	}
	defer o.cf.end(o.streams.ErrOut)
	co, err := o.cf.options(o.flags, o.streams.ErrOut)
	if err != nil {
		return err
	}
	res, err := deploy.RunRollback(ctx, co, deploy.PreflightRequest{Dir: o.dir, Expected: exp, Out: o.out, Supersede: o.supersede})
	if err != nil {
		return err
	}
	return o.cf.print(o.streams.Out, res, func() { printApplyResult(o.streams.Out, res) })
}

func fixedCompletion(values ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}
