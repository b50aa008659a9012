package plugin

import (
	"crypto/ed25519"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/qinglong/kubectl-ql3/formats/intent"
	"github.com/qinglong/kubectl-ql3/formats/ocistage"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// newCmdPackage is `kubectl ql3 package`: plugin package activation.
// Only the offline stage check exists so far; activate, inspect, intent
// and rbac will join it on the CAS kernel.
func newCmdPackage(streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "package",
		Short: "Check plugin package activation intents and their stage evidence",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCmdPackageVerifyStage(streams))
	return cmd
}

// StageReport is what `kubectl ql3 package verify-stage -o json|yaml`
// prints for a verified stage.
type StageReport struct {
	// IntentDigest is the verified intent's digest.
	IntentDigest string `json:"intentDigest"`
	// Evidence is what the stage proves; it equals the intent's five
	// stage fields.
	Evidence ocistage.Evidence `json:"evidence"`
	// Pointer is where the intent's active pointer lives.
	Pointer intent.Naming `json:"pointer"`
}

type packageVerifyStageOptions struct {
	streams     genericiooptions.IOStreams
	intentFile  string
	layout      string
	trustedKeys []string
	allowRefs   []string
	output      string
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

Exit 4 (unavailable): the layout or a blob cannot be read intact, or has no
stage receipt yet; repair or complete it and rerun. Exit 3 (conflict): the
stage was read intact and does not prove the intent. Exit 2: bad input.
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
	f.StringVar(&o.layout, "layout", "", "OCI image layout directory `DIR` holding the stage")
	f.StringArrayVar(&o.trustedKeys, "trusted-key", nil, "`FILE` holding an Ed25519 public key (PKIX PEM) a stage receipt may be signed by (repeatable)")
	f.StringArrayVar(&o.allowRefs, "allow-ref", nil, "stage `REF` the intent may name: a repository NAME or NAME@sha256:<hex> (repeatable)")
	f.StringVarP(&o.output, "output", "o", "", outputUsage(outputJSON, outputYAML))
	for _, name := range []string{"intent", "layout", "trusted-key", "allow-ref"} {
		_ = cmd.MarkFlagRequired(name)
	}
	_ = cmd.MarkFlagDirname("layout")
	registerOutputCompletion(cmd, outputJSON, outputYAML)
	return cmd
}

// Validate checks the flags alone.
func (o *packageVerifyStageOptions) Validate() error {
	switch {
	case o.intentFile == "":
		return fail.Errorf(fail.Invalid, "--intent is required")
	case o.layout == "":
		return fail.Errorf(fail.Invalid, "--layout is required")
	case len(o.trustedKeys) == 0:
		return fail.Errorf(fail.Invalid, "--trusted-key is required: an unsigned stage proves nothing")
	case len(o.allowRefs) == 0:
		return fail.Errorf(fail.Invalid, "--allow-ref is required")
	}
	for _, a := range o.allowRefs {
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
	var keys []ed25519.PublicKey
	for _, file := range o.trustedKeys {
		data, err := readBounded(file, 64<<10)
		if err != nil {
			return fail.Errorf(fail.Invalid, "--trusted-key %s: %w", file, err)
		}
		k, err := ocistage.ParsePublicKey(file, data)
		if err != nil {
			return fmt.Errorf("--trusted-key: %w", err)
		}
		keys = append(keys, k)
	}
	v := &ocistage.Verifier{Layout: o.layout, TrustedKeys: keys, Allow: o.allowRefs}
	ev, err := v.Verify(in)
	if err != nil {
		return err
	}
	rep := StageReport{Evidence: ev}
	if rep.IntentDigest, err = intent.Digest(in); err != nil {
		return err
	}
	if rep.Pointer, err = intent.NamingOf(in); err != nil {
		return err
	}
	return printStageReport(o.streams.Out, o.output, rep)
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

// readBounded reads at most max bytes of file; a longer file is an error.
func readBounded(file string, max int64) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	return data, nil
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
