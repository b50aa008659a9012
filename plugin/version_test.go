package plugin_test

import (
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/plugin"
)

// kubeSystemIdentity is the test cluster's identity.
func kubeSystemIdentity(t *testing.T) string {
	t.Helper()
	return inventory.ClusterIdentity(cp.KubeSystemUID(t))
}

func TestVersionHuman(t *testing.T) {
	out, stderr, code := run(t, nil, "version")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	want := "Plugin Version: v0.1.0-test\nServer Version: v1.37.2\nCluster Identity: " + kubeSystemIdentity(t) + "\n"
	if out != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", out, want)
	}
}

func TestVersionJSONAndYAML(t *testing.T) {
	out, stderr, code := run(t, nil, "version", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var v plugin.VersionInfo
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if v.Plugin.Version != "v0.1.0-test" || v.Server == nil || v.Server.GitVersion != "v1.37.2" || v.ClusterIdentity != kubeSystemIdentity(t) {
		t.Fatalf("version = %+v (server %+v)", v, v.Server)
	}
	yout, _, code := run(t, nil, "version", "-o", "yaml")
	var vy plugin.VersionInfo
	if code != 0 || yaml.Unmarshal([]byte(yout), &vy) != nil || vy.ClusterIdentity != v.ClusterIdentity {
		t.Fatalf("yaml output (exit %d):\n%s", code, yout)
	}
}

func TestVersionErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		code     int
		stderr   string
		stdoutRE string
	}{
		{"bad output", []string{"version", "-o", "xml"}, 2, `error: --output "xml" is not supported`, ""},
		{"unknown flag", []string{"version", "--bogus"}, 2, "error: unknown flag: --bogus", ""},
		{"stray argument", []string{"version", "extra"}, 2, `error: unknown command "extra"`, ""},
		// Nothing listens on port 1: the client part prints, then exit "unavailable".
		{"unreachable", []string{"version", "--server", "https://127.0.0.1:1", "--insecure-skip-tls-verify"}, 4, "error: server version:", "Plugin Version: v0.1.0-test\n"},
		{"client only", []string{"version", "--client", "--server", "https://127.0.0.1:1"}, 0, "", "Plugin Version: v0.1.0-test\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, code := run(t, nil, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tt.code, stderr)
			}
			if !strings.HasPrefix(stderr, tt.stderr) || strings.Count(stderr, "error:") > 1 {
				t.Fatalf("stderr %q, want one error starting %q", stderr, tt.stderr)
			}
			if out != tt.stdoutRE {
				t.Fatalf("stdout %q, want %q", out, tt.stdoutRE)
			}
		})
	}
}

func TestHelpSaysKubectlQl3(t *testing.T) {
	out, _, code := run(t, nil, "--help")
	if code != 0 || !strings.Contains(out, "kubectl ql3 [command]") || !strings.Contains(out, "--kubeconfig") || !strings.Contains(out, "--as-group") {
		t.Fatalf("help (exit %d):\n%s", code, out)
	}
	comp, _, code := run(t, nil, "completion", "bash")
	if code != 0 || !strings.Contains(comp, "__kubectl-ql3_get_completion_results") || !strings.Contains(comp, "complete -o default -F __start_kubectl-ql3 kubectl-ql3") {
		t.Fatalf("completion bash (exit %d) is not a bash completion script for kubectl-ql3", code)
	}
	// Flag values complete too (kubectl >= 1.26 calls the plugin's __complete).
	vals, _, code := run(t, nil, "__complete", "preflight", "dir", "--transition", "")
	if code != 0 || !strings.HasPrefix(vals, "install\nupgrade\nrollback\n") {
		t.Fatalf("__complete --transition: exit %d\n%s", code, vals)
	}
}
