package plugin_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/envbundle/envcarrier"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
	"github.com/qinglong/kubectl-ql3/plugin"
)

// ebRun runs the built plugin in dir with stdin, a fresh TMPDIR and no
// kubeconfig (env-bundle pack and verify need no cluster).
func ebRun(t *testing.T, dir, stdin string, args ...string) (stdout, stderr string, code int, tmp string) {
	t.Helper()
	tmp = t.TempDir()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "KUBECONFIG="+filepath.Join(tmp, "no-kubeconfig"), "HOME="+tmp)
	stdout, stderr, code = testkit.Run(t, cmd)
	return stdout, stderr, code, tmp
}

func ebWrite(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// pack and verify through the binary: files, modes, reports, exit codes.
func TestEnvBundlePackVerify(t *testing.T) {
	dir := t.TempDir()
	ebWrite(t, dir, "task.env", "# the task's secrets\nexport B_TOKEN='b b'\nA_URL=https://x/?q=1\n")
	out, stderr, code, _ := ebRun(t, dir, "", "env-bundle", "pack", "--from-dotenv", "task.env", "--out", "task.bundle.json")
	if code != 0 {
		t.Fatalf("pack: exit %d: %s", code, stderr)
	}
	want, err := envcarrier.New([]envcarrier.Entry{{Name: "B_TOKEN", Value: "b b"}, {Name: "A_URL", Value: "https://x/?q=1"}})
	if err != nil {
		t.Fatal(err)
	}
	if wantOut := fmt.Sprintf("packed 2 entries into task.bundle.json: %d bytes (names and values %d bytes)\n", want.Size(), want.NameValueBytes()); out != wantOut || stderr != "" {
		t.Fatalf("pack printed %q, %q; want %q", out, stderr, wantOut)
	}
	got, err := os.ReadFile(filepath.Join(dir, "task.bundle.json"))
	if err != nil || !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("the bundle file differs from New's carrier (%v)", err)
	}
	if st, _ := os.Stat(filepath.Join(dir, "task.bundle.json")); st.Mode().Perm() != 0o600 {
		t.Fatalf("bundle mode %v, want 0600", st.Mode().Perm())
	}

	// Never replaced: exit 2, the file untouched.
	ebWrite(t, dir, "other.env", "C=1\n")
	_, stderr, code, _ = ebRun(t, dir, "", "env-bundle", "pack", "--from-dotenv", "other.env", "--out", "task.bundle.json")
	if again, _ := os.ReadFile(filepath.Join(dir, "task.bundle.json")); code != 2 || !strings.Contains(stderr, "already exists") || !bytes.Equal(again, got) {
		t.Fatalf("pack over an existing file: exit %d: %s", code, stderr)
	}

	// JSON on stdin, -o json.
	out, stderr, code, _ = ebRun(t, dir, `{"B_TOKEN":"b b","A_URL":"https://x/?q=1"}`, "env-bundle", "pack", "--from-json-stdin", "--out", "j.json", "-o", "json")
	if code != 0 {
		t.Fatalf("pack --from-json-stdin: exit %d: %s", code, stderr)
	}
	var rep plugin.EnvBundleReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep != (plugin.EnvBundleReport{File: "j.json", Entries: 2, Bytes: want.Size(), NameValueBytes: want.NameValueBytes()}) {
		t.Fatalf("report %+v (%v) from %s", rep, err, out)
	}
	if j, _ := os.ReadFile(filepath.Join(dir, "j.json")); !bytes.Equal(j, got) {
		t.Fatal("dotenv and JSON input packed differently")
	}

	// --out -: the carrier on stdout, the report on stderr.
	out, stderr, code, _ = ebRun(t, dir, "", "env-bundle", "pack", "--from-dotenv", "task.env", "--out", "-")
	if code != 0 || out != string(got) || !strings.HasPrefix(stderr, "packed 2 entries into -:") {
		t.Fatalf("pack --out -: exit %d, stdout %d bytes, stderr %q", code, len(out), stderr)
	}

	// verify.
	out, stderr, code, _ = ebRun(t, dir, "", "env-bundle", "verify", "task.bundle.json")
	if code != 0 || !strings.Contains(out, "a valid environment bundle of 2 entries") {
		t.Fatalf("verify: exit %d: %s%s", code, out, stderr)
	}
	if out, stderr, code, _ = ebRun(t, dir, "", "env-bundle", "verify", "task.bundle.json", "-o", "jsonpath={.entries} {.bytes}"); code != 0 || out != fmt.Sprintf("2 %d", want.Size()) {
		t.Fatalf("verify -o jsonpath: exit %d: %q %s", code, out, stderr)
	}
	ebWrite(t, dir, "task.names", "# the task's own\nHOME\nPATH\n")
	out, stderr, code, _ = ebRun(t, dir, "", "env-bundle", "verify", "task.bundle.json", "--against-env", "task.names", "-o", "yaml")
	if code != 0 || !strings.Contains(out, "mergedEntries: 4\n") || !strings.Contains(out, "collisions: 0\n") {
		t.Fatalf("verify --against-env: exit %d: %s%s", code, out, stderr)
	}
	ebWrite(t, dir, "clash.names", "A_URL\nPATH\n")
	out, stderr, code, _ = ebRun(t, dir, "", "env-bundle", "verify", "task.bundle.json", "--against-env", "clash.names")
	if code != 2 || !strings.Contains(out, "1 collisions") || !strings.Contains(stderr, "1 of the task's 2 names are also bundle names") {
		t.Fatalf("verify a collision: exit %d: %s%s", code, out, stderr)
	}
	ebWrite(t, dir, "spaced.json", strings.Replace(string(got), ",", ", ", 1))
	_, stderr, code, _ = ebRun(t, dir, "", "env-bundle", "verify", "spaced.json")
	if code != 2 || !strings.Contains(stderr, "(rule canonical)") {
		t.Fatalf("verify a non-canonical file: exit %d: %s", code, stderr)
	}

	// Usage errors are invalid input.
	for _, args := range [][]string{
		{"env-bundle", "pack", "--out", "x.json"},
		{"env-bundle", "pack", "--from-dotenv", "task.env"},
		{"env-bundle", "pack", "--from-dotenv", "task.env", "--from-json-stdin", "--out", "x.json"},
		{"env-bundle", "pack", "--from-dotenv", "task.env", "--out", "x.json", "-o", "name"},
		{"env-bundle", "verify"},
		{"env-bundle", "verify", "a", "b"},
	} {
		if _, stderr, code, _ := ebRun(t, dir, "", args...); code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", args, code, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a refused pack wrote its --out file")
	}
}

// The canary: every command and every failure path runs with a canary
// name and value in its input, and neither appears on stdout, stderr, in
// an error, in the process arguments or in any file but the bundle file a
// successful pack writes; no temporary file is made.
func TestEnvBundleCanary(t *testing.T) {
	const name = "QLCANARY_N7Q4"
	const value = "canaryValue7xZr2Kp"
	secrets := []string{name, value, strings.ToLower(name), base64.StdEncoding.EncodeToString([]byte(value)), value[3:15]}

	dq := strings.Repeat(`\"`, 16384-len(value))
	big := strings.Repeat("v", 16384-len(value))
	var many strings.Builder
	for i := range 257 {
		fmt.Fprintf(&many, "%s_%03d=%s\n", name, i, value)
	}
	var manyNames strings.Builder
	for i := range 255 {
		fmt.Fprintf(&manyNames, "%s_%03d\n", name, i)
	}
	valid := func() string {
		b, err := envcarrier.New([]envcarrier.Entry{{Name: name, Value: value}, {Name: name + "_B", Value: value}})
		if err != nil {
			t.Fatal(err)
		}
		return string(b.Bytes())
	}()
	entry := `{"name":"` + name + `","value":"` + value + `"}`
	carrier := func(entries ...string) string {
		return `{"entries":[` + strings.Join(entries, ",") + `],"schema":"qinglong/environment-bundle@v1"}`
	}

	type scenario struct {
		name   string
		files  map[string]string // written into the work directory first
		stdin  string
		args   []string
		code   int
		output string // the file a successful pack writes ("" none; "-" stdout)
	}
	pack := func(n, dotenv string, code int) scenario {
		out := ""
		if code == 0 {
			out = "out.json"
		}
		return scenario{n, map[string]string{"in.env": dotenv}, "", []string{"env-bundle", "pack", "--from-dotenv", "in.env", "--out", "out.json"}, code, out}
	}
	packJSON := func(n, stdin string, code int) scenario {
		out := ""
		if code == 0 {
			out = "out.json"
		}
		return scenario{n, nil, stdin, []string{"env-bundle", "pack", "--from-json-stdin", "--out", "out.json", "-o", "yaml"}, code, out}
	}
	verify := func(n, content string, code int, extra ...string) scenario {
		files := map[string]string{"b.json": content, "names": name + "\n"}
		return scenario{n, files, "", append([]string{"env-bundle", "verify", "b.json"}, extra...), code, ""}
	}
	verifyNames := func(n, names string, code int) scenario {
		return scenario{n, map[string]string{"b.json": valid, "names": names}, "", []string{"env-bundle", "verify", "b.json", "--against-env", "names", "-o", "json"}, code, ""}
	}
	tests := []scenario{
		pack("pack ok", name+"="+value+"\nexport "+name+`_2="`+value+`\n"`+"\n", 0),
		{"pack to stdout", map[string]string{"in.env": name + "=" + value + "\n"}, "", []string{"env-bundle", "pack", "--from-dotenv", "in.env", "--out", "-", "-o", "json"}, 0, "-"},
		pack("pack bad name", name+"-X="+value+"\n", 2),
		pack("pack digit name", "1"+name+"="+value+"\n", 2),
		pack("pack reserved prefix", "QL3_"+name+"="+value+"\n", 2),
		pack("pack duplicate", name+"="+value+"\n"+name+"="+value+"2\n", 2),
		pack("pack value too long", name+"="+value+big+"x\n", 2),
		pack("pack names and values too long", fmt.Sprintf("%s_A=%s%s\n%s_B=%s%s\n%s_C=%s%s\n%s_D=%s%s\n", name, value, big, name, value, big, name, value, big, name, value, big), 2),
		pack("pack carrier too long", fmt.Sprintf("%s_A=\"%s%s\"\n%s_B=\"%s%s\"\n%s_C=\"%s%s\"\n", name, value, dq, name, value, dq, name, value, dq), 2),
		pack("pack 257 entries", many.String(), 2),
		pack("pack no entries", "# "+name+"="+value+"\n", 2),
		pack("pack dollar", name+"="+value+"$HOME\n", 2),
		pack("pack two words", name+"="+value+" "+value+"\n", 2),
		pack("pack hash", name+"="+value+"#"+value+"\n", 2),
		pack("pack unterminated", name+`="`+value+"\n", 2),
		pack("pack bad escape", name+`="`+value+`\q"`+"\n", 2),
		pack("pack CRLF", name+"="+value+"\r\n", 2),
		pack("pack NUL", name+"="+value+"\x00\n", 2),
		pack("pack invalid UTF-8", name+"="+value+"\xff\n", 2),
		pack("pack BOM", "\xef\xbb\xbf"+name+"="+value+"\n", 2),
		pack("pack control character", name+"='"+value+"\x01'\n", 2),
		{"pack over an existing file", map[string]string{"in.env": name + "=" + value + "\n", "out.json": "x"}, "", []string{"env-bundle", "pack", "--from-dotenv", "in.env", "--out", "out.json"}, 2, ""},
		{"pack into a missing directory", map[string]string{"in.env": name + "=" + value + "\n"}, "", []string{"env-bundle", "pack", "--from-dotenv", "in.env", "--out", "no/such/out.json"}, 2, ""},
		packJSON("pack JSON ok", `{"`+name+`":"`+value+`"}`, 0),
		packJSON("pack JSON duplicate", `{"`+name+`":"`+value+`","`+name+`":"`+value+`"}`, 2),
		packJSON("pack JSON number", `{"`+name+`":1,"`+value+`":2}`, 2),
		packJSON("pack JSON nested", `{"`+name+`":{"`+value+`":"`+value+`"}}`, 2),
		packJSON("pack JSON truncated", `{"`+name+`":"`+value, 2),
		packJSON("pack JSON trailing", `{"`+name+`":"`+value+`"}`+value, 2),
		packJSON("pack JSON bad escape", `{"`+name+`":"`+value+`\q"}`, 2),
		packJSON("pack JSON bad literal", `{"`+name+`":`+value+`}`, 2),
		packJSON("pack JSON lone surrogate", `{"`+name+`":"`+value+`\ud800"}`, 2),
		packJSON("pack JSON NUL escape", `{"`+name+`":"`+value+`\u0000"}`, 2),
		packJSON("pack JSON reserved", `{"QL3_`+name+`":"`+value+`"}`, 2),
		packJSON("pack JSON bad name", `{"`+name+` ":"`+value+`"}`, 2),
		packJSON("pack JSON array", `["`+name+`","`+value+`"]`, 2),
		verify("verify ok", valid, 0),
		verify("verify collision", valid, 2, "--against-env", "names"),
		verify("verify white space", strings.Replace(valid, ",", ", ", 1), 2),
		verify("verify schema first", `{"schema":"qinglong/environment-bundle@v1","entries":[`+entry+`]}`, 2),
		verify("verify unsorted", carrier(strings.Replace(entry, name, name+"_B", 1), entry), 2),
		verify("verify duplicate", carrier(entry, entry), 2),
		verify("verify duplicate key", carrier(`{"name":"`+name+`","name":"`+value+`","value":""}`), 2),
		verify("verify unknown member", carrier(`{"name":"`+name+`","value":"","`+value+`":""}`), 2),
		verify("verify unknown top member", `{"`+value+`":1,`+carrier(entry)[1:], 2),
		verify("verify other schema", `{"entries":[`+entry+`],"schema":"`+value+`"}`, 2),
		verify("verify reserved", carrier(strings.Replace(entry, name, "QL3_"+name, 1)), 2),
		verify("verify bad name", carrier(strings.Replace(entry, name, name+"-"+value, 1)), 2),
		verify("verify value a number", carrier(`{"name":"`+name+`","value":1}`), 2),
		verify("verify invalid JSON", carrier(entry)[:60], 2),
		verify("verify bad escape", carrier(strings.Replace(entry, value, value+`\q`, 1)), 2),
		verify("verify non-canonical escape", carrier(strings.Replace(entry, value, `\u0063`+value, 1)), 2),
		verify("verify invalid UTF-8", carrier(strings.Replace(entry, value, value+"\xff", 1)), 2),
		verify("verify NUL", carrier(strings.Replace(entry, value, value+`\u0000`, 1)), 2),
		verify("verify value too long", carrier(strings.Replace(entry, value, value+big+"x", 1)), 2),
		verify("verify too large", carrier(strings.Replace(entry, value, value+strings.Repeat(`\u0001`, 16366), 1)), 2),
		verify("verify zero entries", `{"entries":[],"schema":"`+value+`"}`, 2),
		verifyNames("names ok", "HOME\n"+name+"_C\n", 0),
		verifyNames("names collision", "HOME\n"+name+"\n", 2),
		verifyNames("names bad name", name+"="+value+"\n", 2),
		verifyNames("names duplicate", name+"_C\n"+name+"_C\n", 2),
		verifyNames("names CR", name+"_C\r\n", 2),
		verifyNames("names too many", manyNames.String(), 2),
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, a := range tt.args {
				for _, s := range secrets {
					if strings.Contains(a, s) {
						t.Fatalf("the test itself puts a secret in the arguments: %q", a)
					}
				}
			}
			dir := t.TempDir()
			for n, c := range tt.files {
				ebWrite(t, dir, n, c)
			}
			stdout, stderr, code, tmp := ebRun(t, dir, tt.stdin, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d: %s", code, tt.code, stderr)
			}
			if tt.code != 0 && !strings.HasPrefix(stderr, "error: ") {
				t.Fatalf("a failure without an error message: %q", stderr)
			}
			visible := map[string]string{"stderr": stderr}
			if tt.output != "-" {
				visible["stdout"] = stdout
			} else if _, err := envcarrier.Parse([]byte(stdout)); err != nil {
				t.Fatalf("stdout is not the bundle: %v", err)
			}
			// Every file now in the work and temporary directories, except
			// the inputs and the bundle a successful pack writes.
			for _, root := range []string{dir, tmp} {
				_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
					if err != nil || d.IsDir() {
						return err
					}
					rel, _ := filepath.Rel(dir, p)
					if _, input := tt.files[rel]; input && root == dir || rel == tt.output && root == dir {
						return nil
					}
					data, _ := os.ReadFile(p)
					visible[p] = string(data)
					return nil
				})
			}
			for where, text := range visible {
				for _, s := range secrets {
					if strings.Contains(text, s) {
						t.Errorf("%s holds a secret (%q): %s", where, s, text)
					}
				}
				if where != "stdout" && where != "stderr" {
					t.Errorf("an unexpected file %s", where)
				}
			}
			if tt.output != "" && tt.output != "-" {
				data, err := os.ReadFile(filepath.Join(dir, tt.output))
				if err != nil || !strings.Contains(string(data), value) {
					t.Fatalf("the bundle file lacks the value (%v)", err)
				}
			}
			if tt.code != 0 && tt.files["out.json"] == "" {
				if _, err := os.Stat(filepath.Join(dir, "out.json")); !errors.Is(err, fs.ErrNotExist) {
					t.Fatal("a failed pack left its --out file")
				}
			}
			if tt.code != 0 && slices.Contains(tt.args, "pack") && !strings.Contains(stderr, "(rule ") && !strings.Contains(stderr, "--out") {
				t.Errorf("a pack error names no rule: %s", stderr)
			}
		})
	}
}
