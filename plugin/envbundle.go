package plugin

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/envbundle"
	"github.com/qinglong/kubectl-ql3/ceremony/envbundle/envcarrier"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/safefile"
)

// envBundleMaxInput bounds what pack and verify read from a file or stdin
// (1 MiB): far above any valid carrier or useful dotenv file, small
// enough to hold in memory.
const envBundleMaxInput = 1 << 20

// EnvBundleReport is what env-bundle pack and verify print: counts and
// sizes only, never a name or a value.
type EnvBundleReport struct {
	// File is the carrier's path ("-" for standard output).
	File string `json:"file"`
	// Entries is the number of entries.
	Entries int `json:"entries"`
	// Bytes is the carrier's size.
	Bytes int `json:"bytes"`
	// NameValueBytes is the sum of the byte lengths of names and values.
	NameValueBytes int `json:"nameValueBytes"`
	// Merge is verify --against-env's check.
	Merge *envcarrier.MergeReport `json:"merge,omitempty"`
}

func newCmdEnvBundle(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "env-bundle",
		Short: "Pack, verify, publish and inspect environment bundles (qinglong/environment-bundle@v1)",
		Long: `An environment bundle carries a task's environment variables as one opaque
Secret value: canonical JSON of at most 256 {name,value} entries (docs/env-bundle.md).
pack and verify work on files and never contact a cluster; publish writes a
bundle as one Secret, inspect reports whether it exists and its version, and
rbac prints the permissions publish needs. No command prints, logs or writes a
name or a value anywhere but the bundle file and the Secret's data; reports
hold counts, sizes and versions only.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCmdEnvBundlePack(streams), newCmdEnvBundleVerify(streams),
		newCmdEnvBundlePublish(flags, streams), newCmdEnvBundleInspect(flags, streams), newCmdEnvBundleRBAC(flags, streams))
	return cmd
}

type envBundlePackOptions struct {
	streams genericiooptions.IOStreams
	dotenv  string
	jsonIn  bool
	out     string
	output  string
}

func newCmdEnvBundlePack(streams genericiooptions.IOStreams) *cobra.Command {
	o := &envBundlePackOptions{streams: streams}
	cmd := &cobra.Command{
		Use:   "pack (--from-dotenv FILE | --from-json-stdin) --out FILE",
		Short: "Pack a dotenv file or a JSON object into an environment bundle file",
		Long: `Pack environment variables into a new environment bundle file.

The input is a dotenv file (--from-dotenv; the subset in docs/env-bundle.md:
NAME=value lines, an optional "export " prefix, # comments, single and double
quotes; anything a shell could read differently is an error) or a JSON object
of string values on standard input (--from-json-stdin). Never put a value on
the command line.

The bundle is written to --out, a new file created with mode 0600 (an existing
file is never replaced, and no temporary file is made), or to standard output
with --out -, when the report goes to standard error. The report holds the
entry count and sizes only; errors name a line, a member or an entry by its
position and the rule it breaks, never a name or a value.`,
		Example: `  kubectl ql3 env-bundle pack --from-dotenv task.env --out task.bundle.json
  vault kv get -format=json -field=data secret/task | kubectl ql3 env-bundle pack --from-json-stdin --out task.bundle.json
  kubectl ql3 env-bundle pack --from-dotenv task.env --out - | kubectl create secret generic task-env --from-file=bundle.json=/dev/stdin`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run()
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dotenv, "from-dotenv", "", "dotenv `FILE` to pack")
	f.BoolVar(&o.jsonIn, "from-json-stdin", false, "pack the JSON object {\"NAME\": \"value\", …} read from standard input")
	f.StringVar(&o.out, "out", "", "new `FILE` to write the bundle to (mode 0600, never replaced); - for standard output (required)")
	f.StringVarP(&o.output, "output", "o", "", outputUsage(outputJSON, outputYAML))
	cmd.MarkFlagsMutuallyExclusive("from-dotenv", "from-json-stdin")
	cmd.MarkFlagsOneRequired("from-dotenv", "from-json-stdin")
	_ = cmd.MarkFlagRequired("out")
	registerOutputCompletion(cmd, outputJSON, outputYAML)
	return cmd
}

func (o *envBundlePackOptions) Validate() error {
	if o.out == "" {
		return fail.Errorf(fail.Invalid, "--out: give a new file, or - for standard output")
	}
	return validateOutput(o.output, outputJSON, outputYAML)
}

func (o *envBundlePackOptions) Run() error {
	var b *envcarrier.Bundle
	if o.jsonIn {
		data, err := readEnvBundleInput(o.streams.In, "standard input")
		if err != nil {
			return err
		}
		b, err = envcarrier.PackJSON(data)
		clear(data) // best effort: the bundle holds its own copies
		if err != nil {
			return fmt.Errorf("--from-json-stdin: %w", err)
		}
	} else {
		data, err := readEnvBundleFile(o.dotenv, "--from-dotenv")
		if err != nil {
			return err
		}
		b, err = envcarrier.PackDotenv(data)
		clear(data)
		if err != nil {
			return fmt.Errorf("--from-dotenv %s: %w", o.dotenv, err)
		}
	}
	report := o.streams.Out
	if o.out == "-" {
		if _, err := o.streams.Out.Write(b.Bytes()); err != nil {
			return fail.Errorf(fail.Unavailable, "write the bundle to standard output: %w", err)
		}
		report = o.streams.ErrOut
	} else if err := createNew("--out", o.out, b.Bytes(), 0o600, "--out "+o.out+" already exists: pack never replaces a file; move it away or choose another path"); err != nil {
		return err
	}
	rep := EnvBundleReport{File: o.out, Entries: b.Len(), Bytes: b.Size(), NameValueBytes: b.NameValueBytes()}
	if o.output != "" {
		return printObject(report, o.output, rep)
	}
	_, err := fmt.Fprintf(report, "packed %d entries into %s: %d bytes (names and values %d bytes)\n", rep.Entries, rep.File, rep.Bytes, rep.NameValueBytes)
	return err
}

type envBundleVerifyOptions struct {
	streams    genericiooptions.IOStreams
	file       string
	againstEnv string
	output     string
}

func newCmdEnvBundleVerify(streams genericiooptions.IOStreams) *cobra.Command {
	o := &envBundleVerifyOptions{streams: streams}
	cmd := &cobra.Command{
		Use:   "verify FILE",
		Short: "Check an environment bundle file against every rule of the format",
		Long: `Check that FILE is an environment bundle exactly as pack writes it: every rule
of docs/env-bundle.md, including byte equality with the RFC 8785 canonical
form. With --against-env, also merge it with a task's own variable names (a
file of names, one per line): a name in both, or a merged environment of more
than 256 entries or 64 KiB of names and values, is an error. The task's own
values are not known here, so the merged size is a lower bound.

The report holds counts and sizes only; errors name an entry by its position
or a byte offset and the rule it breaks, never a name or a value. A bundle
that breaks a rule exits "invalid" (2).`,
		Example: `  kubectl ql3 env-bundle verify task.bundle.json
  kubectl ql3 env-bundle verify task.bundle.json --against-env task.names -o json`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.file = args[0]
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run()
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.againstEnv, "against-env", "", "`FILE` of the task's own variable names, one per line, to check the merged environment against")
	f.StringVarP(&o.output, "output", "o", "", outputUsage(outputJSON, outputYAML))
	registerOutputCompletion(cmd, outputJSON, outputYAML)
	return cmd
}

func (o *envBundleVerifyOptions) Validate() error {
	return validateOutput(o.output, outputJSON, outputYAML)
}

func (o *envBundleVerifyOptions) Run() error {
	var names []string
	if o.againstEnv != "" {
		data, err := readEnvBundleFile(o.againstEnv, "--against-env")
		if err != nil {
			return err
		}
		if names, err = envcarrier.ParseNames(data); err != nil {
			return fmt.Errorf("--against-env %s: %w", o.againstEnv, err)
		}
	}
	data, err := readEnvBundleFile(o.file, "verify")
	if err != nil {
		return err
	}
	b, err := envcarrier.Parse(data)
	clear(data)
	if err != nil {
		return fmt.Errorf("%s: %w", o.file, err)
	}
	rep := EnvBundleReport{File: o.file, Entries: b.Len(), Bytes: b.Size(), NameValueBytes: b.NameValueBytes()}
	var mergeErr error
	if o.againstEnv != "" {
		m, err := envcarrier.CheckMerge(b, names)
		rep.Merge, mergeErr = &m, err
	}
	if o.output != "" {
		if err := printObject(o.streams.Out, o.output, rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(o.streams.Out, "%s: a valid environment bundle of %d entries, %d bytes (names and values %d bytes)\n", rep.File, rep.Entries, rep.Bytes, rep.NameValueBytes)
		if m := rep.Merge; m != nil {
			fmt.Fprintf(o.streams.Out, "merged with %d task names: %d collisions, %d entries, names and values at least %d bytes\n", m.TaskNames, m.Collisions, m.MergedEntries, m.MergedNameValueBytesAtLeast)
		}
	}
	if mergeErr != nil {
		return fmt.Errorf("%s --against-env %s: %w", o.file, o.againstEnv, mergeErr)
	}
	return nil
}

// readEnvBundleFile reads a regular file of at most envBundleMaxInput
// bytes (safefile.OpenRegular: a named pipe is refused, never waited on);
// flag names the file in errors.
func readEnvBundleFile(path, flag string) ([]byte, error) {
	f, err := safefile.OpenRegular(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	defer f.Close()
	return readEnvBundleInput(f, path)
}

// readEnvBundleInput reads r (named what in errors) up to
// envBundleMaxInput bytes.
func readEnvBundleInput(r io.Reader, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, envBundleMaxInput+1))
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "read %s: %w", what, err)
	}
	if len(data) > envBundleMaxInput {
		return nil, fail.Errorf(fail.Invalid, "%s: more than %d bytes; an environment bundle (or its input) is far smaller", what, envBundleMaxInput)
	}
	return data, nil
}

// envBundleRBACHint ends a publish's missing-permission error.
const envBundleRBACHint = "`kubectl ql3 env-bundle rbac -n NAMESPACE --name NAME` prints the least privilege"

// envBundleTarget are the flags naming the bundle Secret: -n (the root's)
// and --name.
type envBundleTarget struct {
	flags *genericclioptions.ConfigFlags
	name  string
}

// resolve returns the namespace (-n, or the kubeconfig's) after checking
// --name; both are required.
func (t *envBundleTarget) resolve() (string, error) {
	if err := envbundle.ValidateName("--name", t.name); err != nil {
		return "", err
	}
	ns, err := namespace(t.flags)
	if err != nil {
		return "", err
	}
	if ns == "" {
		return "", fail.Errorf(fail.Invalid, "no namespace: give -n NAMESPACE")
	}
	return ns, nil
}

// options resolves the target and its clients.
func (t *envBundleTarget) options(errOut io.Writer) (envbundle.Options, error) {
	ns, err := t.resolve()
	if err != nil {
		return envbundle.Options{}, err
	}
	cs, err := clientset(t.flags)
	if err != nil {
		return envbundle.Options{}, err
	}
	return envbundle.Options{
		Namespace: ns, Name: t.name, Secrets: cs.CoreV1().Secrets(ns), Review: access.NewReview(access.NewReviewer(cs)), Hint: envBundleRBACHint,
		Say: func(format string, args ...any) { fmt.Fprintf(errOut, format+"\n", args...) },
	}, nil
}

type envBundlePublishOptions struct {
	streams  genericiooptions.IOStreams
	target   envBundleTarget
	file     string
	expected string
	output   string
}

// EnvBundlePublishReport is what env-bundle publish prints: where, what
// it did and the version now, never content.
type EnvBundlePublishReport struct {
	// File is the carrier published.
	File string `json:"file"`
	*envbundle.Result
}

func newCmdEnvBundlePublish(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &envBundlePublishOptions{streams: streams, target: envBundleTarget{flags: flags}}
	cmd := &cobra.Command{
		Use:   "publish FILE --name NAME [--expected-version VERSION]",
		Short: "Publish an environment bundle file as one Secret (compare-and-swap)",
		Long: `Publish the environment bundle in FILE (checked by every rule of verify first)
as the Secret --name in the namespace (-n, or the kubeconfig's): type Opaque,
the carrier byte for byte under the one key ` + envbundle.Key + `, and the labels
` + envbundle.LabelManagedBy + `=` + envbundle.ManagedBy + ` and ` + envbundle.LabelRole + `=` + envbundle.Role + `
(advisory only: a consumer knows the role from its own reference). The Secret's
metadata never holds an entry count, a name or a digest of the content.

The first publish creates the Secret. A later publish must name the state it
replaces: --expected-version, the version printed by the previous publish or
by "env-bundle inspect"; the Secret is updated carrying exactly that
resourceVersion, so a consumer's mounted projection sees the new bundle under
the same name. A Secret that already holds exactly FILE's bundle is a replay:
nothing is written, exit 0. Anything else — another bundle without
--expected-version, a version that is not the current one, a version for a
Secret that is gone — is a conflict (exit 3) and nothing is written.

A write whose answer is lost (a broken connection, --request-timeout, 5xx) is
settled by reading the Secret back: it holds the bundle (success, "settled"),
another writer moved it (conflict), or nothing changed and the same
compare-and-swap is sent again (at most 3 times, then exit 4: nothing was
written, rerunning is safe). A Secret of that name that publish did not write
is never adopted (exit 2); one that was changed behind its back is tamper
(exit 5). Publish first asks the API server whether it may (exit 2, listing
what is missing); "env-bundle rbac" prints the least privilege.`,
		Example: `  kubectl ql3 env-bundle publish task.bundle.json -n tasks --name task-42-env
  kubectl ql3 env-bundle publish task.bundle.json -n tasks --name task-42-env --expected-version 81723 -o json`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.file = args[0]
			if err := validateOutput(o.output, outputJSON, outputYAML); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.target.name, "name", "", "the bundle Secret's `NAME` (required)")
	f.StringVar(&o.expected, "expected-version", "", "the `VERSION` (resourceVersion) of the bundle this publish replaces, as the previous publish or inspect printed it")
	f.StringVarP(&o.output, "output", "o", "", outputUsage(outputJSON, outputYAML))
	_ = cmd.MarkFlagRequired("name")
	registerOutputCompletion(cmd, outputJSON, outputYAML)
	return cmd
}

func (o *envBundlePublishOptions) Run(ctx context.Context) error {
	if _, err := o.target.resolve(); err != nil {
		return err
	}
	data, err := readEnvBundleFile(o.file, "publish")
	if err != nil {
		return err
	}
	b, err := envcarrier.Parse(data)
	clear(data)
	if err != nil {
		return fmt.Errorf("%s: %w", o.file, err)
	}
	opts, err := o.target.options(o.streams.ErrOut)
	if err != nil {
		return err
	}
	res, err := envbundle.Publish(ctx, opts, b, o.expected)
	if err != nil {
		return err
	}
	rep := EnvBundlePublishReport{File: o.file, Result: res}
	if o.output != "" {
		return printObject(o.streams.Out, o.output, rep)
	}
	settled := ""
	if res.Settled {
		settled = " (the answer was lost; settled by reading it back)"
	}
	fmt.Fprintf(o.streams.Out, "secret/%s in namespace %s: %s%s, version %s\n", res.Name, res.Namespace, res.Action, settled, res.ResourceVersion)
	fmt.Fprintf(o.streams.Out, "the next publish replacing it: --expected-version %s\n", res.ResourceVersion)
	return nil
}

type envBundleInspectOptions struct {
	streams genericiooptions.IOStreams
	target  envBundleTarget
	output  string
}

func newCmdEnvBundleInspect(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &envBundleInspectOptions{streams: streams, target: envBundleTarget{flags: flags}}
	cmd := &cobra.Command{
		Use:   "inspect --name NAME",
		Short: "Report whether an environment bundle Secret exists, and its version",
		Long: `Read the bundle Secret --name in the namespace (-n, or the kubeconfig's) once
and report whether it is present and its version (resourceVersion: the
--expected-version of the next publish). Nothing of the content is printed.

Exit codes: 0 present and a valid bundle Secret, or absent; 2 a Secret of
that name that publish did not write; 5 a bundle Secret changed outside
publish (its version is still reported). It needs only get on that Secret.`,
		Example: `  kubectl ql3 env-bundle inspect -n tasks --name task-42-env
  kubectl ql3 env-bundle inspect -n tasks --name task-42-env -o jsonpath='{.resourceVersion}'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateOutput(o.output, outputJSON, outputYAML); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.target.name, "name", "", "the bundle Secret's `NAME` (required)")
	f.StringVarP(&o.output, "output", "o", "", outputUsage(outputJSON, outputYAML))
	_ = cmd.MarkFlagRequired("name")
	registerOutputCompletion(cmd, outputJSON, outputYAML)
	return cmd
}

func (o *envBundleInspectOptions) Run(ctx context.Context) error {
	opts, err := o.target.options(o.streams.ErrOut)
	if err != nil {
		return err
	}
	st, err := envbundle.Inspect(ctx, opts)
	if st == nil {
		return err
	}
	if o.output != "" {
		if perr := printObject(o.streams.Out, o.output, st); perr != nil {
			return perr
		}
		return err
	}
	if st.Present {
		fmt.Fprintf(o.streams.Out, "secret/%s in namespace %s: present, version %s\n", st.Name, st.Namespace, st.ResourceVersion)
	} else {
		fmt.Fprintf(o.streams.Out, "secret/%s in namespace %s: absent (the first publish creates it, without --expected-version)\n", st.Name, st.Namespace)
	}
	return err
}

type envBundleRBACOptions struct {
	streams   genericiooptions.IOStreams
	target    envBundleTarget
	bindUser  string
	bindGroup string
	output    string
}

func newCmdEnvBundleRBAC(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &envBundleRBACOptions{streams: streams, target: envBundleTarget{flags: flags}}
	cmd := &cobra.Command{
		Use:   "rbac --name NAME",
		Short: "Print the least-privilege Role for env-bundle publish of one Secret",
		Long: `Print the Role ` + envbundle.RolePrefix + `NAME (and, with --bind-user or --bind-group, its
RoleBinding) that "kubectl ql3 env-bundle publish" of the Secret --name needs in
the namespace (-n, or the kubeconfig's): get and update on that Secret by
name, and create on Secrets. inspect needs only the get.

Create cannot be limited by name: a create request carries no name in its
URL, so RBAC ignores resourceNames for it, and the Role lets its holder create
any Secret in the namespace. Publish needs create only for the first
publish; drop that rule once the Secret exists. No list, watch, patch or
delete is needed. Publish also asks the API server whether it may
(SelfSubjectAccessReview, granted to every authenticated user by the default
system:basic-user ClusterRole). Nothing here contacts the cluster.`,
		Example: `  kubectl ql3 env-bundle rbac -n tasks --name task-42-env --bind-user env-publisher | kubectl apply -f -`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateOutput(o.output); err != nil {
				return err
			}
			return o.Run()
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.target.name, "name", "", "the bundle Secret's `NAME` (required)")
	f.StringVar(&o.bindUser, "bind-user", "", "also print a binding of the Role to the user `NAME`")
	f.StringVar(&o.bindGroup, "bind-group", "", "also print a binding of the Role to the group `NAME`")
	f.StringVarP(&o.output, "output", "o", "yaml", outputUsage()+"; yaml is a multi-document stream, the others see a v1 List")
	_ = cmd.MarkFlagRequired("name")
	registerOutputCompletion(cmd)
	return cmd
}

func (o *envBundleRBACOptions) Run() error {
	ns, err := o.target.resolve()
	if err != nil {
		return err
	}
	objs, err := envbundle.RBAC(ns, o.target.name, envbundle.Subject{User: o.bindUser, Group: o.bindGroup})
	if err != nil {
		return err
	}
	return printRBAC(o.streams.Out, o.output, objs)
}
