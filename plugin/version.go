package plugin

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/spf13/cobra"
	apiversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
)

// VersionInfo is what `kubectl ql3 version -o json|yaml` prints.
type VersionInfo struct {
	Plugin          PluginVersion    `json:"plugin"`
	Server          *apiversion.Info `json:"server,omitempty"`
	ClusterIdentity string           `json:"clusterIdentity,omitempty"`
}

// PluginVersion describes this binary.
type PluginVersion struct {
	Version   string `json:"version"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

type versionOptions struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	output  string
	client  bool
}

func newCmdVersion(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &versionOptions{flags: flags, streams: streams}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin version, the server version and the target's cluster identity",
		Long: `Print the plugin version and, unless --client is given, the API server's version
and the target's cluster identity: the domain-separated SHA-256 of the
kube-system Namespace UID, the value a lock's target.clusterIdentity binds.`,
		Example: `  kubectl ql3 version
  kubectl ql3 version --context prod -o json
  kubectl ql3 version --client`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", outputUsage(outputJSON, outputYAML))
	cmd.Flags().BoolVar(&o.client, "client", false, "print the plugin version only; do not contact a cluster")
	registerOutputCompletion(cmd, outputJSON, outputYAML)
	return cmd
}

// init takes the module version of a `go install …@vX.Y.Z` build, which
// no -ldflags stamped, so such a binary knows (and is checked as) its
// release version.
func init() {
	if version != "v0.0.0-dev" { // stamped by -ldflags: keep it
		return
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		if _, err := semver.StrictNewVersion(strings.TrimPrefix(bi.Main.Version, "v")); err == nil {
			version = bi.Main.Version
		}
	}
}

func (o *versionOptions) Validate() error { return validateOutput(o.output, outputJSON, outputYAML) }

func (o *versionOptions) Run(ctx context.Context) error {
	info := VersionInfo{Plugin: PluginVersion{Version: version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}}
	var serverErr error
	if !o.client {
		serverErr = o.readServer(ctx, &info)
	}
	if err := printVersion(o.streams.Out, o.output, info); err != nil {
		return err
	}
	return serverErr
}

func (o *versionOptions) readServer(ctx context.Context, info *VersionInfo) error {
	cs, err := clientset(o.flags)
	if err != nil {
		return err
	}
	if info.Server, err = deploy.ServerVersion(cs); err != nil {
		return err
	}
	info.ClusterIdentity, err = deploy.ReadClusterIdentity(ctx, deploy.NewIdentityReader(cs))
	return err
}

func printVersion(w io.Writer, output string, info VersionInfo) error {
	if output != "" {
		return printObject(w, output, info)
	}
	fmt.Fprintf(w, "Plugin Version: %s\n", info.Plugin.Version)
	if info.Server != nil {
		fmt.Fprintf(w, "Server Version: %s\n", info.Server.GitVersion)
	}
	if info.ClusterIdentity != "" {
		fmt.Fprintf(w, "Cluster Identity: %s\n", info.ClusterIdentity)
	}
	return nil
}
