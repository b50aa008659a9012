package plugin_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qinglong/kubectl-ql3/ceremony/package/intent"
	"github.com/qinglong/kubectl-ql3/ceremony/package/stagelayout/stagelayouttest"
	"github.com/qinglong/kubectl-ql3/plugin"
)

// packageStage writes a valid stage, its intent and its trusted key; it
// returns the stage and the verify-stage arguments that accept it.
func packageStage(t *testing.T) (*stagelayouttest.Stage, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	s, err := stagelayouttest.Write(filepath.Join(dir, "layout"), stagelayouttest.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"layout": s.Dir, "intent": filepath.Join(dir, "intent.json"), "key": filepath.Join(dir, "stage.pem"), "other-key": filepath.Join(dir, "other.pem")}
	data, err := json.MarshalIndent(s.Intent(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	for path, b := range map[string][]byte{files["intent"]: data, files["key"]: stagelayouttest.PublicKeyPEM(stagelayouttest.Key(1)), files["other-key"]: stagelayouttest.PublicKeyPEM(stagelayouttest.Key(2))} {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return s, files
}

func TestPackageVerifyStage(t *testing.T) {
	s, f := packageStage(t)
	args := func(extra ...string) []string {
		return append([]string{"package", "verify-stage", "--intent", f["intent"], "--layout", f["layout"], "--trusted-key", f["key"],
			"--allow-ref", "registry.example.com/qinglong/packages/demo"}, extra...)
	}
	out, stderr, code := run(t, nil, args()...)
	if code != 0 || !strings.Contains(out, "Stage verified: "+s.Evidence.StageReference) || !strings.Contains(out, s.ReceiptDigest) {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}

	out, stderr, code = run(t, nil, args("-o", "json")...)
	if code != 0 {
		t.Fatalf("-o json: exit %d: %s", code, stderr)
	}
	var rep plugin.StageReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	nm, _ := intent.NamingOf(s.Intent())
	d, _ := intent.Digest(s.Intent())
	if rep.Evidence != s.Evidence || rep.Pointer != nm || rep.IntentDigest != d {
		t.Errorf("report %+v, want evidence %+v, pointer %+v, intent %s", rep, s.Evidence, nm, d)
	}
}

func TestPackageVerifyStageFailures(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(t *testing.T, s *stagelayouttest.Stage, f map[string]string) []string // returns extra/replacement args
		code   int
		stderr string
	}{
		{"bundle altered: unavailable", func(t *testing.T, s *stagelayouttest.Stage, f map[string]string) []string {
			if err := os.WriteFile(s.Blobs["bundle"], []byte("other bytes"), 0o644); err != nil {
				t.Fatal(err)
			}
			return nil
		}, 4, "the layout is damaged"},
		{"receipt missing: unavailable", func(t *testing.T, s *stagelayouttest.Stage, f map[string]string) []string {
			os.Remove(s.Blobs["receipt"])
			return nil
		}, 4, "read blob"},
		{"bundle blob a named pipe: unavailable, at once", func(t *testing.T, s *stagelayouttest.Stage, f map[string]string) []string {
			os.Remove(s.Blobs["bundle"])
			if err := syscall.Mkfifo(s.Blobs["bundle"], 0o644); err != nil {
				t.Fatal(err)
			}
			return nil
		}, 4, "not a regular file"},
		{"layout directory missing: invalid", func(t *testing.T, s *stagelayouttest.Stage, f map[string]string) []string {
			f["layout"] += ".missing"
			return nil
		}, 2, "--layout " + "LAYOUT.missing: no such file or directory"},
		{"layout names a file: invalid", func(t *testing.T, s *stagelayouttest.Stage, f map[string]string) []string {
			f["layout"] = f["intent"]
			return nil
		}, 2, "intent.json: not a directory"},
		{"layout not an OCI layout: invalid", func(t *testing.T, s *stagelayouttest.Stage, f map[string]string) []string {
			f["layout"] = filepath.Dir(f["layout"])
			return nil
		}, 2, "has no oci-layout file: it is not an OCI image layout"},
		{"untrusted key: conflict", func(t *testing.T, s *stagelayouttest.Stage, f map[string]string) []string {
			f["key"] = f["other-key"]
			return nil
		}, 3, "signed by none"},
		{"not allowlisted: conflict", func(t *testing.T, s *stagelayouttest.Stage, f map[string]string) []string {
			f["allow"] = "registry.example.com/qinglong/packages/other"
			return nil
		}, 3, "not in the allowlist"},
		{"intent differs: conflict", func(t *testing.T, s *stagelayouttest.Stage, f map[string]string) []string {
			in := s.Intent()
			in.ContentDigest = s.Evidence.LockDigest
			data, _ := json.Marshal(in)
			os.WriteFile(f["intent"], data, 0o644)
			return nil
		}, 3, "contentDigest: intent"},
		{"intent with an unknown member: invalid", func(t *testing.T, s *stagelayouttest.Stage, f map[string]string) []string {
			os.WriteFile(f["intent"], []byte(`{"schema":"qinglong/plugin-package-activation-intent@v1","x":1}`), 0o644)
			return nil
		}, 2, "intent.json"},
		{"intent file missing: invalid", func(t *testing.T, s *stagelayouttest.Stage, f map[string]string) []string {
			f["intent"] += ".missing"
			return nil
		}, 2, "--intent"},
		{"key file not a key: invalid", func(t *testing.T, s *stagelayouttest.Stage, f map[string]string) []string {
			os.WriteFile(f["key"], []byte("not a key"), 0o644)
			return nil
		}, 2, "--trusted-key"},
		{"malformed allow-ref: invalid", func(t *testing.T, s *stagelayouttest.Stage, f map[string]string) []string {
			f["allow"] = "Not A Ref"
			return nil
		}, 2, "--allow-ref"},
		{"-o name: invalid", func(t *testing.T, s *stagelayouttest.Stage, f map[string]string) []string {
			return []string{"-o", "name"}
		}, 2, "--output"},
		{"no --allow-ref: invalid", func(t *testing.T, s *stagelayouttest.Stage, f map[string]string) []string {
			f["allow"] = ""
			return nil
		}, 2, `required flag(s) "allow-ref" not set`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, f := packageStage(t)
			f["allow"] = "registry.example.com/qinglong/packages/demo"
			layout := f["layout"]
			extra := tt.edit(t, s, f)
			tt.stderr = strings.ReplaceAll(tt.stderr, "LAYOUT", layout)
			args := []string{"package", "verify-stage", "--intent", f["intent"], "--layout", f["layout"], "--trusted-key", f["key"]}
			if f["allow"] != "" {
				args = append(args, "--allow-ref", f["allow"])
			}
			out, stderr, code := runBounded(t, 30*time.Second, nil, append(args, extra...)...) // a blocked read fails, not hangs
			if code != tt.code || !strings.Contains(stderr, tt.stderr) || strings.Count(stderr, "error: ") != 1 || out != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d, nothing on stdout and one error with %q", code, out, stderr, tt.code, tt.stderr)
			}
		})
	}
}
