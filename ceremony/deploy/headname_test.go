package deploy

import (
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
)

// The Head policy's CEL names the Head by gate.HeadName (the gate may not
// import the renderer that holds the reserved name): the two must stay
// one name, or the admission policy would guard an object nobody writes.
func TestGateNamesTheHead(t *testing.T) {
	if gate.HeadName != HeadName {
		t.Fatalf("the Head policy guards %q, the ceremony writes %q", gate.HeadName, HeadName)
	}
}
