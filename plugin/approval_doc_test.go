package plugin_test

import (
	"os"
	"regexp"
	"testing"
)

// docs/approval.md shows the policy exactly as `kubectl ql3 approval
// policy` prints it: a cluster admin reads what they apply, and a
// re-implementation compares the same spec.
func TestApprovalPolicyDoc(t *testing.T) {
	data, err := os.ReadFile("../docs/approval.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?ms)^```yaml approval-policy\n(.*?)^```$").FindSubmatch(data)
	if m == nil {
		t.Fatal("docs/approval.md shows no ```yaml approval-policy block")
	}
	if got := mustRun(t, nil, "approval", "policy"); got != string(m[1]) {
		t.Fatalf("kubectl ql3 approval policy prints\n%s\ndocs/approval.md says\n%s", got, m[1])
	}
}
