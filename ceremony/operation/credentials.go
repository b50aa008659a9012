package operation

// The credential rules: the Secrets the pod may reference and the credentials
// of other authorities it must not carry.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/qinglong/kubectl-ql3/internal/manifestaudit"
)

// secretRef is one reference from the pod to a Secret.
type secretRef struct{ name, path string }

// secretRefs are the Secrets the management pod references through secret
// and projected volumes and env valueFrom (envFrom and image pull secrets
// are the credentials rule's).
func (s *subject) secretRefs() []secretRef {
	p := s.pod()
	if p == nil {
		return nil
	}
	var out []secretRef
	for i, v := range p.Volumes {
		vp := fmt.Sprintf("%s.volumes[%d]", podPath, i)
		if v.Secret != nil {
			out = append(out, secretRef{v.Secret.SecretName, vp + ".secret.secretName"})
		}
		if v.Projected != nil {
			for j, src := range v.Projected.Sources {
				if src.Secret != nil {
					out = append(out, secretRef{src.Secret.Name, fmt.Sprintf("%s.projected.sources[%d].secret.name", vp, j)})
				}
			}
		}
	}
	for _, cr := range s.containers() {
		for i, e := range cr.c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				out = append(out, secretRef{e.ValueFrom.SecretKeyRef.Name, fmt.Sprintf("%s.env[%d].valueFrom.secretKeyRef.name", cr.path, i)})
			}
		}
	}
	return out
}

func checkDatabaseSecrets(s *subject) []Finding {
	if s.pod() == nil {
		return nil
	}
	allowed := []string{TLSSecret, IdentitySecret, DatabaseAuthSecret, DatabaseCASecret}
	var out []Finding
	auth := false
	for _, r := range s.secretRefs() {
		switch {
		case r.name == DatabaseAuthSecret:
			auth = true
		case !slices.Contains(allowed, r.name):
			out = append(out, manifestaudit.At(s.depU, r.path, fmt.Sprintf("one of %q", allowed), manifestaudit.Quote(r.name)))
		}
	}
	if !auth {
		_, cp := s.container()
		out = append(out, manifestaudit.At(s.depU, cp+".env", fmt.Sprintf("the database credential from Secret %q", DatabaseAuthSecret), "none"))
	}
	return out
}

// forbiddenEnvPrefixes are environment names that carry another authority's
// credential.
var forbiddenEnvPrefixes = []string{
	"QL3_POSTGRES_PACKAGE_EXECUTOR_",
	"QL3_POSTGRES_ADMIN_",
	"QL3_POSTGRES_RUNTIME_",
	"QL3_POSTGRES_MIGRATION_",
	"QL3_API_CREDENTIAL_PEPPER",
	"QL3_REGISTRY_",
	"DOCKER_CONFIG",
	"REGISTRY_AUTH_FILE",
}

func checkCredentials(s *subject) []Finding {
	p := s.pod()
	if p == nil {
		return nil
	}
	var out []Finding
	for _, cr := range s.containers() {
		for i, e := range cr.c.Env {
			for _, pre := range forbiddenEnvPrefixes {
				if strings.HasPrefix(e.Name, pre) {
					out = append(out, manifestaudit.At(s.depU, fmt.Sprintf("%s.env[%d].name", cr.path, i), "no executor, admin, runtime, migration or registry credential", e.Name))
					break
				}
			}
		}
		for i := range cr.c.EnvFrom {
			out = append(out, manifestaudit.At(s.depU, fmt.Sprintf("%s.envFrom[%d]", cr.path, i), "no envFrom (it can import credentials the audit cannot see)", "envFrom"))
		}
	}
	for i, r := range p.ImagePullSecrets {
		out = append(out, manifestaudit.At(s.depU, fmt.Sprintf("%s.imagePullSecrets[%d]", podPath, i), "no registry credential on the pod", manifestaudit.Quote(r.Name)))
	}
	return out
}
