package testcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

// OIDCPrefix is what kube-apiserver puts before the username (the sub
// claim) and before each group of a token from the test issuer: alice of
// the issuer is "oidc:alice", never a certificate user's or a system name.
const OIDCPrefix = "oidc:"

// oidcClientID is the issuer's one client: the audience kube-apiserver
// accepts and the client_id the exec plugin asks with.
const oidcClientID = "kubectl-ql3"

// oidcLoginPkg is the exec credential plugin, built once per control plane.
const oidcLoginPkg = "github.com/qinglong/kubectl-ql3/internal/testcluster/oidclogin"

// startOIDC starts the test issuer, writes kube-apiserver's
// AuthenticationConfiguration trusting it, and builds the exec plugin.
func (cp *ControlPlane) startOIDC() error {
	is, err := startIssuer(cp.ca, oidcClientID)
	if err != nil {
		return fmt.Errorf("oidc issuer: %w", err)
	}
	cp.oidc = is
	cfg, err := authenticationConfig(is.url, cp.ca.certPEM)
	if err != nil {
		return err
	}
	if err := os.WriteFile(cp.path("authentication-config.yaml"), cfg, 0o600); err != nil {
		return err
	}
	if err := os.MkdirAll(cp.path("bin"), 0o700); err != nil {
		return err
	}
	cp.oidcLogin = cp.path("bin", "oidc-login")
	build := exec.Command("go", "build", "-o", cp.oidcLogin, oidcLoginPkg)
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %v\n%s", oidcLoginPkg, err, out)
	}
	return nil
}

// authenticationConfig is the structured authentication configuration
// (apiserver.config.k8s.io/v1) of one JWT authenticator: the test issuer,
// trusted by the control plane's CA, its one audience, username from sub
// and groups from groups, both prefixed with OIDCPrefix.
func authenticationConfig(issuerURL string, caPEM []byte) ([]byte, error) {
	prefixed := func(claim string) map[string]string { return map[string]string{"claim": claim, "prefix": OIDCPrefix} }
	return yaml.Marshal(map[string]any{
		"apiVersion": "apiserver.config.k8s.io/v1",
		"kind":       "AuthenticationConfiguration",
		"jwt": []any{map[string]any{
			"issuer": map[string]any{
				"url":                  issuerURL,
				"certificateAuthority": string(caPEM),
				"audiences":            []string{oidcClientID},
			},
			"claimMappings": map[string]any{"username": prefixed("sub"), "groups": prefixed("groups")},
		}},
	})
}

// waitOIDC waits until kube-apiserver accepts a token of the issuer: its
// JWT authenticator fetches discovery and keys asynchronously after the
// server listens, and answers 401 until then.
func (cp *ControlPlane) waitOIDC(timeout time.Duration) error {
	const probe = "ql3-oidc-probe"
	tok, err := signES256(cp.oidc.key, cp.oidc.kid, cp.oidc.claims(probe, nil))
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cp.bearerConfig(tok))
	if err != nil {
		return err
	}
	var last error
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		if got := r.Status.UserInfo.Username; got != OIDCPrefix+probe {
			return false, fmt.Errorf("a token of the test issuer for %q was taken for %q", probe, got)
		}
		return true, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("kube-apiserver does not accept the test issuer's tokens after %s (last answer: %v): its JWT authenticator's errors are in %s",
			timeout, last, cp.path("logs", "kube-apiserver.log"))
	}
	return err
}

// bearerConfig is a client configuration that sends token and nothing else.
func (cp *ControlPlane) bearerConfig(token string) *rest.Config {
	return &rest.Config{Host: cp.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: cp.ca.certPEM}}
}

// OIDCUser registers username with groups at the test issuer (a fresh
// password; registering again replaces it) and writes a kubeconfig whose
// user is an exec credential plugin, as a real identity provider's
// kubelogin is: client-go runs the plugin, which asks the issuer's token
// endpoint for an ID token and prints it as an ExecCredential. The API
// server sees OIDCPrefix+username with the groups prefixed the same way.
// It needs Options.OIDC.
func (cp *ControlPlane) OIDCUser(t testing.TB, username string, groups ...string) string {
	t.Helper()
	if cp.oidc == nil {
		t.Fatal("OIDCUser: the control plane was started without Options.OIDC")
	}
	password := cp.oidc.register(username, groups)
	auth := &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1",
		Command:    cp.oidcLogin,
		Args: []string{"get-token",
			"--oidc-issuer-url=" + cp.oidc.url,
			"--oidc-client-id=" + oidcClientID,
			"--certificate-authority=" + cp.path("pki", "ca.crt"),
			"--username=" + username},
		Env:             []clientcmdapi.ExecEnvVar{{Name: "OIDC_PASSWORD", Value: password}},
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}}
	if err := os.MkdirAll(cp.path("kubeconfigs", "oidc"), 0o700); err != nil {
		t.Fatal(err)
	}
	path := cp.path("kubeconfigs", "oidc", strings.NewReplacer(":", "_", "/", "_").Replace(username)+".yaml")
	if err := cp.writeKubeconfig(path, OIDCPrefix+username, auth); err != nil {
		t.Fatal(err)
	}
	return path
}

// OIDCConfig is OIDCUser as a client configuration: every request's token
// comes from the exec plugin through client-go's exec authenticator.
func (cp *ControlPlane) OIDCConfig(t testing.TB, username string, groups ...string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.OIDCUser(t, username, groups...))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	return cfg
}
