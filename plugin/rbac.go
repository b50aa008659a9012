package plugin

import (
	"context"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/approval"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

type rbacOptions struct {
	flags     *genericclioptions.ConfigFlags
	streams   genericiooptions.IOStreams
	dir       string
	bindUser  string
	bindGroup string
	output    string
	secrets   secretFlags
	retireOld string
	role      string
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
trade-off for a faster read-back of large releases (docs/head.md §6).

No "delete" is granted, except with --retire-from DIR_OLD (the deployed
release a retire to DIR starts from): then get and delete on exactly the
objects DIR_OLD has and DIR has not, by name (docs/ceremony.md §11).

The roles are named after the release (kubectl-ql3-deployer:CONTROL_NS), each
binding after its role and a hash of its subjects: prints for other users or
releases add objects and never rewrite these (docs/ceremony.md §12).`,
		Example: `  kubectl ql3 rbac ./release --bind-user ci-deployer | kubectl apply -f -
  kubectl ql3 rbac ./release-3.2.0 --retire-from ./release-3.1.0 --bind-user ci-deployer`,
		Args: cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validateRole(args); err != nil {
				return err
			}
			if o.role != "" {
				return o.runRole()
			}
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
	cmd.Flags().StringVar(&o.retireOld, "retire-from", "", "also grant get and delete, by name, on each object the deployed release `DIR_OLD` has and DIR has not (a retire)")
	cmd.Flags().StringVar(&o.role, "role", "", "print instead the two-person rule's `ROLE` in the namespace -n: "+strings.Join(approval.Roles, ", ")+" (no DIR; docs/approval.md)")
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
	objs, err := deploy.ReleaseRBAC(filesys.MakeFsOnDisk(), o.dir, o.retireOld, opts, deploy.RBACSubject{User: o.bindUser, Group: o.bindGroup})
	if err != nil {
		return err
	}
	return printRBAC(o.streams.Out, o.output, objs)
}

// validateRole: DIR without --role, --role without DIR (or --retire-from).
func (o *rbacOptions) validateRole(args []string) error {
	switch {
	case o.role == "" && len(args) != 1:
		return fail.Errorf(fail.Invalid, "rbac takes the release DIR (or --role %s without DIR)", strings.Join(approval.Roles, "|"))
	case o.role != "" && (len(args) != 0 || o.retireOld != ""):
		return fail.Errorf(fail.Invalid, "--role %q takes no DIR and no --retire-from", o.role)
	}
	return nil
}

// runRole prints an approval role for the namespace -n.
func (o *rbacOptions) runRole() error {
	if err := validateOutput(o.output); err != nil {
		return err
	}
	ns, err := namespace(o.flags)
	if err != nil {
		return err
	}
	objs, err := approval.RBAC(o.role, ns, access.Subject{User: o.bindUser, Group: o.bindGroup})
	if err != nil {
		return err
	}
	return printRBAC(o.streams.Out, o.output, objs)
}
