package deploy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
)

// TestWriteUnderHeadPolicy pins which Head writes are sent again: only a
// Head naming an approval, only while the Head policy denies it for its
// parameter (the API server's cache of the approval object lagging the
// decision), and only within headPolicyLag; every other outcome is the
// write's own, after one call. The write it wraps is the CAS write the
// cluster tests exercise (approval_test.go); a denied write stores
// nothing, which is what makes sending it again safe.
func TestWriteUnderHeadPolicy(t *testing.T) {
	saved := headPolicyLag
	headPolicyLag = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 3}
	t.Cleanup(func() { headPolicyLag = saved })

	denial := fmt.Errorf("configmaps %q is forbidden: %s%s", HeadName, gate.HeadDenialPrefix, gate.MsgHeadParams)
	otherDenial := fmt.Errorf("configmaps %q is forbidden: %sanother rule", HeadName, gate.HeadDenialPrefix)
	conflict := errors.New("Operation cannot be fulfilled on configmaps: the object has been modified")
	withApproval := &Head{Approval: &HeadApproval{UID: "0b9f2c1e-approval"}}
	for _, tc := range []struct {
		name      string
		to        *Head
		results   []error // what each call of the write returns, in order
		cancelled bool
		calls     int
		err       error
	}{
		{"without an approval a denial is final", &Head{}, []error{denial}, false, 1, denial},
		{"denied twice, then written", withApproval, []error{denial, denial, nil}, false, 3, nil},
		{"written at once", withApproval, []error{nil}, false, 1, nil},
		{"another rule's denial is final", withApproval, []error{otherDenial}, false, 1, otherDenial},
		{"a conflict is final", withApproval, []error{conflict}, false, 1, conflict},
		{"denied past the bound", withApproval, []error{denial, denial, denial, nil}, false, 3, denial},
		{"a cancelled context sends nothing again", withApproval, []error{denial, nil}, true, 1, denial},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelled {
				cancel()
			}
			calls := 0
			var said []string
			say := func(format string, args ...any) { said = append(said, fmt.Sprintf(format, args...)) }
			got, err := writeUnderHeadPolicy(ctx, say, tc.to, func(context.Context) (int, error) {
				calls++
				return calls, tc.results[calls-1]
			})
			if calls != tc.calls || !errors.Is(err, tc.err) && err != tc.err {
				t.Fatalf("%d call(s), error %v; want %d call(s), error %v", calls, err, tc.calls, tc.err)
			}
			if err == nil && got != calls {
				t.Errorf("result %d, want the last call's (%d)", got, calls)
			}
			if len(said) != calls-1 {
				t.Fatalf("said %q: want one line per write sent again (%d)", said, calls-1)
			}
			for _, s := range said {
				if !strings.Contains(s, tc.to.Approval.UID) {
					t.Errorf("said %q: want the approval's uid", s)
				}
			}
		})
	}
}
