package plugin_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/qinglong/kubectl-ql3/plugin"
)

// valueName is a flag's value name as --help shows it: a short upper-case
// word (TOKEN, FILE, DIR).
var valueName = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,11}$`)

// Every flag of every command shows a value name a user can read in
// --help: pflag takes the first back-quoted word of a usage string as the
// value name, so `kubectl ql3 head` in a usage once printed
// "--expected-head kubectl ql3 head". Without a back-quoted word the name
// is the flag's type (string, int, duration), and bools have none.
func TestFlagValueNames(t *testing.T) {
	root := plugin.NewCmdRoot(genericiooptions.NewTestIOStreamsDiscard())
	var walk func(*cobra.Command)
	flags := 0
	walk = func(cmd *cobra.Command) {
		check := func(f *pflag.Flag) {
			flags++
			name, usage := pflag.UnquoteUsage(f)
			typed := typeName(f)
			switch {
			case name == typed: // no back-quoted word: pflag's type name
			case valueName.MatchString(name):
			default:
				t.Errorf("%s --%s: value name %q; want a short upper-case word or the type name %q", cmd.CommandPath(), f.Name, name, typed)
			}
			if f.Value.Type() == "bool" && name != "" {
				t.Errorf("%s --%s: a bool flag with value name %q", cmd.CommandPath(), f.Name, name)
			}
			if strings.Contains(usage, "`") {
				t.Errorf("%s --%s: usage %q still has a back quote after the value name", cmd.CommandPath(), f.Name, usage)
			}
		}
		cmd.LocalFlags().VisitAll(check)
		cmd.InheritedFlags().VisitAll(check)
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if flags < 100 {
		t.Fatalf("checked only %d flags: the walk missed commands", flags)
	}
}

// typeName is the value name pflag shows for f without a back-quoted word.
func typeName(f *pflag.Flag) string {
	plain := *f
	plain.Usage = strings.ReplaceAll(f.Usage, "`", "")
	name, _ := pflag.UnquoteUsage(&plain)
	return name
}

// The value names users read in --help for the flags that once had none.
func TestFlagValueNamesInHelp(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"preflight", "--help"}, []string{"--expected-head TOKEN", "--transition TRANSITION", "--out FILE", "-o, --output FORMAT", "--secret-digest-key-file FILE"}},
		{[]string{"apply", "--help"}, []string{"--preflight FILE", "--receipts-dir DIR", "--sign-key FILE"}},
		{[]string{"rollback", "--help"}, []string{"--expected-head TOKEN", "--out FILE"}},
		{[]string{"lock", "--help"}, []string{"--version VERSION", "--cluster-identity DIGEST"}},
		{[]string{"render", "--help"}, []string{"--subject NAME"}},
		{[]string{"rbac", "--help"}, []string{"--bind-user NAME", "--bind-group NAME"}},
		{[]string{"receipt", "audit", "--help"}, []string{"--release DIR", "--trusted-key FILE", "--from-generation N"}},
		{[]string{"head", "--help"}, []string{"-o, --output FORMAT"}},
	}
	for _, tt := range tests {
		out, stderr, code := run(t, nil, tt.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tt.args, code, stderr)
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: help lacks %q:\n%s", tt.args, w, out)
			}
		}
		if strings.Contains(out, "--expected-head kubectl") || strings.Contains(out, "--preflight kubectl") {
			t.Errorf("%v: a usage phrase is still a value name:\n%s", tt.args, out)
		}
	}
}
