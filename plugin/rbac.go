package plugin

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/ceremony"
	"github.com/qinglong/kubectl-ql3/inventory"
)

type rbacOptions struct {
	flags     *genericclioptions.ConfigFlags
	streams   genericiooptions.IOStreams
	dir       string
	bindUser  string
	bindGroup string
	output    string
	secrets   secretFlags
}

func newCmdRBAC(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &rbacOptions{flags: flags, streams: streams}
	cmd := &cobra.Command{
		Use:   "rbac DIR",
		Short: "Print the least-privilege Roles and ClusterRole for running the ceremony on a release",
		Long: `Print the minimal RBAC for running preflight, apply, resume and rollback on the
release in DIR: get, create and update of the Head ConfigMap in the control
namespace only; get and patch (server-side apply and its dry-run) on exactly
the release's objects, by name; get on the kube-system Namespace (the cluster
identity). Nothing else. The kinds are resolved through the cluster's
discovery (--context), or from the release's own CRDs.
Namespaces named by the Roles must exist before the Roles are created.

No "list" is granted: RBAC cannot limit it by name, so it would reveal every
object of the kind in the namespace. Apply's convergence read then falls back
from one LIST per kind and namespace to one GET per object (same result, more
requests). Add "list" on the release's kinds yourself if you accept that
trade-off for a faster read-back of large releases (docs/head.md §6).`,
		Example: `  kubectl ql3 rbac ./release --bind-user ci-deployer | kubectl apply -f -`,
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.dir = args[0]
			if err := validateOutput(o.output); err != nil {
				return err
			}
			if err := o.secrets.validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&o.bindUser, "bind-user", "", "also print bindings of the roles to the user `NAME`")
	cmd.Flags().StringVar(&o.bindGroup, "bind-group", "", "also print bindings of the roles to the group `NAME`")
	o.secrets.add(cmd.Flags())
	cmd.Flags().StringVarP(&o.output, "output", "o", "yaml", outputUsage()+"; yaml is a multi-document stream, the others see a v1 List")
	registerOutputCompletion(cmd)
	return cmd
}

func (o *rbacOptions) Run(ctx context.Context) error {
	mapper, err := restMapper(o.flags)
	if err != nil {
		return err
	}
	opts, err := o.secrets.options()
	if err != nil {
		return err
	}
	opts.Mapper = mapper
	rel, lock, err := inventory.LoadRelease(filesys.MakeFsOnDisk(), o.dir, opts)
	if err != nil {
		return err
	}
	objs, err := ceremony.RBAC(rel.Objects, lock.Target.Namespace, mapper, ceremony.RBACSubject{User: o.bindUser, Group: o.bindGroup})
	if err != nil {
		return err
	}
	if o.output != outputYAML && o.output != "" {
		return printObject(o.streams.Out, o.output, newObjectList(objs))
	}
	for i, obj := range objs {
		out, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(o.streams.Out, "---")
		}
		o.streams.Out.Write(out)
	}
	return nil
}
