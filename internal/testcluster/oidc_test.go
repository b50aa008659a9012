package testcluster

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/qinglong/kubectl-ql3/internal/testkit"
)

// whoami is the user the API server authenticated cfg as (SelfSubjectReview).
func whoami(cfg *rest.Config) (authnv1.UserInfo, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return authnv1.UserInfo{}, err
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authnv1.UserInfo{}, err
	}
	return r.Status.UserInfo, nil
}

func wantUser(t *testing.T, cfg *rest.Config, user string, groups ...string) {
	t.Helper()
	got, err := whoami(cfg)
	if err != nil {
		t.Fatalf("SelfSubjectReview as %s: %v", user, err)
	}
	if got.Username != user || !slices.Equal(got.Groups, groups) {
		t.Fatalf("authenticated as %q %q, want %q %q", got.Username, got.Groups, user, groups)
	}
}

// An OIDC user's requests carry a token the exec plugin got from the test
// issuer, through client-go's exec authenticator; the API server's JWT
// authenticator maps it to oidc:alice and prefixed groups. A client
// certificate user works alongside, and an issuer group named
// system:masters is only oidc:system:masters, which grants nothing.
func TestOIDCUserThroughExecPlugin(t *testing.T) {
	before := cp.oidc.grants("alice")
	wantUser(t, cp.OIDCConfig(t, "alice", "approvers", "team-a"),
		"oidc:alice", "oidc:approvers", "oidc:team-a", "system:authenticated")
	if got := cp.oidc.grants("alice") - before; got != 1 {
		t.Fatalf("the token endpoint granted alice %d tokens, want 1 (the exec plugin's)", got)
	}
	wantUser(t, cp.User(t, "bob", "team-b"), "bob", "team-b", "system:authenticated")

	mallory := cp.OIDCConfig(t, "mallory", "system:masters")
	wantUser(t, mallory, "oidc:mallory", "oidc:system:masters", "system:authenticated")
	_, err := kubernetes.NewForConfigOrDie(mallory).CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("list namespaces as oidc:mallory in the issuer's group system:masters: err = %v, want 403 Forbidden", err)
	}
}

// The JWT authenticator verifies what it is given: each token below
// differs from the accepted first one in one thing only, and is refused
// with 401.
func TestOIDCTokenRejected(t *testing.T) {
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hour := int64(time.Hour / time.Second)
	for _, tt := range []struct {
		name   string
		key    *ecdsa.PrivateKey // nil: the issuer's
		change func(*idClaims)
		want   string // "": 401 Unauthorized
	}{
		{"valid", nil, func(*idClaims) {}, "oidc:trudy"},
		{"signed by another key under the issuer's kid", other, func(*idClaims) {}, ""},
		{"expired", nil, func(c *idClaims) { c.IssuedAt -= 2 * hour; c.NotBefore -= 2 * hour; c.Expiry = c.IssuedAt + hour }, ""},
		{"wrong audience", nil, func(c *idClaims) { c.Audience = []string{"someone-else"} }, ""},
		{"another issuer", nil, func(c *idClaims) { c.Issuer += "/other" }, ""},
		{"not yet valid", nil, func(c *idClaims) { c.NotBefore += hour; c.Expiry += hour }, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			key := cp.oidc.key
			if tt.key != nil {
				key = tt.key
			}
			c := cp.oidc.claims("trudy", nil)
			tt.change(&c)
			tok, err := signES256(key, cp.oidc.kid, c)
			if err != nil {
				t.Fatal(err)
			}
			got, err := whoami(cp.bearerConfig(tok))
			switch {
			case tt.want != "" && (err != nil || got.Username != tt.want):
				t.Fatalf("authenticated as %q (err %v), want %q", got.Username, err, tt.want)
			case tt.want == "" && !apierrors.IsUnauthorized(err):
				t.Fatalf("authenticated as %q (err %v), want 401 Unauthorized", got.Username, err)
			}
		})
	}
}

// kubectl's own client-go runs the same exec plugin: `kubectl auth whoami`
// with the OIDC user's kubeconfig is oidc:carol, with one token granted.
func TestKubectlWhoamiThroughExecPlugin(t *testing.T) {
	path := cp.OIDCUser(t, "carol", "approvers")
	before := cp.oidc.grants("carol")
	cmd := exec.Command(filepath.Join(cp.BinDir, "kubectl"), "auth", "whoami", "--kubeconfig", path,
		"--cache-dir", t.TempDir(), "-o", "json")
	cmd.Env = cleanEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl auth whoami: %v\n%s", err, stderr.Bytes())
	}
	var r authnv1.SelfSubjectReview
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("kubectl auth whoami -o json: %v\n%s", err, out)
	}
	u := r.Status.UserInfo
	if u.Username != "oidc:carol" || !slices.Equal(u.Groups, []string{"oidc:approvers", "system:authenticated"}) {
		t.Fatalf("kubectl auth whoami: %q %q, want oidc:carol [oidc:approvers system:authenticated]", u.Username, u.Groups)
	}
	if got := cp.oidc.grants("carol") - before; got != 1 {
		t.Fatalf("the token endpoint granted carol %d tokens during kubectl auth whoami, want 1", got)
	}
}

// The plugin, run as the kubeconfig says, prints a v1 ExecCredential whose
// token carries the issuer's claims and whose expiry is the token's exp; a
// wrong password or a missing flag prints no credential and says why.
func TestOIDCLoginPlugin(t *testing.T) {
	kc, err := clientcmd.LoadFromFile(cp.OIDCUser(t, "dora", "readers"))
	if err != nil {
		t.Fatal(err)
	}
	ex := kc.AuthInfos["oidc:dora"].Exec
	password := ex.Env[0].Name + "=" + ex.Env[0].Value
	out, stderr, code := runPlugin(t, ex.Command, ex.Args, password)
	if code != 0 {
		t.Fatalf("oidc-login exited %d: %s", code, stderr)
	}
	var cred clientauthv1.ExecCredential
	if err := json.Unmarshal([]byte(out), &cred); err != nil {
		t.Fatal(err)
	}
	if cred.APIVersion != "client.authentication.k8s.io/v1" || cred.Kind != "ExecCredential" || cred.Status == nil || cred.Status.ExpirationTimestamp == nil {
		t.Fatalf("credential %s: want a client.authentication.k8s.io/v1 ExecCredential with a token and an expiry", out)
	}
	c := tokenClaims(t, cred.Status.Token)
	if c.Issuer != cp.oidc.url || c.Subject != "dora" || !slices.Equal(c.Audience, []string{oidcClientID}) ||
		!slices.Equal(c.Groups, []string{"readers"}) || c.NotBefore != c.IssuedAt ||
		c.Expiry-c.IssuedAt != int64(oidcTokenLifetime/time.Second) || cred.Status.ExpirationTimestamp.Unix() != c.Expiry {
		t.Fatalf("claims %+v, expiry %s: want the issuer's, sub dora, aud %s, groups [readers], exp = iat+%s = the expiry", c, cred.Status.ExpirationTimestamp, oidcClientID, oidcTokenLifetime)
	}
	wantUser(t, cp.bearerConfig(cred.Status.Token), "oidc:dora", "oidc:readers", "system:authenticated")

	for _, tt := range []struct {
		name, password, want string
		args                 []string
	}{
		{"wrong password", "OIDC_PASSWORD=not-" + ex.Env[0].Value, "HTTP 400 invalid_grant", ex.Args},
		{"no username", password, "--username is required", ex.Args[:len(ex.Args)-1]},
	} {
		out, stderr, code := runPlugin(t, ex.Command, tt.args, tt.password)
		if code != 1 || out != "" || !strings.Contains(stderr, tt.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1, no output, %q", tt.name, code, out, stderr, tt.want)
		}
	}
}

func runPlugin(t *testing.T, command string, args []string, env string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(command, args...)
	cmd.Env = append(cleanEnv(), env)
	return testkit.Run(t, cmd)
}

func tokenClaims(t *testing.T, jwt string) idClaims {
	t.Helper()
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("token is not a compact JWS: %d parts", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c idClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		t.Fatal(err)
	}
	return c
}
