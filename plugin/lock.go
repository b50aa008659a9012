package plugin

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/Masterminds/semver/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// secretFlags are the Secret policy flags of render, lock and lock verify.
type secretFlags struct {
	allow   bool
	keyFile string
}

func (f *secretFlags) add(fs *pflag.FlagSet) {
	fs.BoolVar(&f.allow, "allow-secret-data", false, "allow Secrets with data or stringData in the release (see docs/lock.md)")
	fs.StringVar(&f.keyFile, "secret-digest-key-file", "", "`FILE` holding the key (at least 32 bytes) of the HMAC that binds Secret values; never written anywhere. Without it Secret values are redacted and not bound")
}

func (f *secretFlags) validate() error {
	if f.keyFile != "" && !f.allow {
		return fail.Errorf(fail.Invalid, "--secret-digest-key-file requires --allow-secret-data")
	}
	return nil
}

// options reads the key file into render options.
func (f *secretFlags) options() (inventory.Options, error) {
	opts := inventory.Options{AllowSecretData: f.allow}
	if f.keyFile != "" {
		key, err := readSecretKey(f.keyFile)
		if err != nil {
			return opts, err
		}
		opts.SecretDigestKey = key
	}
	return opts, nil
}

// offlineMapper is the RESTMapper render and lock verify use: none (the
// built-in table and the release's CRDs) unless --context was given.
func offlineMapper(cmd *cobra.Command, flags *genericclioptions.ConfigFlags) (meta.RESTMapper, error) {
	if f := cmd.Flags().Lookup("context"); f == nil || !f.Changed {
		return nil, nil
	}
	return restMapper(flags)
}

func restMapper(flags *genericclioptions.ConfigFlags) (meta.RESTMapper, error) {
	m, err := flags.ToRESTMapper()
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "kubeconfig: %w", err)
	}
	return m, nil
}

// LockReport is what `kubectl ql3 lock -o …` and `kubectl ql3 lock verify
// -o …` print: the lock file, its digest (docs/digests.md) and the lock.
type LockReport struct {
	Path string `json:"path"`
	// State is lock's outcome: "wrote" or "unchanged"; lock verify: "verified".
	State  string          `json:"state"`
	Digest string          `json:"digest"`
	Lock   *inventory.Lock `json:"lock"`
}

type lockOptions struct {
	flags           *genericclioptions.ConfigFlags
	streams         genericiooptions.IOStreams
	secrets         secretFlags
	dir             string
	version         string
	clusterIdentity string
	update          bool
	output          string
	noCache         bool
	// prof holds only the hidden --cpuprofile and --memprofile.
	prof ceremonyFlags

	// Resolved by Complete.
	opts     inventory.Options
	identity func(context.Context) (string, error)
}

func newCmdLock(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &lockOptions{flags: flags, streams: streams}
	cmd := &cobra.Command{
		Use:   "lock DIR --version VERSION",
		Short: "Write the release directory's lock, ql3.lock.yaml, for the current cluster",
		Long: `Render the release directory DIR and write DIR/ql3.lock.yaml: the lock that
binds its version, source files, rendered objects, pinned images, role surface,
target cluster and control namespace, and the plugin versions allowed to deploy
it (docs/lock.md). Commit the lock with the release.

The target's cluster identity is read from the current context, whose
RESTMapper also decides each kind's scope, unless --cluster-identity is given
(offline; kinds then resolve through a built-in table and the release's CRDs
unless --context is given too).

An existing lock is never replaced unless --update is given; an existing lock
identical to the new one is left as it is.

The lock is printed as written; with -o, the path, state, digest and lock
are printed instead (-o name: the lock file's path).`,
		Example: `  kubectl ql3 lock releases/3.0.0 --version 3.0.0 --context prod
  kubectl ql3 lock releases/3.0.0 --version 3.0.0 --update
  kubectl ql3 lock releases/3.0.0 --version 3.0.0 --cluster-identity sha256:…
  kubectl ql3 lock releases/3.0.0 --version 3.0.0 -o jsonpath='{.digest}'
  kubectl ql3 lock verify releases/3.0.0`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.dir = args[0]
			if err := o.Validate(); err != nil {
				return err
			}
			if err := o.Complete(cmd); err != nil {
				return err
			}
			if err := o.prof.begin(); err != nil {
				return err
			}
			defer o.prof.end(o.streams.ErrOut)
			return o.Run(cmd.Context())
		},
	}
	// Profiling the render of a large release (docs/performance.md); hidden.
	cmd.Flags().StringVar(&o.prof.cpuProfile, "cpuprofile", "", "write a CPU profile of this command to `FILE`")
	cmd.Flags().StringVar(&o.prof.memProfile, "memprofile", "", "write an allocation profile of this command to `FILE`")
	_ = cmd.Flags().MarkHidden("cpuprofile")
	_ = cmd.Flags().MarkHidden("memprofile")
	cmd.Flags().StringVar(&o.version, "version", "", "the release `VERSION`: strict SemVer 2.0.0, without a leading v (required)")
	cmd.Flags().StringVar(&o.clusterIdentity, "cluster-identity", "", "the target's cluster identity `DIGEST` (sha256:…, see kubectl ql3 version); do not contact a cluster for it")
	cmd.Flags().BoolVar(&o.update, "update", false, "replace an existing lock")
	addNoCacheFlag(cmd.Flags(), &o.noCache)
	o.secrets.add(cmd.Flags())
	cmd.Flags().StringVarP(&o.output, "output", "o", "", outputUsage()+" (default: the lock as written)")
	registerOutputCompletion(cmd)
	cmd.AddCommand(newCmdLockVerify(flags, streams))
	return cmd
}

func (o *lockOptions) Validate() error {
	switch {
	case o.version == "":
		return fail.Errorf(fail.Invalid, "--version is required")
	case !strictSemVer(o.version):
		return fail.Errorf(fail.Invalid, "--version %q is not strict SemVer 2.0.0 (MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD], no leading \"v\")", o.version)
	case o.clusterIdentity != "" && !inventory.IsDigest(o.clusterIdentity):
		return fail.Errorf(fail.Invalid, "--cluster-identity %q is not a digest (sha256: and 64 lowercase hex digits)", o.clusterIdentity)
	}
	if err := validateOutput(o.output); err != nil {
		return err
	}
	return o.secrets.validate()
}

func strictSemVer(v string) bool {
	_, err := semver.StrictNewVersion(v)
	return err == nil
}

// Complete reads the key file and, when online, resolves the RESTMapper and
// the cluster identity reader.
func (o *lockOptions) Complete(cmd *cobra.Command) error {
	var err error
	if o.opts, err = o.secrets.options(); err != nil {
		return err
	}
	if o.clusterIdentity != "" {
		id := o.clusterIdentity
		o.identity = func(context.Context) (string, error) { return id, nil }
		o.opts.Mapper, err = offlineMapper(cmd, o.flags)
		return err
	}
	cs, err := clientset(o.flags)
	if err != nil {
		return err
	}
	o.identity = func(ctx context.Context) (string, error) {
		return deploy.ReadClusterIdentity(ctx, deploy.NewIdentityReader(cs))
	}
	o.opts.Mapper, err = restMapper(o.flags)
	return err
}

func (o *lockOptions) Run(ctx context.Context) error {
	rel, err := inventory.Render(filesys.MakeFsOnDisk(), o.dir, o.opts)
	if err != nil {
		return err
	}
	o.fillCache(rel)
	clusterIdentity, err := o.identity(ctx)
	if err != nil {
		return err
	}
	lock, err := inventory.NewLock(rel, o.version, clusterIdentity, version)
	if err != nil {
		return err
	}
	data, err := lock.Marshal()
	if err != nil {
		return err
	}
	digest, err := lock.Digest()
	if err != nil {
		return err
	}
	path := filepath.Join(o.dir, inventory.LockFile)
	wrote, err := inventory.WriteLockFile(path, data, o.update)
	if err != nil {
		return err
	}
	what := "wrote"
	if !wrote {
		what = "unchanged"
	}
	if o.output != "" {
		err = printObject(o.streams.Out, o.output, LockReport{Path: path, State: what, Digest: digest, Lock: lock})
	} else {
		_, err = o.streams.Out.Write(data)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(o.streams.ErrOut, "%s %s: release %s, %d objects, namespace %s, lock %s\n", what, path, lock.Release.Version, lock.Render.Count, lock.Target.Namespace, digest)
	return nil
}

// fillCache stores the fresh render for preflight and apply (lock always
// renders). The cache is an optimisation: a failure to store is a warning.
func (o *lockOptions) fillCache(rel *inventory.Release) {
	c := renderCache(o.noCache, o.streams.ErrOut)
	if c == nil {
		return
	}
	if err := inventory.StoreRender(c, rel); err != nil {
		fmt.Fprintf(o.streams.ErrOut, "render cache: not stored: %v\n", err)
	}
}

type lockVerifyOptions struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	secrets secretFlags
	dir     string
	output  string
	opts    inventory.Options
}

func newCmdLockVerify(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &lockVerifyOptions{flags: flags, streams: streams}
	cmd := &cobra.Command{
		Use:   "verify DIR",
		Short: "Check that a release directory still matches its lock",
		Long: `Re-render the release directory DIR and compare it with DIR/ql3.lock.yaml:
source files, rendered objects, inventory, images, role surface and control
namespace, and check that this plugin satisfies the lock's tool constraint.
Every difference is reported, field by field, and the exit status is 2
(invalid) if there is any.

Offline: kinds resolve through a built-in table and the release's CRDs unless
--context is given. The target's cluster identity is checked by preflight.
With -o, a verified lock's path, digest and content are printed (-o name:
the lock file's path).`,
		Example: `  kubectl ql3 lock verify releases/3.0.0
  kubectl ql3 lock verify releases/3.0.0 -o jsonpath='{.digest}'
  kubectl ql3 lock verify releases/3.0.0 --allow-secret-data --secret-digest-key-file ~/.ql3/key`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.dir = args[0]
			if err := validateOutput(o.output); err != nil {
				return err
			}
			if err := o.secrets.validate(); err != nil {
				return err
			}
			var err error
			if o.opts, err = o.secrets.options(); err != nil {
				return err
			}
			if o.opts.Mapper, err = offlineMapper(cmd, o.flags); err != nil {
				return err
			}
			return o.Run()
		},
	}
	o.secrets.add(cmd.Flags())
	cmd.Flags().StringVarP(&o.output, "output", "o", "", outputUsage())
	registerOutputCompletion(cmd)
	return cmd
}

func (o *lockVerifyOptions) Run() error {
	rel, lock, err := inventory.LoadRelease(filesys.MakeFsOnDisk(), o.dir, o.opts)
	if err != nil {
		return err
	}
	if err := inventory.CheckToolConstraint(lock, version); err != nil {
		return err
	}
	digest, err := lock.Digest()
	if err != nil {
		return err
	}
	if o.output != "" {
		return printObject(o.streams.Out, o.output, LockReport{Path: filepath.Join(o.dir, inventory.LockFile), State: "verified", Digest: digest, Lock: lock})
	}
	covered := ""
	if !lock.Render.SecretValuesCovered {
		covered = " (Secret values redacted, not bound)"
	}
	fmt.Fprintf(o.streams.Out, "%s matches its lock: release %s, %d objects, namespace %s, lock %s%s\n",
		rel.Dir, lock.Release.Version, lock.Render.Count, lock.Target.Namespace, digest, covered)
	return nil
}
