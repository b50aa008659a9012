package plugin

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/worker"
	auditworker "github.com/qinglong/kubectl-ql3/ceremony/worker/audit"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
	"github.com/qinglong/kubectl-ql3/internal/crashpoint"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/safefile"
)

// workerRBACHint ends a missing-permission error of the worker commands.
const workerRBACHint = "`kubectl ql3 worker rbac -n NAMESPACE --deployment NAME --stage-namespace NS` prints the least privilege"

func newCmdWorker(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Roll a Worker credential: stage, publish, discard-stage; audit and rbac",
		Long: `Publish a new Worker credential (ADR-0239, docs/worker.md): "stage" puts the
token in an immutable stage Secret, "publish" writes it into the credential
Secret ` + delivery.SecretName + ` and stamps the Worker Deployment's PodTemplate
with five annotations, so the single-replica Recreate Worker restarts with it;
"discard-stage" deletes a stage once its delivery is published or abandoned.
"audit" checks a Worker release (or the live objects), "rbac" prints the least
privilege. The token is read from a file or stdin only and never printed.`,
		Args: noArgs,
	}
	cmd.AddCommand(newCmdWorkerStage(flags, streams), newCmdWorkerPublish(flags, streams), newCmdWorkerDiscard(flags, streams),
		newCmdWorkerAudit(flags, streams), newCmdWorkerRBAC(flags, streams))
	return cmd
}

// workerTarget holds the flags every cluster worker command shares.
type workerTarget struct {
	flags   *genericclioptions.ConfigFlags
	stageNS string
	output  string
	streams genericiooptions.IOStreams
}

// addFlags adds --stage-namespace (required) and -o json|yaml.
func (t *workerTarget) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&t.stageNS, "stage-namespace", "", "the `NAMESPACE` of the stage Secrets, holding nothing else, never the Worker's (required)")
	f.StringVarP(&t.output, "output", "o", "", outputUsage(outputJSON, outputYAML))
	registerOutputCompletion(cmd, outputJSON, outputYAML)
}

// forDelivery checks -o, reads the delivery file and resolves the clients
// for the delivery's namespace.
func (t *workerTarget) forDelivery(file string) (*delivery.Delivery, worker.Options, error) {
	if err := validateOutput(t.output, outputJSON, outputYAML); err != nil {
		return nil, worker.Options{}, err
	}
	d, err := readDelivery(file)
	if err != nil {
		return nil, worker.Options{}, err
	}
	opts, _, err := t.options(d.Target.Namespace)
	return d, opts, err
}

// print writes res with -o, or as text.
func (t *workerTarget) print(res any, text func(io.Writer) error) error {
	if t.output != "" {
		return printObject(t.streams.Out, t.output, res)
	}
	return text(t.streams.Out)
}

// options resolves the clients for namespace ns (the delivery's; -n, when
// given, must agree).
func (t *workerTarget) options(ns string) (worker.Options, *kubernetes.Clientset, error) {
	if t.flags.Namespace != nil && *t.flags.Namespace != "" && *t.flags.Namespace != ns {
		return worker.Options{}, nil, fail.Errorf(fail.Invalid, "-n %q: the delivery targets namespace %q", *t.flags.Namespace, ns)
	}
	cfg, err := restConfig(t.flags)
	if err != nil {
		return worker.Options{}, nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return worker.Options{}, nil, fail.Errorf(fail.Invalid, "kubeconfig: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return worker.Options{}, nil, fail.Errorf(fail.Invalid, "kubeconfig: %w", err)
	}
	stageNS := t.stageNS
	if err := worker.CheckStageNamespace(ns, stageNS); err != nil {
		return worker.Options{}, nil, err
	}
	return worker.Options{
		Namespace: ns, Secrets: cs.CoreV1().Secrets(ns), Deployments: cs.AppsV1().Deployments(ns),
		DeploymentObjects: dyn.Resource(appsv1.SchemeGroupVersion.WithResource("deployments")).Namespace(ns),
		ReplicaSets:       cs.AppsV1().ReplicaSets(ns), Pods: cs.CoreV1().Pods(ns),
		StageNamespace: stageNS, Stages: cs.CoreV1().Secrets(stageNS),
		ClusterIdentity: func(ctx context.Context) (string, error) {
			return deploy.ReadClusterIdentity(ctx, deploy.NewIdentityReader(cs))
		},
		Review: access.NewReview(access.NewReviewer(cs)), Hint: workerRBACHint,
		Say:   func(format string, args ...any) { fmt.Fprintf(t.streams.ErrOut, format+"\n", args...) },
		Crash: crashpoint.At,
	}, cs, nil
}

func readDelivery(path string) (*delivery.Delivery, error) {
	if path == "" {
		return nil, fail.Errorf(fail.Invalid, "--delivery: give the delivery `FILE`")
	}
	data, err := readLimited(path, "--delivery", delivery.MaxFileBytes)
	if err != nil {
		return nil, err
	}
	d, err := delivery.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("--delivery %s: %w", path, err)
	}
	return d, nil
}

// readLimited reads path ("-": stdin is not allowed here), a regular file
// of up to max bytes (safefile.ReadRegular: a named pipe is refused, never
// waited on).
func readLimited(path, flag string, max int) ([]byte, error) {
	data, err := safefile.ReadRegular(path, int64(max))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return data, nil
}

// readToken reads the token from path, a regular file (safefile.OpenRegular:
// a named pipe is refused, never waited on; the token is piped through
// stdin with -), or stdin for "-": at most delivery.MaxTokenBytes+3 bytes,
// one final newline dropped, then delivery.CheckToken. Errors never show a
// byte of it.
func readToken(path string, stdin io.Reader) ([]byte, error) {
	var r io.Reader = stdin
	if path == "" {
		return nil, fail.Errorf(fail.Invalid, "--token-file: give the token's `FILE`, or - for stdin")
	}
	if path != "-" {
		f, err := safefile.OpenRegular(path)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, delivery.MaxTokenBytes+3))
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "--token-file: %w", err)
	}
	tok := bytes.Clone(delivery.TrimToken(data))
	clear(data)
	if err := delivery.CheckToken(tok); err != nil {
		clear(tok)
		return nil, fmt.Errorf("--token-file: %w", err)
	}
	return tok, nil
}

// readTokenDigestKey reads the token digest key (readKeyFile).
func readTokenDigestKey(path string) ([]byte, error) {
	if path == "" {
		return nil, fail.Errorf(fail.Invalid, "--token-digest-key-file: give the `FILE` holding the key of the token digest (at least %d bytes)", delivery.MinKeyBytes)
	}
	return readKeyFile("--token-digest-key-file", path, delivery.MinKeyBytes)
}

type workerStageOptions struct {
	target       workerTarget
	file, tokens string
}

func newCmdWorkerStage(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &workerStageOptions{target: workerTarget{flags: flags, streams: streams}}
	cmd := &cobra.Command{
		Use:   "stage --delivery FILE --token-file FILE|- --stage-namespace NS",
		Short: "Put a delivery's token in an immutable stage Secret",
		Long: `Create the immutable stage Secret ` + delivery.StagePrefix + `DELIVERY_ID holding the token read
from --token-file (or stdin with -), bound to the delivery file by its digest
and recording the Worker Deployment (namespace/name and UID) it is for, so
that publish — and any rerun after a crash — never needs the token again.
--stage-namespace is required and must not be the Worker's namespace: stage
Secrets hold tokens and never sit next to ` + delivery.IdentitySecret + `.
The same delivery with the same token is a replay (exit 0); another token or
another delivery file under that id is a conflict (exit 3). At most --stage-cap
live stage Secrets may exist in the stage namespace (counted by label; exit 3
beyond). The token is never printed, logged or put in an argument.`,
		Example: `  kubectl ql3 worker stage --delivery d-0002.yaml --token-file - --stage-namespace qinglong-stages < token`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, opts, err := o.target.forDelivery(o.file)
			if err != nil {
				return err
			}
			tok, err := readToken(o.tokens, cmd.InOrStdin())
			if err != nil {
				return err
			}
			defer clear(tok)
			res, err := worker.Stage(cmd.Context(), opts, d, tok)
			if err != nil {
				return err
			}
			return o.target.print(res, func(out io.Writer) error {
				_, err := fmt.Fprintf(out, "secret/%s in namespace %s: %s (delivery %s)\n", res.Name, res.Namespace, res.Action, res.DeliveryID)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.file, "delivery", "", "the delivery `FILE` (JSON or YAML)")
	f.StringVar(&o.tokens, "token-file", "", "the `FILE` holding the token, or - for stdin")
	o.target.addFlags(cmd)
	return cmd
}

type workerPublishOptions struct {
	target    workerTarget
	file, key string
	wait      bool
	timeout   time.Duration
}

// defaultPublishTimeout bounds publish's wait for the new credential's pod.
const defaultPublishTimeout = 5 * time.Minute

// validate checks --wait and --timeout: a wait needs a positive bound,
// and --timeout without a wait would be silently ignored.
func (o *workerPublishOptions) validate(timeoutSet bool) error {
	switch {
	case o.wait && o.timeout <= 0:
		return fail.Errorf(fail.Invalid, "--timeout %s: give a positive duration to wait for the new credential's pod (e.g. --timeout 5m), or --wait=false not to wait", o.timeout)
	case !o.wait && timeoutSet:
		return fail.Errorf(fail.Invalid, "--timeout bounds the wait, and --wait=false does not wait: drop one of them")
	}
	return nil
}

// printPublish writes a publish result as text, worded by what was
// verified of the rollout.
func printPublish(out io.Writer, res *worker.Result) error {
	settled := ""
	if res.Settled {
		settled = " (an answer was lost; settled by reading back)"
	}
	fmt.Fprintf(out, "delivery %s: credential %s, generation %d published%s\n", res.DeliveryID, res.CredentialID, res.Generation, settled)
	fmt.Fprintf(out, "secret/%s: %s; deployment/%s: %s\n", delivery.SecretName, res.Secret, res.Deployment, res.DeploymentAction)
	switch {
	case res.Rollout == worker.RolloutAvailable:
		fmt.Fprintf(out, "rollout: pod %s of ReplicaSet %s (the PodTemplate of credential %s) is Available; no pod of an older ReplicaSet is left\n", res.Pod, res.ReplicaSet, res.CredentialID)
	case res.DeploymentAction == "updated":
		fmt.Fprintln(out, "rollout: started, not waited for (--wait=false): the previous credential's pod may still be running")
	default:
		fmt.Fprintln(out, "rollout: not waited for (--wait=false)")
	}
	_, err := fmt.Fprintf(out, "publication digest %s\n", res.PublicationDigest)
	return err
}

func newCmdWorkerPublish(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &workerPublishOptions{target: workerTarget{flags: flags, streams: streams}}
	cmd := &cobra.Command{
		Use:   "publish --delivery FILE --token-digest-key-file FILE --stage-namespace NS [--timeout D | --wait=false]",
		Short: "Publish a staged credential into the credential Secret and the Worker PodTemplate",
		Long: `Publish the staged delivery (docs/worker.md, "worker publish"), in this order:
read and validate the Worker Deployment (one replica, Recreate, the worker
label, a projected volume over ` + delivery.SecretName + `/` + delivery.SecretKey + `); before any Secret
write, check that its PodTemplate carries the delivery's exact predecessor
(else exit 3; carrying this very delivery is a replay, exit 0); check the
permission to update both objects; write ` + delivery.SecretName + ` with the resourceVersion of
its read (not rewritten when it already holds the staged token); then update
the whole Deployment with the resourceVersion of its read, adding only the
five credential annotations, so the Worker is recreated. Success only when
both objects hold exactly the delivery. A lost answer is settled by reading
back; a 409 is success only when the winner is this delivery.

Then, unless --wait=false, it waits (at most --timeout, polling with GET and
LIST: worker rbac grants no watch) until the Deployment controller has
observed the update, the ReplicaSet of the new PodTemplate has its pod
Available and no pod of an older ReplicaSet is left. A wait that times out
exits 4 naming what was verified and each pod's state (e.g. a container
waiting: ErrImageNeverPull); rerunning the same publish writes nothing and
waits again.`,
		Example: `  kubectl ql3 worker publish --delivery d-0002.yaml --token-digest-key-file ~/.ql3/worker-key --stage-namespace qinglong-stages`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(cmd.Flags().Changed("timeout")); err != nil {
				return err
			}
			d, opts, err := o.target.forDelivery(o.file)
			if err != nil {
				return err
			}
			key, err := readTokenDigestKey(o.key)
			if err != nil {
				return err
			}
			defer clear(key)
			opts.Key = key
			if o.wait {
				opts.Wait = o.timeout
			}
			res, err := worker.Publish(cmd.Context(), opts, d)
			if err != nil {
				return err
			}
			return o.target.print(res, func(out io.Writer) error { return printPublish(out, res) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.file, "delivery", "", "the delivery `FILE` (JSON or YAML)")
	f.StringVar(&o.key, "token-digest-key-file", "", "`FILE` holding the key (at least 32 bytes) of the token digest annotation; never written anywhere")
	f.BoolVar(&o.wait, "wait", true, "after the writes, wait until the new credential's pod is Available and the old one gone (--wait=false: return once both objects are written)")
	f.DurationVar(&o.timeout, "timeout", defaultPublishTimeout, "bound on --wait; when it passes, exit 4 saying what was verified")
	o.target.addFlags(cmd)
	return cmd
}

type workerDiscardOptions struct {
	target  workerTarget
	id, dep string
	abandon bool
}

func newCmdWorkerDiscard(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &workerDiscardOptions{target: workerTarget{flags: flags, streams: streams}}
	cmd := &cobra.Command{
		Use:   "discard-stage --delivery-id ID --stage-namespace NS [--abandon]",
		Short: "Delete a delivery's stage Secret once published, superseded or abandoned",
		Long: `Delete the stage Secret of --delivery-id with the UID and resourceVersion of
its read as preconditions, when the PodTemplate of the Worker Deployment the
stage records (namespace, name and UID, written by stage) carries the
delivery (published) or a later generation (superseded), or with --abandon;
never while the credential Secret holds the stage's token and the PodTemplate
does not carry it (a half-published delivery keeps its stage). Otherwise
exit 3, nothing deleted. --deployment, if given, must be the recorded one;
it is needed only for a stage made by an older kubectl-ql3 that recorded none.`,
		Example: `  kubectl ql3 worker discard-stage -n qinglong --delivery-id d-0001 --stage-namespace qinglong-stages`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateOutput(o.target.output, outputJSON, outputYAML); err != nil {
				return err
			}
			ns, err := namespace(flags)
			if err != nil {
				return err
			}
			if ns == "" {
				return fail.Errorf(fail.Invalid, "give -n NAMESPACE, the Worker's namespace")
			}
			opts, _, err := o.target.options(ns)
			if err != nil {
				return err
			}
			opts.DeploymentName = o.dep
			res, err := worker.Discard(cmd.Context(), opts, o.id, o.abandon)
			if err != nil {
				return err
			}
			return o.target.print(res, func(out io.Writer) error {
				_, err := fmt.Fprintf(out, "secret/%s in namespace %s: %s (%s)\n", res.Name, res.Namespace, res.Outcome, res.Reason)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.id, "delivery-id", "", "the delivery `ID` whose stage to delete")
	f.StringVar(&o.dep, "deployment", "", "the Worker Deployment's `NAME`: must be the one the stage records; needed only for a stage that records none")
	f.BoolVar(&o.abandon, "abandon", false, "discard the stage of a delivery that was never published")
	o.target.addFlags(cmd)
	return cmd
}

type workerAuditOptions struct {
	flags      *genericclioptions.ConfigFlags
	deployable bool
	dep        string
	output     string
}

func newCmdWorkerAudit(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &workerAuditOptions{flags: flags}
	cmd := &cobra.Command{
		Use:   "audit DIR | --deployment NAME -n NAMESPACE",
		Short: "Audit a Worker release, or the live Worker, against ADR-0239's rules",
		Long: `Check a Worker release rendered from the kustomization DIR (offline; base mode,
or --deployable for a private overlay), or with --deployment the live
Deployment and the PersistentVolumeClaim it names, read from the cluster
(live mode): one named finding per violated rule (docs/worker.md, "The
audit"). Any finding exits 2 after the report is printed.`,
		Example: `  kubectl ql3 worker audit deploy/worker/base
  kubectl ql3 worker audit -n qinglong --deployment ql3-worker -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateOutput(o.output, outputJSON, outputYAML); err != nil {
				return err
			}
			var rep *auditworker.Report
			switch {
			case len(args) == 1 && o.dep == "":
				mode := auditworker.Base
				if o.deployable {
					mode = auditworker.Deployable
				}
				var err error
				if rep, err = auditworker.Audit(filesys.MakeFsOnDisk(), args[0], mode); err != nil {
					return err
				}
			case len(args) == 0 && o.dep != "" && !o.deployable:
				var err error
				if rep, err = o.live(cmd.Context()); err != nil {
					return err
				}
			default:
				return fail.Errorf(fail.Invalid, "give a DIR, or --deployment NAME (with -n) for the live objects, not both (--deployable applies to DIR)")
			}
			var err error
			if o.output != "" {
				err = printObject(streams.Out, o.output, rep)
			} else {
				err = printWorkerReport(streams.Out, rep)
			}
			if err != nil {
				return err
			}
			if n := len(rep.Findings); n > 0 {
				return fail.Errorf(fail.Invalid, "worker %s: %d finding(s) in %s mode (rules: docs/worker.md)", rep.Source, n, rep.Mode)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.deployable, "deployable", false, "audit DIR as a deployable private overlay (a real identity generation)")
	f.StringVar(&o.dep, "deployment", "", "audit the live Worker Deployment `NAME` (and its claim) instead of a DIR")
	f.StringVarP(&o.output, "output", "o", "", outputUsage(outputJSON, outputYAML))
	registerOutputCompletion(cmd, outputJSON, outputYAML)
	return cmd
}

// live audits the live Worker Deployment of -n.
func (o *workerAuditOptions) live(ctx context.Context) (*auditworker.Report, error) {
	ns, err := namespace(o.flags)
	if err != nil {
		return nil, err
	}
	if ns == "" {
		return nil, fail.Errorf(fail.Invalid, "no namespace: give -n NAMESPACE")
	}
	cs, err := clientset(o.flags)
	if err != nil {
		return nil, err
	}
	return worker.AuditLive(ctx, worker.Live{Namespace: ns, Deployments: cs.AppsV1().Deployments(ns), Claims: cs.CoreV1().PersistentVolumeClaims(ns)}, o.dep)
}

func printWorkerReport(out io.Writer, rep *auditworker.Report) error {
	fmt.Fprintf(out, "worker %s: %s mode, %d rules checked\n", rep.Source, rep.Mode, len(rep.Checked))
	if len(rep.Findings) == 0 {
		_, err := fmt.Fprintln(out, "no findings")
		return err
	}
	w := printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "RULE\tOBJECT\tPATH\tEXPECTED\tFOUND")
	for _, f := range rep.Findings {
		where, path := "-", f.Path
		if f.Object != nil {
			where = f.Object.String()
		}
		if path == "" {
			path = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", f.Rule, where, path, f.Expected, f.Found)
	}
	return w.Flush()
}

type workerRBACOptions struct {
	flags               *genericclioptions.ConfigFlags
	dep, stageNS        string
	bindUser, bindGroup string
	output              string
}

func newCmdWorkerRBAC(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &workerRBACOptions{flags: flags}
	cmd := &cobra.Command{
		Use:   "rbac --deployment NAME --stage-namespace NS",
		Short: "Print the least privilege of worker stage, publish and discard-stage",
		Long: `Print the Roles, the ClusterRole and (with --bind-user or --bind-group) their
bindings that worker stage, publish and discard-stage need (docs/worker.md,
"worker rbac"). In the Worker namespace (-n): get and update on
` + delivery.SecretName + ` and on the Deployment, by name; create on Secrets (RBAC cannot
limit a create by name). In --stage-namespace, which must hold stage Secrets
only: get, list, create and delete on Secrets (list, for the stage cap, cannot
be limited by name or label). Cluster-wide: get on the kube-system Namespace
(the cluster identity). In the Worker namespace also list on ReplicaSets and
pods, for publish's wait (it polls: no watch). Nothing on ` + delivery.IdentitySecret + `, no
patch, no watch, no Deployment create or delete, no pods/exec or logs.
Nothing here contacts the cluster.`,
		Example: `  kubectl ql3 worker rbac -n qinglong --deployment ql3-worker --stage-namespace qinglong-stages --bind-user rotator | kubectl apply -f -`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateOutput(o.output); err != nil {
				return err
			}
			ns, err := namespace(flags)
			if err != nil {
				return err
			}
			if ns == "" {
				return fail.Errorf(fail.Invalid, "give -n NAMESPACE, the Worker's namespace")
			}
			objs, err := worker.RBAC(ns, o.stageNS, o.dep, worker.Subject{User: o.bindUser, Group: o.bindGroup})
			if err != nil {
				return err
			}
			return printRBAC(streams.Out, o.output, objs)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dep, "deployment", "", "the Worker Deployment's `NAME` (required)")
	f.StringVar(&o.stageNS, "stage-namespace", "", "the `NAMESPACE` of the stage Secrets, holding nothing else (required)")
	f.StringVar(&o.bindUser, "bind-user", "", "also print bindings to the user `NAME`")
	f.StringVar(&o.bindGroup, "bind-group", "", "also print bindings to the group `NAME`")
	f.StringVarP(&o.output, "output", "o", "yaml", outputUsage()+"; yaml is a multi-document stream, the others see a v1 List")
	registerOutputCompletion(cmd)
	return cmd
}
