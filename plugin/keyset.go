package plugin

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/keyset"
	"github.com/qinglong/kubectl-ql3/ceremony/keyset/jwkset"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

func newCmdKeyset(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keyset",
		Short: "Verify, plan and publish identity keysets through a durable ledger",
		Long: `An identity keyset is the file of reviewed public signing keys (JWKs) a
package management host trusts, with a generation number and the append-only
list of revoked key IDs. init (generation 1 from public key files), jwk (one
key file as a JWK), verify and plan-rotation work on files only and never
contact a cluster; publish writes a generation to a namespace through the
keyset ledger, and rbac prints the permissions publish needs. The format and
its rules are in docs/keyset.md.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCmdKeysetInit(streams), newCmdKeysetJWK(streams), newCmdKeysetVerify(streams), newCmdKeysetPlanRotation(streams), newCmdKeysetPublish(flags, streams), newCmdKeysetRBAC(flags, streams))
	return cmd
}

// keysetRead are the flags every keyset command shares.
type keysetRead struct {
	maxBytes int64
	output   string
}

func (r *keysetRead) add(f *pflag.FlagSet) {
	f.Int64Var(&r.maxBytes, "max-bytes", jwkset.DefaultMaxBytes, fmt.Sprintf("largest keyset or key file to read, in bytes (at most %d)", jwkset.HardMaxBytes))
	f.StringVarP(&r.output, "output", "o", "", "output format: json or yaml")
}

func (r *keysetRead) validate() error {
	if r.maxBytes < 1 || r.maxBytes > jwkset.HardMaxBytes {
		return fail.Errorf(fail.Invalid, "--max-bytes %d: want 1 to %d", r.maxBytes, jwkset.HardMaxBytes)
	}
	return validateOutput(r.output, "json", "yaml")
}

// read reads and parses the keyset at path (relative paths are taken from
// the working directory); flag ("--current: ", or "") prefixes errors.
func (r *keysetRead) read(flag, path string) (*jwkset.Keyset, string, error) {
	data, abs, err := r.readFile(flag, path)
	if err != nil {
		return nil, "", err
	}
	k, err := jwkset.Parse(data)
	if err != nil {
		return nil, "", fmt.Errorf("%s%s: %w", flag, abs, err)
	}
	return k, abs, nil
}

func (r *keysetRead) readFile(flag, path string) ([]byte, string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, "", fail.Errorf(fail.Invalid, "%s%s: %w", flag, path, err)
	}
	data, err := jwkset.ReadFile(abs, r.maxBytes)
	if err != nil {
		return nil, "", fmt.Errorf("%s%w", flag, err)
	}
	return data, abs, nil
}

type keysetVerifyOptions struct {
	streams  genericiooptions.IOStreams
	read     keysetRead
	file     string
	previous string
}

// keysetVerifyReport is verify's result.
type keysetVerifyReport struct {
	Keyset   keyset.Summary  `json:"keyset"`
	Previous *keyset.Summary `json:"previous,omitempty"`
}

func newCmdKeysetVerify(streams genericiooptions.IOStreams) *cobra.Command {
	o := &keysetVerifyOptions{streams: streams}
	cmd := &cobra.Command{
		Use:   "verify FILE",
		Short: "Verify a keyset file, and that it may follow --previous",
		Long: `Verify one keyset generation: the file is read safely (a regular file, not a
symbolic link, not group or world writable, unchanged while read, at most
--max-bytes) and must be strict UTF-8 JSON of the exact keyset shape with 1 to
8 valid public keys and at most 64 revoked key IDs.

With --previous, FILE must also be a valid successor of that generation: the
generation never decreases, the same generation never changes digest,
revocations only append, and an active key leaves only by being revoked.

Exit codes: 2 the file is invalid, 3 it conflicts with --previous, 4 a file
changed while being read (read again). The rules are in docs/keyset.md.`,
		Example: `  kubectl ql3 keyset verify ./keyset-8.json
  kubectl ql3 keyset verify ./keyset-9.json --previous ./keyset-8.json -o json`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.file = args[0]
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run()
		},
	}
	o.read.add(cmd.Flags())
	cmd.Flags().StringVar(&o.previous, "previous", "", "the generation published before `FILE`; check that FILE may follow it")
	registerOutputCompletion(cmd)
	return cmd
}

func (o *keysetVerifyOptions) Validate() error { return o.read.validate() }

func (o *keysetVerifyOptions) Run() error {
	next, abs, err := o.read.read("", o.file)
	if err != nil {
		return err
	}
	rep := keysetVerifyReport{}
	if rep.Keyset, err = keyset.Summarize(abs, next); err != nil {
		return err
	}
	if o.previous != "" {
		prev, prevAbs, err := o.read.read("--previous: ", o.previous)
		if err != nil {
			return err
		}
		p, err := keyset.Summarize(prevAbs, prev)
		if err != nil {
			return err
		}
		rep.Previous = &p
		if err := jwkset.CheckSuccessor(prev, next); err != nil {
			return fmt.Errorf("%s after --previous %s: %w", abs, prevAbs, err)
		}
	}
	if o.read.output != "" {
		return printObject(o.streams.Out, o.read.output, rep)
	}
	return printKeysetVerify(o.streams.Out, rep)
}

func printKeysetVerify(out io.Writer, rep keysetVerifyReport) error {
	k := rep.Keyset
	fmt.Fprintf(out, "%s: valid keyset, generation %d, digest %s\n", k.File, k.Generation, k.Digest)
	w := printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "KID\tALG\tKTY\tCRV")
	for _, j := range k.Keys {
		crv := j.Crv
		if crv == "" {
			crv = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", j.Kid, j.Alg, j.Kty, crv)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	revoked := "none"
	if len(k.RevokedKids) > 0 {
		revoked = strings.Join(k.RevokedKids, ", ")
	}
	fmt.Fprintf(out, "revoked: %s\n", revoked)
	if p := rep.Previous; p != nil {
		fmt.Fprintf(out, "may follow %s (generation %d, digest %s)\n", p.File, p.Generation, p.Digest)
	}
	return nil
}

type keysetPlanOptions struct {
	streams genericiooptions.IOStreams
	read    keysetRead
	current string
	add     string
	revoke  []string
	outDir  string
}

func newCmdKeysetPlanRotation(streams genericiooptions.IOStreams) *cobra.Command {
	o := &keysetPlanOptions{streams: streams}
	cmd := &cobra.Command{
		Use:   "plan-rotation --current FILE --add JWK",
		Short: "Write the two generations of a key rotation: overlap, then revoke",
		Long: `Plan replacing the keys of the --current generation by the public key in the
--add file (one JWK object). Two new files are written next to --current (or
in --out-dir), never replacing an existing file:

  keyset-<N+1>.json  the overlap generation: the current keys plus the new one
  keyset-<N+2>.json  the revoking generation: the old keys removed and revoked

Publish the overlap generation first. Publish the revoking generation only
after every replica has observed the overlap generation: a replica that has
not yet seen the new key would reject everything signed with it. A revoked key
is revoked cluster-wide only once every replica has observed the revoking
generation. --revoke limits the revocation to the named keys.`,
		Example: `  kubectl ql3 keyset plan-rotation --current ./keyset-7.json --add ./new-key.jwk.json
  kubectl ql3 keyset plan-rotation --current ./keyset-7.json --add ./new.jwk.json --revoke old-1 --out-dir ./next`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run()
		},
	}
	f := cmd.Flags()
	o.read.add(f)
	f.StringVar(&o.current, "current", "", "the keyset `FILE` published now")
	f.StringVar(&o.add, "add", "", "`FILE` holding the new public key, one JWK object")
	f.StringArrayVar(&o.revoke, "revoke", nil, "key ID of a current key to revoke (repeatable; default: every current key)")
	f.StringVar(&o.outDir, "out-dir", "", "directory for the two new files (default: the directory of --current)")
	_ = cmd.MarkFlagRequired("current")
	_ = cmd.MarkFlagRequired("add")
	registerOutputCompletion(cmd)
	return cmd
}

func (o *keysetPlanOptions) Validate() error {
	if o.current == "" || o.add == "" {
		return fail.Errorf(fail.Invalid, "--current and --add are required")
	}
	return o.read.validate()
}

func (o *keysetPlanOptions) Run() error {
	cur, curAbs, err := o.read.read("--current: ", o.current)
	if err != nil {
		return err
	}
	data, addAbs, err := o.read.readFile("--add: ", o.add)
	if err != nil {
		return err
	}
	key, err := jwkset.ParseJWK(data)
	if err != nil {
		return fmt.Errorf("--add: %s: %w", addAbs, err)
	}
	dir := o.outDir
	if dir == "" {
		dir = filepath.Dir(curAbs)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return fail.Errorf(fail.Invalid, "--out-dir: %w", err)
	}
	rep, err := keyset.PlanRotation(cur, curAbs, key, o.revoke, dir)
	if err != nil {
		return err
	}
	if err := writeNewFiles(rep.Files); err != nil {
		return err
	}
	if o.read.output != "" {
		return printObject(o.streams.Out, o.read.output, rep)
	}
	fmt.Fprintf(o.streams.Out, "wrote %s: generation %d, the overlap (keys %s)\n", rep.Overlap.File, rep.Overlap.Generation, rep.Overlap.Kids())
	fmt.Fprintf(o.streams.Out, "wrote %s: generation %d, revokes %s (keys %s)\n", rep.Revoking.File, rep.Revoking.Generation, strings.Join(rep.Revoked, ", "), rep.Revoking.Kids())
	fmt.Fprintln(o.streams.Out, "next:")
	for i, step := range rep.Procedure {
		fmt.Fprintf(o.streams.Out, "  %d. %s\n", i+1, step)
	}
	return nil
}

// writeNewFiles creates every file with O_EXCL (never replacing one),
// mode 0644; if any cannot be written, the ones written are removed.
func writeNewFiles(files []keyset.NewFile) error {
	var written []string
	for _, f := range files {
		if err := createNew("--out-dir", f.Path, f.Data, 0o644, f.Path+" already exists: plan-rotation never replaces a file; move it away or choose another --out-dir"); err != nil {
			for _, p := range written {
				_ = os.Remove(p)
			}
			return err
		}
		written = append(written, f.Path)
	}
	return nil
}

// keysetRBACHint ends a publish's missing-permission error.
const keysetRBACHint = "`kubectl ql3 keyset rbac -n NAMESPACE` prints the least privilege"

type keysetPublishOptions struct {
	flags    *genericclioptions.ConfigFlags
	streams  genericiooptions.IOStreams
	read     keysetRead
	file     string
	previous string
	confirm  bool
}

// keysetPublishReport is publish's result.
type keysetPublishReport struct {
	File string `json:"file"`
	*keyset.Result
	// Note is the one thing publish cannot know.
	Note string `json:"note"`
}

func newCmdKeysetPublish(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &keysetPublishOptions{flags: flags, streams: streams}
	cmd := &cobra.Command{
		Use:   "publish FILE",
		Short: "Publish a keyset generation to a namespace through its durable ledger",
		Long: `Publish the keyset generation in FILE to the namespace (-n, or the kubeconfig's):
first the ledger Secret ` + keyset.LedgerSecret + ` (the highest
generation, the digest of every published generation, the revoked set and
the RFC 7638 thumbprints of the revoked keys),
then the keyset Secret ` + keyset.KeysetSecret + ` that the
management host mounts (key ` + keyset.KeysetKey + `). Each is a compare-and-swap write:
of concurrent publishers exactly one wins; a write whose answer was lost is
settled by reading it back.

Before anything is written, FILE is judged against the ledger alone (the
only memory left when every replica has restarted): a generation below the
highest (rollback), the highest generation with another digest (rewrite), an
active key dropped without being revoked, a revocation removed, or a key
that was ever revoked coming back under any key ID is refused (exit 3;
--confirm-overlap-observed does not change that). A keyset Secret holding a generation the ledger does not record is
tamper (exit 5). --previous FILE must be the ledger's highest generation (the
one the change was reviewed against); with no ledger yet it adopts a keyset
Secret created before the first publish.

A generation that revokes a key the published keyset still trusts needs
--confirm-overlap-observed: publish it only after every replica has observed
the overlap generation. publish never reports a revocation as in effect: a
replica applies it only once it has loaded the new generation.

If publish stops after the ledger write, rerun the same command: the ledger
already records FILE and the keyset Secret is brought to it. A ledger
written before thumbprints were recorded is carried forward by the next
publish; revoked key IDs whose key it cannot know are listed. The rules are in
docs/keyset.md; the permissions in "kubectl ql3 keyset rbac".`,
		Example: `  kubectl ql3 keyset publish ./keyset-8.json -n ql3-system --previous ./keyset-7.json
  kubectl ql3 keyset publish ./keyset-9.json -n ql3-system --previous ./keyset-8.json --confirm-overlap-observed -o json`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.file = args[0]
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	o.read.add(f)
	f.StringVar(&o.previous, "previous", "", "the generation `FILE` the ledger is expected to hold as its highest (or, with no ledger, the one to adopt)")
	f.BoolVar(&o.confirm, "confirm-overlap-observed", false, "confirm that every replica has observed the overlap generation, so FILE may revoke the keys it replaces")
	registerOutputCompletion(cmd, "json", "yaml")
	return cmd
}

func (o *keysetPublishOptions) Validate() error { return o.read.validate() }

func (o *keysetPublishOptions) Run(ctx context.Context) error {
	next, abs, err := o.read.read("", o.file)
	if err != nil {
		return err
	}
	req := keyset.Request{Next: next, ConfirmOverlapObserved: o.confirm}
	if o.previous != "" {
		if req.Previous, _, err = o.read.read("--previous: ", o.previous); err != nil {
			return err
		}
	}
	ns, err := namespace(o.flags)
	if err != nil {
		return err
	}
	cs, err := clientset(o.flags)
	if err != nil {
		return err
	}
	res, err := keyset.Publish(ctx, keyset.Options{
		Namespace: ns, Secrets: cs.CoreV1().Secrets(ns), Review: access.NewReview(access.NewReviewer(cs)), Hint: keysetRBACHint,
		Say: func(format string, args ...any) { fmt.Fprintf(o.streams.ErrOut, format+"\n", args...) },
	}, req)
	if err != nil {
		return err
	}
	rep := keysetPublishReport{File: abs, Result: res, Note: publishNote(res)}
	if o.read.output != "" {
		return printObject(o.streams.Out, o.read.output, rep)
	}
	printKeysetPublish(o.streams.Out, rep)
	return nil
}

// publishNote says what publish cannot observe.
func publishNote(res *keyset.Result) string {
	n := fmt.Sprintf("replicas load generation %d when the kubelet refreshes their Secret volume; publish cannot observe which have", res.Generation)
	if len(res.NewlyRevoked) > 0 {
		n += fmt.Sprintf("; %s is revoked on a replica only once it has loaded generation %d, so the revocation is not known to be in effect cluster-wide", strings.Join(res.NewlyRevoked, ", "), res.Generation)
	}
	return n
}

func printKeysetPublish(w io.Writer, rep keysetPublishReport) {
	fmt.Fprintf(w, "%s: generation %d (digest %s) in namespace %s\n", rep.File, rep.Generation, rep.Digest, rep.Namespace)
	for _, s := range []struct {
		what string
		r    keyset.SecretResult
	}{{"ledger", rep.Ledger}, {"keyset", rep.Keyset}} {
		settled := ""
		if s.r.Settled {
			settled = " (the answer was lost; settled by reading it back)"
		}
		fmt.Fprintf(w, "  %-7s secret/%s: %s%s\n", s.what, s.r.Name, s.r.Action, settled)
	}
	fmt.Fprintf(w, "ledger records %d generation(s)", rep.LedgerGenerations)
	if rep.Adopted {
		fmt.Fprint(w, ", starting with the adopted --previous")
	}
	if rep.Converged {
		fmt.Fprint(w, "; the keyset Secret was behind the ledger and now holds its highest generation")
	}
	if rep.LedgerCarriedForward {
		fmt.Fprint(w, "; carried forward from a ledger written before thumbprints were recorded")
	}
	fmt.Fprintln(w)
	if len(rep.RevokedWithoutThumbprint) > 0 {
		fmt.Fprintf(w, "revoked without a known key (refused by key ID only, not by thumbprint): %s\n", strings.Join(rep.RevokedWithoutThumbprint, ", "))
	}
	fmt.Fprintf(w, "note: %s\n", rep.Note)
}

type keysetRBACOptions struct {
	flags     *genericclioptions.ConfigFlags
	streams   genericiooptions.IOStreams
	bindUser  string
	bindGroup string
	output    string
}

func newCmdKeysetRBAC(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &keysetRBACOptions{flags: flags, streams: streams}
	cmd := &cobra.Command{
		Use:   "rbac",
		Short: "Print the least-privilege Role for keyset publish in a namespace",
		Long: `Print the Role (and, with --bind-user or --bind-group, its RoleBinding) that
"kubectl ql3 keyset publish" needs in the namespace (-n, or the kubeconfig's):
get and update on the Secrets ` + keyset.LedgerSecret + ` and
` + keyset.KeysetSecret + ` by name, and create on Secrets.

Create cannot be limited by name: a create request carries no name in its
URL, so RBAC ignores resourceNames for it, and the Role lets its holder create
any Secret in the namespace. Publish needs create only for the first
publish; drop that rule once both Secrets exist. No list, watch, patch or
delete is needed. Publish also asks the API server whether it may
(SelfSubjectAccessReview, granted to every authenticated user by the default
system:basic-user ClusterRole). Nothing here contacts the cluster.`,
		Example: `  kubectl ql3 keyset rbac -n ql3-system --bind-user keyset-publisher | kubectl apply -f -`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateOutput(o.output); err != nil {
				return err
			}
			return o.Run()
		},
	}
	cmd.Flags().StringVar(&o.bindUser, "bind-user", "", "also print a binding of the Role to the user `NAME`")
	cmd.Flags().StringVar(&o.bindGroup, "bind-group", "", "also print a binding of the Role to the group `NAME`")
	cmd.Flags().StringVarP(&o.output, "output", "o", "yaml", outputUsage()+"; yaml is a multi-document stream, the others see a v1 List")
	registerOutputCompletion(cmd)
	return cmd
}

func (o *keysetRBACOptions) Run() error {
	ns, err := namespace(o.flags)
	if err != nil {
		return err
	}
	if ns == "" {
		return fail.Errorf(fail.Invalid, "no namespace: give -n NAMESPACE")
	}
	objs := keyset.RBAC(ns, keyset.Subject{User: o.bindUser, Group: o.bindGroup})
	return printRBAC(o.streams.Out, o.output, objs)
}
