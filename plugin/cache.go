package plugin

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/rendercache"
)

// addNoCacheFlag adds --no-cache, shared by lock and the ceremony commands.
func addNoCacheFlag(fs *pflag.FlagSet, p *bool) {
	fs.BoolVar(p, "no-cache", false, "neither read nor write the render cache (docs/render-cache.md): always render with kustomize")
}

// renderCache is the user's render cache for this binary, or nil with
// --no-cache or when it cannot be opened (no user cache or config
// directory, a key file that fails its checks, an executable that cannot
// be hashed): the cache is an optimisation, and its absence never stops a
// command. Why it is off is said on errOut, except for --no-cache.
func renderCache(noCache bool, errOut io.Writer) *rendercache.Cache {
	if noCache {
		return nil
	}
	c, _, err := rendercache.Open()
	if err != nil {
		fmt.Fprintf(errOut, "render cache: off: %v\n", err)
		return nil
	}
	return c
}

type cacheOptions struct {
	streams   genericiooptions.IOStreams
	olderThan time.Duration
}

func newCmdCache(streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Show or prune the render cache",
		Long: `The render cache holds the rendered objects of releases this plugin build has
rendered, keyed by their source digest and the plugin build, so that preflight,
apply and diff do not run kustomize again for a release the lock binds. An entry is
used only when its MAC verifies under this installation's key (kept outside the
cache directory) and its objects re-derive the lock's render digest: an entry
anyone without the key wrote can only cost a render (docs/render-cache.md). Renders holding
Secret values are never cached. --no-cache on lock, preflight, apply, resume,
rollback and diff bypasses it.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCmdCacheDir(streams), newCmdCachePrune(streams))
	return cmd
}

func newCmdCacheDir(streams genericiooptions.IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "dir",
		Short: "Print the render cache directory",
		Long: `Print the render cache directory: $XDG_CACHE_HOME/kubectl-ql3/render (os.UserCacheDir).
On stderr, say where its key is ($XDG_CONFIG_HOME/kubectl-ql3/render-cache.key,
os.UserConfigDir), how this build is identified, and why the cache is off if it is.`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error {
			d, err := rendercache.DefaultDir()
			if err != nil {
				return err
			}
			if _, err = fmt.Fprintln(streams.Out, d); err != nil {
				return err
			}
			if kp, err := rendercache.DefaultKeyPath(); err == nil {
				fmt.Fprintf(streams.ErrOut, "key: %s\n", kp)
			}
			switch _, how, err := rendercache.Open(); {
			case err != nil:
				fmt.Fprintf(streams.ErrOut, "render cache: off: %v\n", err)
			case how != "":
				fmt.Fprintf(streams.ErrOut, "build: %s\n", how)
			default:
				fmt.Fprintln(streams.ErrOut, "build: identified by its module versions, sums and VCS revision")
			}
			return nil
		},
	}
}

func newCmdCachePrune(streams genericiooptions.IOStreams) *cobra.Command {
	o := &cacheOptions{streams: streams}
	cmd := &cobra.Command{
		Use:   "prune [--older-than DURATION]",
		Short: "Remove render cache entries",
		Long: `Remove the render cache entries not written or used within --older-than
(default 0: every entry). Files in the directory that are not entries are left
alone.`,
		Example: `  kubectl ql3 cache prune
  kubectl ql3 cache prune --older-than 720h`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(time.Now())
		},
	}
	cmd.Flags().DurationVar(&o.olderThan, "older-than", 0, "remove only entries last written or used longer than `DURATION` ago (e.g. 720h)")
	return cmd
}

func (o *cacheOptions) Validate() error {
	if o.olderThan < 0 {
		return fail.Errorf(fail.Invalid, "--older-than %s: must not be negative", o.olderThan)
	}
	return nil
}

func (o *cacheOptions) Run(now time.Time) error {
	d, err := rendercache.DefaultDir()
	if err != nil {
		return err
	}
	c := &rendercache.Cache{Dir: d}
	n, err := c.Prune(o.olderThan, now)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.streams.ErrOut, "removed %d render cache entr%s from %s\n", n, map[bool]string{true: "y", false: "ies"}[n == 1], c.Dir)
	return nil
}
