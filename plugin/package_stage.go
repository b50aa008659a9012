package plugin

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/qinglong/kubectl-ql3/ceremony/package/stagelayout"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/safefile"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// StagedReport is what `kubectl ql3 package stage -o json|yaml` prints:
// the evidence an intent for the stage carries.
type StagedReport struct {
	// Layout is the layout directory written.
	Layout string `json:"layout"`
	// Evidence is the five stage fields.
	Evidence stagelayout.Evidence `json:"evidence"`
}

type packageStageOptions struct {
	streams               genericiooptions.IOStreams
	layout, name, tag     string
	lock, bundle, adapter string
	signingKey, output    string
}

func newCmdPackageStage(streams genericiooptions.IOStreams) *cobra.Command {
	o := &packageStageOptions{streams: streams}
	cmd := &cobra.Command{
		Use:   "stage --layout DIR --name NAME --lock FILE --bundle FILE --signing-key FILE",
		Short: "Stage a package into an OCI image layout with a signed stage receipt, offline",
		Long: `Write a package stage into an OCI image layout directory: the package
manifest (the stage evidence as its config, the package lock and the bundle as
its two layers) and a stage receipt referring to it, whose statement is signed
with --signing-key (an Ed25519 private key, PKCS#8 PEM, owner-only:
openssl genpkey -algorithm ed25519 -out stage-key.pem). The layout is what
"package verify-stage", "package intent" and "package activate" read; copy it
with oras or skopeo to publish it. --layout is created, or an existing layout
gains the stage. Nothing is fetched or pushed.

The stage evidence (--evidence FILE) is what the stage records about where
the bundle came from; it is bound by digest and not interpreted. Without it the
canonical JSON {"adapter":"oci-layout","stagedBy":"kubectl-ql3 package stage"}
is written.

Exit 2: bad input (a missing file, an empty lock or bundle, a bad name or key,
a --layout directory that holds files but is not a layout). Exit 4: the layout
could not be written. The format is in docs/package-pointer.md.`,
		Example: `  openssl genpkey -algorithm ed25519 -out stage-key.pem
  openssl pkey -in stage-key.pem -pubout -out stage-key.pub.pem
  kubectl ql3 package stage --layout ./stage --name registry.example.com/qinglong/packages/demo \
    --lock package.lock.json --bundle bundle.tar.gz --signing-key "$PWD/stage-key.pem"`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateOutput(o.output, outputJSON, outputYAML); err != nil {
				return err
			}
			return o.Run()
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.layout, "layout", "", "OCI image layout directory `DIR` to write (created, or an existing layout)")
	f.StringVar(&o.name, "name", "", "repository `NAME` the stage reference carries (NAME@<manifest digest>)")
	f.StringVar(&o.tag, "tag", "", "optional `TAG` for the package manifest in index.json (org.opencontainers.image.ref.name)")
	f.StringVar(&o.lock, "lock", "", "the package lock `FILE`")
	f.StringVar(&o.bundle, "bundle", "", "the package bundle `FILE` (tar+gzip; hashed, not interpreted)")
	f.StringVar(&o.adapter, "evidence", "", "optional stage evidence `FILE` (the manifest's config blob)")
	f.StringVar(&o.signingKey, "signing-key", "", "Ed25519 private key `FILE` (PKCS#8 PEM, owner-only) that signs the stage receipt")
	f.StringVarP(&o.output, "output", "o", "", outputUsage(outputJSON, outputYAML))
	for _, name := range []string{"layout", "name", "lock", "bundle", "signing-key"} {
		_ = cmd.MarkFlagRequired(name)
	}
	_ = cmd.MarkFlagDirname("layout")
	registerOutputCompletion(cmd, outputJSON, outputYAML)
	return cmd
}

func (o *packageStageOptions) Run() error {
	key, err := receipts.LoadSigningKey(o.signingKey)
	if err != nil {
		return fmt.Errorf("--signing-key: %w", err)
	}
	p := stagelayout.Package{Name: o.name, Tag: o.tag}
	if p.Lock, err = readBounded(o.lock, 1<<20); err != nil {
		return fail.Errorf(fail.Invalid, "--lock %s: %w", o.lock, err)
	}
	bundle, err := safefile.OpenRegular(o.bundle)
	if err != nil {
		return fail.Errorf(fail.Invalid, "--bundle %s: %w", o.bundle, err)
	}
	defer bundle.Close()
	fi, err := bundle.Stat()
	if err != nil {
		return fail.Errorf(fail.Invalid, "--bundle %s: %w", o.bundle, err)
	}
	if fi.Size() == 0 {
		return fail.Errorf(fail.Invalid, "--bundle %s: the bundle must not be empty", o.bundle)
	}
	p.Bundle = bundle // streamed into the layout, hashed while copied
	if o.adapter == "" {
		p.Evidence, err = canon.Canonical(map[string]string{"adapter": "oci-layout", "stagedBy": "kubectl-ql3 package stage"})
	} else {
		p.Evidence, err = readBounded(o.adapter, 1<<20)
	}
	if err != nil {
		return fail.Errorf(fail.Invalid, "--evidence %s: %w", o.adapter, err)
	}
	staged, err := stagelayout.WritePackage(o.layout, p)
	if err != nil {
		return err
	}
	st := staged.Statement()
	signed, err := st.Sign(key)
	if err != nil {
		return err
	}
	if _, err := stagelayout.AttachReceipt(o.layout, staged, signed, staged.Manifest, staged.Evidence.LockDigest); err != nil {
		return err
	}
	if _, err := stagelayout.AttachAttestation(o.layout, staged, signed, key); err != nil {
		return err
	}
	return printStaged(o.streams.Out, o.output, StagedReport{Layout: o.layout, Evidence: staged.Evidence})
}

func printStaged(w io.Writer, output string, rep StagedReport) error {
	if output != "" {
		return printObject(w, output, rep)
	}
	ev := rep.Evidence
	_, err := fmt.Fprintf(w, "staged %s in %s\n  lockDigest             %s\n  stageReceiptDigest     %s\n  adapterEvidenceDigest  %s\n  contentDigest          %s\n",
		ev.StageReference, rep.Layout, ev.LockDigest, ev.StageReceiptDigest, ev.AdapterEvidenceDigest, ev.ContentDigest)
	return err
}
