package plugin

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// InventoryReport is what `kubectl ql3 render --inventory` prints: the
// release's inventory and the digests a lock would bind.
type InventoryReport struct {
	ControlNamespace string                          `json:"controlNamespace"`
	Roles            map[string][]inventory.Identity `json:"roles"`
	Images           []string                        `json:"images"`
	Source           inventory.LockSource            `json:"source"`
	Render           inventory.LockRender            `json:"render"`
	// Helm is what a lock's helm section would bind; absent without charts.
	Helm *inventory.LockHelm `json:"helm,omitempty"`
}

func newInventoryReport(r *inventory.Release) InventoryReport {
	return InventoryReport{
		ControlNamespace: r.ControlNamespace,
		Roles:            r.Roles,
		Images:           r.Images,
		Source:           inventory.LockSource{Digest: r.SourceDigest, Files: r.Sources},
		Render: inventory.LockRender{
			Digest:              r.RenderDigest,
			InventoryDigest:     r.InventoryDigest,
			Count:               len(r.Inventory),
			SecretValuesCovered: r.SecretValuesCovered,
			Inventory:           r.Inventory,
		},
		Helm: r.Helm,
	}
}

type renderOptions struct {
	flags     *genericclioptions.ConfigFlags
	streams   genericiooptions.IOStreams
	secrets   secretFlags
	dir       string
	output    string
	inventory bool
	subject   string
	opts      inventory.Options
}

func newCmdRender(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &renderOptions{flags: flags, streams: streams}
	cmd := &cobra.Command{
		Use:   "render DIR",
		Short: "Render a release directory and print its inventory or its objects",
		Long: `Render the kustomization in DIR in-process, as kubectl kustomize does, check it
as kubectl ql3 lock would (identities, scope, pinned images, Secrets), and
print its inventory as a table. With -o, print the rendered objects instead
(yaml: a multi-document stream; json, name and the templates: a v1 List);
with --inventory, print the inventory, roles, images and digests, and for a
release with Helm charts what the lock's helm section would bind (YAML unless
another -o is given). With --subject NAME, write the exact bytes of the
deployment attestation's subject NAME for this release, whose SHA-256 is the
subject's digest (docs/receipts.md §7.2): kubectl-ql3/render/v1 (the release
as applied), kubectl-ql3/lock/v1 (the lock, checked against the release),
kubectl-ql3/inventory/v1, or kubectl-ql3/object/v1/GROUP/KIND/NAMESPACE/NAME.

Secret values are never printed: each is replaced by its keyed digest, or by
"<redacted>" without --secret-digest-key-file, exactly as the render digest
covers it.

Offline: kinds resolve through a built-in table and the release's CRDs unless
--context is given.`,
		Example: `  kubectl ql3 render releases/3.0.0
  kubectl ql3 render releases/3.0.0 -o yaml
  kubectl ql3 render releases/3.0.0 -o name
  kubectl ql3 render releases/3.0.0 --inventory -o jsonpath='{.render.inventoryDigest}'
  kubectl ql3 render releases/3.0.0 --subject kubectl-ql3/render/v1 > release.render`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.dir = args[0]
			if err := o.Validate(); err != nil {
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
	cmd.Flags().StringVarP(&o.output, "output", "o", "", outputUsage())
	cmd.Flags().BoolVar(&o.inventory, "inventory", false, "print the inventory, roles, images and digests instead of the objects")
	cmd.Flags().StringVar(&o.subject, "subject", "", "write the exact bytes of the deployment attestation subject `NAME` (kubectl-ql3/render/v1, kubectl-ql3/lock/v1, kubectl-ql3/inventory/v1, kubectl-ql3/object/v1/GROUP/KIND/NAMESPACE/NAME) instead of the objects")
	o.secrets.add(cmd.Flags())
	registerOutputCompletion(cmd)
	return cmd
}

func (o *renderOptions) Validate() error {
	if err := validateOutput(o.output); err != nil {
		return err
	}
	if o.subject != "" && (o.output != "" || o.inventory) {
		return fail.Errorf(fail.Invalid, "--subject writes one subject's bytes: drop -o and --inventory")
	}
	return o.secrets.validate()
}

func (o *renderOptions) Run() error {
	rel, err := inventory.Render(filesys.MakeFsOnDisk(), o.dir, o.opts)
	if err != nil {
		return err
	}
	w := o.streams.Out
	switch {
	case o.subject != "":
		data, err := subjectBytes(rel, o.dir, o.subject)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	case o.inventory:
		out := o.output
		if out == "" {
			out = "yaml"
		}
		return printObject(w, out, newInventoryReport(rel))
	case o.output == outputYAML:
		for i, obj := range rel.RedactedObjects() {
			data, err := yaml.Marshal(obj.Object)
			if err != nil {
				return fail.Errorf(fail.Other, "print %s: %w", rel.Inventory[i], err)
			}
			if i > 0 {
				if _, err := io.WriteString(w, "---\n"); err != nil {
					return err
				}
			}
			if _, err := w.Write(data); err != nil {
				return err
			}
		}
		return nil
	case o.output != "":
		items := make([]any, 0, len(rel.Inventory))
		for _, obj := range rel.RedactedObjects() {
			items = append(items, obj.Object)
		}
		return printObject(w, o.output, newObjectList(items))
	}
	return printInventoryTable(w, rel.Inventory)
}

func printInventoryTable(w io.Writer, ids []inventory.Identity) error {
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, "APIVERSION\tKIND\tNAMESPACE\tNAME")
	for _, id := range ids {
		ns := id.Namespace
		if ns == "" {
			ns = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", id.APIVersion, id.Kind, ns, id.Name)
	}
	return tw.Flush()
}

// subjectBytes is the file of the deployment attestation's subject name
// for the release rel in dir: the input of the digest it names
// (docs/receipts.md §7.2); the lock's only once it verifies against rel.
func subjectBytes(rel *inventory.Release, dir, name string) ([]byte, error) {
	switch name {
	case receipts.RenderSubject:
		return rel.RenderInput()
	case receipts.InventorySubject:
		return inventory.DigestInput(inventory.DomainInventory, rel.Inventory)
	case receipts.LockSubject:
		lock, err := inventory.ReadLock(filesys.MakeFsOnDisk(), dir)
		if err != nil {
			return nil, err
		}
		if err := inventory.VerifyLock(lock, rel); err != nil {
			return nil, err
		}
		return lock.DigestInput()
	}
	for i, id := range rel.Inventory {
		if receipts.ObjectSubject(id) == name {
			return rel.ObjectInput(i)
		}
	}
	return nil, fail.Errorf(fail.Invalid, "--subject %q: not a subject of this release; want %s, %s, %s or %sGROUP/KIND/NAMESPACE/NAME of an object it renders",
		name, receipts.RenderSubject, receipts.LockSubject, receipts.InventorySubject, receipts.ObjectSubjectPrefix)
}
