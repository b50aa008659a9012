package operation

// The reviewed configuration: the per-replica resources and the management
// container's environment (limits, quotas, profile, switch, paths, database TLS).

import (
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/qinglong/kubectl-ql3/internal/manifestaudit"
)

// resources: the per-replica budget.
var resourceBudget = []struct {
	kind, name string
	want       resource.Quantity
}{
	{"requests", "cpu", resource.MustParse("100m")},
	{"requests", "memory", resource.MustParse("128Mi")},
	{"limits", "cpu", resource.MustParse("1")},
	{"limits", "memory", resource.MustParse("512Mi")},
}

func checkResources(s *subject) []Finding {
	p := s.pod()
	if p == nil || len(p.Containers) == 0 {
		return nil
	}
	var out []Finding
	for _, b := range resourceBudget {
		var sum resource.Quantity
		var unset []string
		for _, c := range p.Containers {
			list := c.Resources.Requests
			if b.kind == "limits" {
				list = c.Resources.Limits
			}
			q, ok := list[corev1.ResourceName(b.name)]
			if !ok {
				unset = append(unset, c.Name)
				continue
			}
			sum.Add(q)
		}
		where := fmt.Sprintf("%s.containers[*].resources.%s.%s", podPath, b.kind, b.name)
		if len(p.Containers) == 1 {
			where = fmt.Sprintf("%s.containers[0].resources.%s.%s", podPath, b.kind, b.name)
		}
		switch {
		case len(unset) > 0:
			out = append(out, manifestaudit.At(s.depU, where, b.want.String(), fmt.Sprintf("<unset> in containers %q", unset)))
		case sum.Cmp(b.want) != 0:
			out = append(out, manifestaudit.At(s.depU, where, b.want.String(), sum.String()))
		}
	}
	return out
}

// envSetting is an environment variable and the literal value it must have.
type envSetting struct{ name, value string }

// limitEnv and quotaEnv are the configured limits and quotas
// (docs/operation-audit.md records the names).
var (
	limitEnv = []envSetting{
		{"QL3_PLUGIN_PACKAGE_MANAGEMENT_MAX_CONCURRENT_REQUESTS", "16"},
		{"QL3_PLUGIN_PACKAGE_MANAGEMENT_MAX_RATE_LIMIT_PEERS", "512"},
		{"QL3_PLUGIN_PACKAGE_MANAGEMENT_MAX_CONNECTIONS", "32"},
		{"QL3_POSTGRES_PACKAGE_MANAGER_MAX_CONNECTIONS", "2"},
	}
	quotaEnv = []envSetting{
		{"QL3_PLUGIN_PACKAGE_MANAGEMENT_QUOTA_WINDOW_MS", "60000"},
		{"QL3_PLUGIN_PACKAGE_MANAGEMENT_PROPOSE_QUOTA", "30"},
		{"QL3_PLUGIN_PACKAGE_MANAGEMENT_DECIDE_QUOTA", "60"},
		{"QL3_PLUGIN_PACKAGE_MANAGEMENT_INSPECT_QUOTA", "600"},
		{"QL3_PLUGIN_PACKAGE_MANAGEMENT_QUOTA_MAX_RECEIPTS", "1000"},
	}
)

// envValues checks, for each setting the management container carries, that
// it is a literal with exactly the reviewed value.
func envValues(settings []envSetting) func(*subject) []Finding {
	return func(s *subject) []Finding {
		env := s.env()
		var out []Finding
		for _, st := range settings {
			e, ok := env[st.name]
			if !ok {
				continue
			}
			if f, bad := literal(e, st.value); bad {
				out = append(out, manifestaudit.At(s.depU, valuePath(e), fmt.Sprintf("%s=%s", st.name, st.value), f))
			}
		}
		return out
	}
}

// literal reports what e holds and whether it is not the literal want.
func literal(e envVar, want string) (string, bool) {
	if e.v.ValueFrom != nil {
		return "a valueFrom reference the audit cannot read", true
	}
	return manifestaudit.Quote(e.v.Value), e.v.Value != want
}

// valuePath is the path of e's value or valueFrom.
func valuePath(e envVar) string {
	if e.v.ValueFrom != nil {
		return e.path + ".valueFrom"
	}
	return e.path + ".value"
}

// requireLiteral checks that the management container sets name to want.
func requireLiteral(s *subject, name, want string) []Finding {
	c, cp := s.container()
	if c == nil {
		return nil
	}
	e, ok := s.env()[name]
	if !ok {
		return []Finding{manifestaudit.At(s.depU, cp+".env", fmt.Sprintf("%s=%s", name, want), "<unset>")}
	}
	if f, bad := literal(e, want); bad {
		return []Finding{manifestaudit.At(s.depU, valuePath(e), fmt.Sprintf("%s=%s", name, want), f)}
	}
	return nil
}

func checkProfile(s *subject) []Finding {
	return requireLiteral(s, "QL3_PROFILE", "cluster-admin")
}

func checkSwitch(s *subject) []Finding {
	return requireLiteral(s, SwitchEnv, "true")
}

// absoluteIn checks that env var name is a literal absolute clean path
// inside a mount of Secret secret.
func absoluteIn(s *subject, name, secret string) []Finding {
	c, cp := s.container()
	if c == nil {
		return nil
	}
	want := fmt.Sprintf("an absolute path inside the mount of Secret %q", secret)
	e, ok := s.env()[name]
	switch {
	case !ok:
		return []Finding{manifestaudit.At(s.depU, cp+".env", name+": "+want, "<unset>")}
	case e.v.ValueFrom != nil:
		return []Finding{manifestaudit.At(s.depU, valuePath(e), name+": "+want, "a valueFrom reference the audit cannot read")}
	case !path.IsAbs(e.v.Value) || path.Clean(e.v.Value) != e.v.Value:
		return []Finding{manifestaudit.At(s.depU, e.path+".value", want, manifestaudit.Quote(e.v.Value))}
	}
	mounts := s.mountPaths(secret)
	if len(mounts) == 0 {
		return nil // the mount rule reports the missing mount
	}
	for _, m := range mounts {
		if within(e.v.Value, m) && path.Clean(e.v.Value) != path.Clean(m) {
			return nil
		}
	}
	return []Finding{manifestaudit.At(s.depU, e.path+".value", fmt.Sprintf("a path inside %q", mounts), manifestaudit.Quote(e.v.Value))}
}

func checkPaths(s *subject) []Finding {
	var out []Finding
	out = append(out, absoluteIn(s, "QL3_PLUGIN_PACKAGE_MANAGEMENT_TLS_CERT_FILE", TLSSecret)...)
	out = append(out, absoluteIn(s, "QL3_PLUGIN_PACKAGE_MANAGEMENT_TLS_KEY_FILE", TLSSecret)...)
	out = append(out, absoluteIn(s, "QL3_PLUGIN_PACKAGE_MANAGEMENT_IDENTITY_KEYSET_FILE", IdentitySecret)...)
	return out
}

func checkDatabaseTLS(s *subject) []Finding {
	c, cp := s.container()
	if c == nil {
		return nil
	}
	out := requireLiteral(s, "QL3_POSTGRES_PACKAGE_MANAGER_TLS_MODE", "verify-full")
	env := s.env()
	if e, ok := env["QL3_POSTGRES_PACKAGE_MANAGER_TLS_SERVERNAME"]; !ok || e.v.ValueFrom == nil && e.v.Value == "" {
		out = append(out, manifestaudit.At(s.depU, cp+".env", "QL3_POSTGRES_PACKAGE_MANAGER_TLS_SERVERNAME: the database's DNS name", "<unset>"))
	}
	if e, ok := env["QL3_POSTGRES_PACKAGE_MANAGER_ALLOW_INSECURE"]; ok && (e.v.ValueFrom != nil || e.v.Value != "false") {
		f, _ := literal(e, "false")
		out = append(out, manifestaudit.At(s.depU, valuePath(e), "QL3_POSTGRES_PACKAGE_MANAGER_ALLOW_INSECURE <unset> or false", f))
	}
	return append(out, absoluteIn(s, "QL3_POSTGRES_PACKAGE_MANAGER_TLS_CA_FILE", DatabaseCASecret)...)
}
