package deploy

import (
	"context"
	"time"
)

// WriteHead is the ceremony's own Head write (writeHead: the ConfigMap of
// to, a create or an update carrying resourceVersion, settled by reading),
// for the tests of package deploy_test; it returns the new resourceVersion.
func (o *Options) WriteHead(ctx context.Context, ns, resourceVersion string, from, to *Head) (string, error) {
	ref, err := o.writeHead(ctx, ns, &cmRef{resourceVersion: resourceVersion}, from, to)
	if err != nil {
		return "", err
	}
	return ref.resourceVersion, nil
}

// SetPollPause makes every pause between converge's polls after the apply
// d: a test that must see converge woken by its watch makes it an hour.
func (o *Options) SetPollPause(d time.Duration) { o.pollPause = d }
