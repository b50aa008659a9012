package deploy

import (
	"errors"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// applyOfRecordFailed names resume only where the Head was acquired, the
// apply of the record only where the gate refused it, and keeps the
// error's class either way.
func TestApplyOfRecordFailed(t *testing.T) {
	moved := fail.Errorf(fail.Conflict, "head: moved since the preflight")
	timeout := fail.Errorf(fail.Unavailable, "converge: timed out")
	refused := fail.Errorf(fail.Invalid, "apply: needs a second person's approval")
	for _, tt := range []struct {
		name      string
		err       error
		want, not string
		class     fail.Class
	}{
		{"before the Head was acquired", moved, "(preflight record pf.json)", "resume", fail.Conflict},
		{"after the Head was acquired", acquiredFailure{timeout}, "the Head applying it: `kubectl ql3 resume --preflight pf.json` continues", "", fail.Unavailable},
		{"refused by the gate", gateRefusal{refused}, "once another person approved this record, `kubectl ql3 apply --preflight pf.json` applies it", "resume", fail.Invalid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := applyOfRecordFailed(tt.err, "pf.json")
			if !strings.Contains(got.Error(), tt.want) || (tt.not != "" && strings.Contains(got.Error(), tt.not)) {
				t.Errorf("%v: want %q, and not %q", got, tt.want, tt.not)
			}
			if fail.ClassOf(got) != tt.class || !errors.Is(got, tt.err) {
				t.Errorf("%v: class %v, want %v", got, fail.ClassOf(got), tt.class)
			}
		})
	}
}
