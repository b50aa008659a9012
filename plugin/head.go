package plugin

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// HeadReport is what `kubectl ql3 head -o json|yaml|jsonpath=…` prints.
type HeadReport struct {
	Namespace    string       `json:"namespace"`
	Present      bool         `json:"present"`
	ExpectedHead string       `json:"expectedHead"`
	Head         *deploy.Head `json:"head,omitempty"`
}

type headOptions struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	output  string
}

func newCmdHead(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &headOptions{flags: flags, streams: streams}
	cmd := &cobra.Command{
		Use:   "head",
		Short: "Show the deployment Head of a namespace and the expected-Head token for the next preflight",
		Long: `Show the Head ConfigMap (qinglong3-deployment-head) of the target namespace
(-n, or the kubeconfig's namespace), validated: a tampered Head is reported
with exit code 5 and never repaired. The last line is the expected-Head token
to paste into the next "kubectl ql3 preflight --expected-head".`,
		Example: `  kubectl ql3 head -n ql3-demo
  kubectl ql3 head -n ql3-demo -o jsonpath='{.expectedHead}'
  kubectl ql3 head -n ql3-demo -o name   # configmap/qinglong3-deployment-head, or nothing`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateOutput(o.output); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", outputUsage())
	registerOutputCompletion(cmd)
	return cmd
}

func (o *headOptions) Run(ctx context.Context) error {
	ns, err := namespace(o.flags)
	if err != nil {
		return err
	}
	cfg, err := restConfig(o.flags)
	if err != nil {
		return err
	}
	cl, err := deploy.NewKubeCluster(cfg)
	if err != nil {
		return fail.Errorf(fail.Invalid, "kubeconfig: %w", err)
	}
	h, err := deploy.ReadHead(ctx, cl, ns)
	if err != nil {
		return err
	}
	rep := HeadReport{Namespace: ns, Present: h != nil, ExpectedHead: h.Expected().String(), Head: h}
	if o.output != "" {
		return printObject(o.streams.Out, o.output, rep)
	}
	printHead(o.streams.Out, rep)
	return nil
}

func printHead(w io.Writer, rep HeadReport) {
	h := rep.Head
	if h == nil {
		fmt.Fprintf(w, "Namespace:   %s\nHead:        absent (no deployment yet)\n", rep.Namespace)
	} else {
		fmt.Fprintf(w, "Namespace:   %s\nGeneration:  %d (%s)\n", rep.Namespace, h.Generation, h.Phase)
		fmt.Fprintf(w, "Transition:  %s (mutation %s)\n", h.Transition.Kind, h.Transition.MutationID)
		fmt.Fprintf(w, "Current:     %s, %d objects, lock %s\n", h.Current.Version, h.Current.InventoryCount, h.Current.LockDigest)
		if h.Previous != nil {
			fmt.Fprintf(w, "Previous:    %s, %d objects, lock %s\n", h.Previous.Version, h.Previous.InventoryCount, h.Previous.LockDigest)
		}
		fmt.Fprintf(w, "Cluster:     %s\nTool:        %s %s (field manager %s)\n", h.Target.ClusterIdentity, h.Tool.Name, h.Tool.Version, h.Tool.FieldManager)
	}
	fmt.Fprintf(w, "Expected head (paste into the next preflight):\n%s\n", rep.ExpectedHead)
}
