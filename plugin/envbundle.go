package plugin

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/qinglong/kubectl-ql3/formats/envcarrier"
	"github.com/qinglong/kubectl-ql3/internal/fail"
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

func newCmdEnvBundle(streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "env-bundle",
		Short: "Pack and verify environment bundles (qinglong/environment-bundle@v1)",
		Long: `An environment bundle carries a task's environment variables as one opaque
Secret value: canonical JSON of at most 256 {name,value} entries (docs/env-bundle.md).
No command prints, logs or writes a name or a value anywhere but the bundle
file itself; reports hold counts and sizes only.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCmdEnvBundlePack(streams), newCmdEnvBundleVerify(streams))
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
	} else if err := writeEnvBundle(o.out, b.Bytes()); err != nil {
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

// readEnvBundleFile reads a file of at most envBundleMaxInput bytes; flag
// names the file in errors.
func readEnvBundleFile(path, flag string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "%s: %w", flag, err)
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

// writeEnvBundle writes data to a new file at path: O_EXCL, mode 0600, no
// temporary file. A failed write removes the partial file.
func writeEnvBundle(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fail.Errorf(fail.Invalid, "--out %s already exists: pack never replaces a file; move it away or choose another path", path)
	}
	if err != nil {
		return fail.Errorf(fail.Invalid, "--out: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fail.Errorf(fail.Unavailable, "write %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync() // make the new name durable; best effort
		d.Close()
	}
	return nil
}
