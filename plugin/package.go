package plugin

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/package/intent"
	"github.com/qinglong/kubectl-ql3/ceremony/package/pointer"
	"github.com/qinglong/kubectl-ql3/ceremony/package/stagelayout"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/safefile"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// newCmdPackage is `kubectl ql3 package`: plugin package activation
// (docs/package-pointer.md): the offline stage check, and the active
// pointer's intent, activate, inspect and rbac on the CAS kernel.
func newCmdPackage(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "package",
		Short: "Activate plugin packages through their active pointer, and check their stage evidence",
		Long: `A plugin package is active on a cluster when its active pointer — one
ConfigMap per cluster, namespace, project and package — holds an activation
intent for it (docs/package-pointer.md). "package intent" builds the next
intent from a staged OCI layout, the package lock and the pointer on the
cluster; "package activate" writes it by compare-and-swap; "package inspect"
reports (and settles) it; "package rbac" prints the least privilege;
"package stage" writes a stage (OCI layout and signed receipt) and
"package verify-stage" checks an intent's stage evidence, both offline.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCmdPackageStage(streams), newCmdPackageVerifyStage(streams), newCmdPackageIntent(flags, streams), newCmdPackageActivate(flags, streams),
		newCmdPackageInspect(flags, streams), newCmdPackageRBAC(flags, streams))
	return cmd
}

// StageReport is what `kubectl ql3 package verify-stage -o json|yaml`
// prints for a verified stage.
type StageReport = stagelayout.Report

type packageVerifyStageOptions struct {
	streams    genericiooptions.IOStreams
	intentFile string
	stage      stageFlags
	output     string
}

func newCmdPackageVerifyStage(streams genericiooptions.IOStreams) *cobra.Command {
	o := &packageVerifyStageOptions{streams: streams}
	cmd := &cobra.Command{
		Use:   "verify-stage --intent FILE --layout DIR --trusted-key FILE --allow-ref REF...",
		Short: "Verify an activation intent's stage evidence against an OCI image layout, offline",
		Long: `Verify the five stage fields of a package activation intent (lock digest,
stage reference, stage receipt digest, adapter evidence digest, content digest)
against an OCI image layout directory, as oras --oci-layout or skopeo oci:
write it. Every blob is re-hashed; the stage receipt is the index.json manifest
whose subject is the package manifest, and its statement must be signed by a
--trusted-key. The intent's stage reference must be admitted by an --allow-ref
(a repository NAME, or one NAME@sha256:...). Nothing is fetched or cached.

Exit 4 (unavailable): a file of the layout cannot be read intact (absent, not
a regular file, wrong size or hash), or there is no stage receipt yet; repair
or complete it and rerun. Exit 3 (conflict): the stage was read intact and
does not prove the intent. Exit 2: bad input, --layout included (missing, not
a directory, no oci-layout file).
The format and every check are in docs/package-pointer.md.`,
		Example: `  kubectl ql3 package verify-stage --intent intent.json --layout ./stage \
    --trusted-key stage-key.pem --allow-ref registry.example.com/qinglong/packages/demo
  kubectl ql3 package verify-stage --intent intent.json --layout ./stage \
    --trusted-key stage-key.pem --allow-ref registry.example.com/qinglong/packages/demo -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run()
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.intentFile, "intent", "", "activation intent `FILE` (qinglong/plugin-package-activation-intent@v1 JSON)")
	o.stage.add(cmd)
	f.StringVarP(&o.output, "output", "o", "", outputUsage(outputJSON, outputYAML))
	_ = cmd.MarkFlagRequired("intent")
	registerOutputCompletion(cmd, outputJSON, outputYAML)
	return cmd
}

// Validate checks the flags alone.
func (o *packageVerifyStageOptions) Validate() error {
	switch {
	case o.intentFile == "":
		return fail.Errorf(fail.Invalid, "--intent is required")
	case o.stage.layout == "":
		return fail.Errorf(fail.Invalid, "--layout is required")
	case len(o.stage.trustedKeys) == 0:
		return fail.Errorf(fail.Invalid, "--trusted-key is required: an unsigned stage proves nothing")
	case len(o.stage.allowRefs) == 0:
		return fail.Errorf(fail.Invalid, "--allow-ref is required")
	}
	for _, a := range o.stage.allowRefs {
		if intent.CheckName("--allow-ref", a) != nil && intent.CheckReference("--allow-ref", a) != nil {
			return fail.Errorf(fail.Invalid, "--allow-ref %q is neither a repository name nor NAME@sha256:<64 hex>", a)
		}
	}
	return validateOutput(o.output, outputJSON, outputYAML)
}

func (o *packageVerifyStageOptions) Run() error {
	in, err := readIntent(o.intentFile)
	if err != nil {
		return err
	}
	keys, err := readTrustedKeys(o.stage.trustedKeys)
	if err != nil {
		return err
	}
	v := &stagelayout.Verifier{Layout: o.stage.layout, TrustedKeys: keys, Allow: o.stage.allowRefs}
	rep, err := v.Check(in)
	if err != nil {
		return err
	}
	return printStageReport(o.streams.Out, o.output, *rep)
}

// readIntent reads and parses an intent file; every failure is invalid
// input naming the file.
func readIntent(file string) (intent.Intent, error) {
	data, err := readBounded(file, intent.MaxIntentBytes)
	if err != nil {
		return intent.Intent{}, fail.Errorf(fail.Invalid, "--intent %s: %w", file, err)
	}
	in, err := intent.Parse(data)
	if err != nil {
		return intent.Intent{}, fmt.Errorf("--intent %s: %w", file, err)
	}
	return in, nil
}

// readBounded reads file, a regular file of at most max bytes
// (safefile.ReadRegular); a longer file is an error.
func readBounded(file string, max int64) ([]byte, error) {
	return safefile.ReadRegular(file, max)
}

func printStageReport(w io.Writer, output string, rep StageReport) error {
	if output != "" {
		return printObject(w, output, rep)
	}
	ev := rep.Evidence
	fmt.Fprintf(w, "Stage verified: %s\n", ev.StageReference)
	fmt.Fprintf(w, "  Lock digest:             %s\n", ev.LockDigest)
	fmt.Fprintf(w, "  Content digest:          %s\n", ev.ContentDigest)
	fmt.Fprintf(w, "  Adapter evidence digest: %s\n", ev.AdapterEvidenceDigest)
	fmt.Fprintf(w, "  Stage receipt digest:    %s\n", ev.StageReceiptDigest)
	fmt.Fprintf(w, "Intent digest: %s\n", rep.IntentDigest)
	_, err := fmt.Fprintf(w, "Active pointer: ConfigMap %s (target %s)\n", rep.Pointer.Name, rep.Pointer.TargetDigest)
	return err
}

// packageRBACHint ends a missing-permission error of the pointer commands.
const packageRBACHint = "`kubectl ql3 package rbac --intent FILE` prints the least privilege"

// stageFlags are the stage evidence port's flags (an OCI layout).
type stageFlags struct {
	layout      string
	trustedKeys []string
	allowRefs   []string
}

func (s *stageFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&s.layout, "layout", "", "OCI image layout directory `DIR` holding the stage")
	f.StringArrayVar(&s.trustedKeys, "trusted-key", nil, "`FILE` holding an Ed25519 public key (PKIX PEM) a stage receipt may be signed by (repeatable)")
	f.StringArrayVar(&s.allowRefs, "allow-ref", nil, "stage `REF` the intent may name: a repository NAME or NAME@sha256:<hex> (repeatable)")
	for _, name := range []string{"layout", "trusted-key", "allow-ref"} {
		_ = cmd.MarkFlagRequired(name)
	}
	_ = cmd.MarkFlagDirname("layout")
}

// verifier checks the flags and reads the trusted keys.
func (s *stageFlags) verifier() (*stagelayout.Verifier, error) {
	switch {
	case s.layout == "":
		return nil, fail.Errorf(fail.Invalid, "--layout is required")
	case len(s.trustedKeys) == 0:
		return nil, fail.Errorf(fail.Invalid, "--trusted-key is required: an unsigned stage proves nothing")
	case len(s.allowRefs) == 0:
		return nil, fail.Errorf(fail.Invalid, "--allow-ref is required")
	}
	keys, err := readTrustedKeys(s.trustedKeys)
	if err != nil {
		return nil, err
	}
	v := &stagelayout.Verifier{Layout: s.layout, TrustedKeys: keys, Allow: s.allowRefs}
	return v, v.Validate()
}

// readTrustedKeys reads the --trusted-key files.
func readTrustedKeys(files []string) ([]ed25519.PublicKey, error) {
	var keys []ed25519.PublicKey
	for _, file := range files {
		data, err := readBounded(file, 64<<10)
		if err != nil {
			return nil, fail.Errorf(fail.Invalid, "--trusted-key %s: %w", file, err)
		}
		k, err := stagelayout.ParsePublicKey(file, data)
		if err != nil {
			return nil, fmt.Errorf("--trusted-key: %w", err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// pointerOptions resolves the clients of ns for the pointer commands.
func pointerOptions(flags *genericclioptions.ConfigFlags, ns string, v intent.StageVerifier, settle string, errOut io.Writer) (pointer.Options, error) {
	cs, err := clientset(flags)
	if err != nil {
		return pointer.Options{}, err
	}
	return pointer.Options{
		ConfigMaps: cs.CoreV1().ConfigMaps(ns), Namespaces: cs.CoreV1().Namespaces(), Review: access.NewReview(access.NewReviewer(cs)),
		Verifier: v, Hint: packageRBACHint, Settle: settle,
		Say: func(format string, args ...any) { fmt.Fprintf(errOut, format+"\n", args...) },
	}, nil
}

// intentNamespace checks that an explicit -n agrees with the intent's
// namespace, where its pointer lives.
func intentNamespace(flags *genericclioptions.ConfigFlags, in intent.Intent) error {
	if flags.Namespace != nil && *flags.Namespace != "" && *flags.Namespace != in.Namespace {
		return fail.Errorf(fail.Invalid, "-n %s: the intent's pointer lives in namespace %q (the intent names it); drop -n or fix it", *flags.Namespace, in.Namespace)
	}
	return nil
}

type packageRBACOptions struct {
	flags      *genericclioptions.ConfigFlags
	streams    genericiooptions.IOStreams
	intentFile string
	project    string
	pkg        string
	identity   string
	bindUser   string
	bindGroup  string
	output     string
}

func newCmdPackageRBAC(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &packageRBACOptions{flags: flags, streams: streams}
	cmd := &cobra.Command{
		Use:   "rbac (--intent FILE | --project ID --package ID [-n NAMESPACE] [--cluster-identity DIGEST])",
		Short: "Print the least privilege of package intent, activate and inspect for one package",
		Long: `Print the Role ` + pointer.RolePrefix + `<pointer name> in the pointer's namespace — get and update
on the package's active pointer ConfigMap by name, and create on ConfigMaps —
and the ClusterRole ` + pointer.ClusterRoleName + ` — get on the kube-system
Namespace, whose UID is the cluster identity — with, for --bind-user or
--bind-group, their bindings. The pointer is named by --intent, or by
--project, --package and the namespace (-n, or the kubeconfig's) of the cluster
given by --cluster-identity (read from the cluster when omitted).

Create cannot be limited by name (a create request carries no name in its
URL): drop that rule once generation 1 is active. The ClusterRole is a
deviation from ADR-0139's ConfigMap-only role: kubectl-ql3 checks the cluster
identity itself. inspect and intent need only the two gets. No list, watch,
patch or delete is needed.`,
		Example: `  kubectl ql3 package rbac --intent intent.json --bind-user package-admin | kubectl apply -f -
  kubectl ql3 package rbac --project demo --package weather-tools -n qinglong --bind-group package-admins`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.Run(cmd.Context()) },
	}
	f := cmd.Flags()
	f.StringVar(&o.intentFile, "intent", "", "activation intent `FILE` naming the pointer")
	f.StringVar(&o.project, "project", "", "the project `ID` (without --intent)")
	f.StringVar(&o.pkg, "package", "", "the package `ID` (without --intent)")
	f.StringVar(&o.identity, "cluster-identity", "", "the cluster identity `DIGEST` (without --intent; default: read from the cluster)")
	f.StringVar(&o.bindUser, "bind-user", "", "also print bindings of the roles to the user `NAME`")
	f.StringVar(&o.bindGroup, "bind-group", "", "also print bindings of the roles to the group `NAME`")
	f.StringVarP(&o.output, "output", "o", "yaml", outputUsage()+"; yaml is a multi-document stream, the others see a v1 List")
	cmd.MarkFlagsMutuallyExclusive("intent", "project")
	cmd.MarkFlagsMutuallyExclusive("intent", "package")
	cmd.MarkFlagsMutuallyExclusive("intent", "cluster-identity")
	registerOutputCompletion(cmd)
	return cmd
}

func (o *packageRBACOptions) Run(ctx context.Context) error {
	if err := validateOutput(o.output); err != nil {
		return err
	}
	var in intent.Intent
	if o.intentFile != "" {
		var err error
		if in, err = readIntent(o.intentFile); err != nil {
			return err
		}
		if err := intentNamespace(o.flags, in); err != nil {
			return err
		}
	} else {
		if o.project == "" || o.pkg == "" {
			return fail.Errorf(fail.Invalid, "give --intent FILE, or --project and --package")
		}
		ns, err := namespace(o.flags)
		if err != nil {
			return err
		}
		id := o.identity
		if id == "" {
			cs, err := clientset(o.flags)
			if err != nil {
				return err
			}
			if id, err = pointer.ReadClusterIdentity(ctx, cs.CoreV1().Namespaces()); err != nil {
				return err
			}
		}
		if !canon.IsDigest(id) {
			return fail.Errorf(fail.Invalid, "--cluster-identity %q is not sha256:<64 hex> (kubectl ql3 version prints it)", id)
		}
		for _, f := range []struct{ flag, v string }{{"--project", o.project}, {"--package", o.pkg}, {"-n", ns}} {
			if err := intent.CheckID(f.flag, f.v); err != nil {
				return err
			}
		}
		in = intent.Intent{ClusterIdentity: id, Namespace: ns, ProjectID: o.project, PackageID: o.pkg}
	}
	t := intent.Target{ClusterIdentity: in.ClusterIdentity, Namespace: in.Namespace, ProjectID: in.ProjectID, PackageID: in.PackageID}
	nm, err := intent.NamingOfTarget(t)
	if err != nil {
		return err
	}
	objs := pointer.RBAC(nm, in.Namespace, pointer.Subject{User: o.bindUser, Group: o.bindGroup})
	return printRBAC(o.streams.Out, o.output, objs)
}
