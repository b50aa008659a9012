package helmchart

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"
)

// SDKVersion and DefaultKubeVersion are constants (so tests and the
// plugin agree, and Helm's test-time defaults never leak in); they must
// name what is linked: helm.sh/helm/v4 and client-go of go.mod, and the
// Makefile's pinned helm binary is the same version.
func TestVersionsMatchTheBuild(t *testing.T) {
	deps := map[string]string{}
	for _, m := range []string{"helm.sh/helm/v4", "k8s.io/client-go"} {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", m).Output()
		if err != nil {
			t.Fatalf("go list -m %s: %v", m, err)
		}
		deps[m] = strings.TrimSpace(string(out))
	}
	if deps["helm.sh/helm/v4"] != SDKVersion {
		t.Errorf("helm.sh/helm/v4 %s linked, SDKVersion %s", deps["helm.sh/helm/v4"], SDKVersion)
	}
	cg, err := semver.NewVersion(deps["k8s.io/client-go"])
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("v1.%d.0", cg.Minor()); DefaultKubeVersion != want {
		t.Errorf("DefaultKubeVersion %s, client-go %s gives %s", DefaultKubeVersion, cg, want)
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^HELM_VERSION\s*:=\s*(\S+)`).FindSubmatch(mk)
	if m == nil || strings.TrimSpace(string(m[1])) != SDKVersion {
		t.Errorf("Makefile HELM_VERSION %q, SDK %s", m, SDKVersion)
	}
}
