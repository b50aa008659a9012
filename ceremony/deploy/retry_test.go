package deploy

import (
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A retry after a 429 waits at least the Retry-After the API server asked
// for; otherwise the backoff grows with the attempt.
func TestRetryDelayHonoursRetryAfter(t *testing.T) {
	tooMany := apierrors.NewTooManyRequests("priority and fairness: too many requests", 3)
	timeout := apierrors.NewServerTimeout(schema.GroupResource{Resource: "configmaps"}, "patch", 1)
	for _, c := range []struct {
		attempt int
		err     error
		want    time.Duration
	}{
		{1, errors.New("connection reset by peer"), 100 * time.Millisecond},
		{3, errors.New("connection reset by peer"), 900 * time.Millisecond},
		{1, tooMany, 3 * time.Second},
		{4, tooMany, 3 * time.Second},
		{1, timeout, time.Second},
		{4, timeout, 1600 * time.Millisecond},
	} {
		if got := retryDelay(c.attempt, c.err); got != c.want {
			t.Errorf("retryDelay(%d, %v) = %s, want %s", c.attempt, c.err, got, c.want)
		}
	}
}
