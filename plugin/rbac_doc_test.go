package plugin_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// rbacNamesRE matches a documented `rbac -o name` run: "```text
// rbac-names", a "$ kubectl ql3 …" line, then the names it prints.
var rbacNamesRE = regexp.MustCompile("(?ms)^```text rbac-names\n\\$ kubectl ql3 ([^\n]*)\n(.*?)^```$")

// The names every operation's doc shows its `rbac` command printing are
// what the built binary prints for that command line (the naming rule's
// worked values). A "./ql3-demo-3.0.0" argument is the v3.0.0 example
// release in namespace ql3-demo.
func TestRBACNamesDoc(t *testing.T) {
	for _, doc := range []string{"ceremony.md", "package-pointer.md", "worker.md", "keyset.md", "env-bundle.md", "approval.md"} {
		t.Run(doc, func(t *testing.T) {
			data, err := os.ReadFile("../docs/" + doc)
			if err != nil {
				t.Fatal(err)
			}
			blocks := rbacNamesRE.FindAllStringSubmatch(string(data), -1)
			if len(blocks) == 0 {
				t.Fatalf("docs/%s shows no `rbac -o name` run (```text rbac-names)", doc)
			}
			for _, b := range blocks {
				args := strings.Fields(b[1])
				for i, a := range args {
					if a == "./ql3-demo-3.0.0" {
						args[i] = releaseCopy(t, "v3.0.0", "ql3-demo", "")
					}
				}
				if got := mustRun(t, nil, args...); got != b[2] {
					t.Errorf("docs/%s: kubectl ql3 %s prints\n%s\nthe doc says\n%s", doc, b[1], got, b[2])
				}
			}
		})
	}
}
