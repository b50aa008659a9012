// Command oidc-login is the client-go exec credential plugin of the test
// OpenID Connect issuer (internal/testcluster, Options.OIDC), shaped like
// kubelogin's `get-token` with the password grant: it reads the issuer's
// discovery document, asks its token endpoint for an ID token (OAuth 2.0
// password grant, RFC 6749 §4.3) over HTTPS trusting only the given CA,
// and prints a client.authentication.k8s.io/v1 ExecCredential carrying the
// token and its expiry (the token's exp claim). It caches nothing: client-go
// keeps the credential until it expires or the API server answers 401.
//
//	oidc-login get-token --oidc-issuer-url=URL --oidc-client-id=ID \
//	    --certificate-authority=FILE --username=NAME   (password in $OIDC_PASSWORD)
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
)

func main() {
	if err := run(os.Args[1:], os.Getenv("OIDC_PASSWORD"), os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "oidc-login: %v\n", err)
		os.Exit(1)
	}
}

type options struct {
	issuer, clientID, caFile, username, password string
}

func parse(args []string, password string) (options, error) {
	if len(args) == 0 || args[0] != "get-token" {
		return options{}, errors.New("usage: oidc-login get-token --oidc-issuer-url=URL --oidc-client-id=ID --certificate-authority=FILE --username=NAME (password in $OIDC_PASSWORD)")
	}
	var o options
	fs := flag.NewFlagSet("oidc-login get-token", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.issuer, "oidc-issuer-url", "", "the issuer URL (https)")
	fs.StringVar(&o.clientID, "oidc-client-id", "", "the OAuth client ID")
	fs.StringVar(&o.caFile, "certificate-authority", "", "PEM file of the CA that signed the issuer's certificate")
	fs.StringVar(&o.username, "username", "", "the user to ask a token for")
	if err := fs.Parse(args[1:]); err != nil {
		return o, err
	}
	o.password = password
	for _, f := range []struct{ name, v string }{
		{"--oidc-issuer-url", o.issuer}, {"--oidc-client-id", o.clientID},
		{"--certificate-authority", o.caFile}, {"--username", o.username}, {"$OIDC_PASSWORD", o.password},
	} {
		if f.v == "" {
			return o, fmt.Errorf("%s is required", f.name)
		}
	}
	if !strings.HasPrefix(o.issuer, "https://") {
		return o, fmt.Errorf("--oidc-issuer-url %q: the issuer must be https", o.issuer)
	}
	return o, nil
}

func run(args []string, password string, out io.Writer) error {
	o, err := parse(args, password)
	if err != nil {
		return err
	}
	client, err := httpsClient(o.caFile)
	if err != nil {
		return err
	}
	var disc struct {
		Issuer        string `json:"issuer"`
		TokenEndpoint string `json:"token_endpoint"`
	}
	if err := getJSON(client, o.issuer+"/.well-known/openid-configuration", &disc); err != nil {
		return err
	}
	if disc.Issuer != o.issuer || disc.TokenEndpoint == "" {
		return fmt.Errorf("discovery of %s names issuer %q and token endpoint %q: want that issuer and an endpoint", o.issuer, disc.Issuer, disc.TokenEndpoint)
	}
	token, exp, err := passwordGrant(client, disc.TokenEndpoint, o)
	if err != nil {
		return err
	}
	cred := clientauthv1.ExecCredential{
		TypeMeta: metav1.TypeMeta{APIVersion: clientauthv1.SchemeGroupVersion.String(), Kind: "ExecCredential"},
		Status:   &clientauthv1.ExecCredentialStatus{Token: token, ExpirationTimestamp: &metav1.Time{Time: exp}},
	}
	return json.NewEncoder(out).Encode(cred)
}

func httpsClient(caFile string) (*http.Client, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--certificate-authority: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--certificate-authority %s: no PEM certificate in it", caFile)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}, nil
}

func getJSON(c *http.Client, u string, v any) error {
	resp, err := c.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v)
}

// passwordGrant asks the token endpoint for an ID token and returns it
// with its exp claim.
func passwordGrant(c *http.Client, endpoint string, o options) (string, time.Time, error) {
	resp, err := c.PostForm(endpoint, url.Values{"grant_type": {"password"}, "scope": {"openid"},
		"client_id": {o.clientID}, "username": {o.username}, "password": {o.password}})
	if err != nil {
		return "", time.Time{}, err
	}
	defer resp.Body.Close()
	var body struct {
		IDToken string `json:"id_token"`
		Error   string `json:"error"`
		Desc    string `json:"error_description"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil {
		return "", time.Time{}, fmt.Errorf("token endpoint %s: HTTP %d: %w", endpoint, resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK || body.IDToken == "" {
		return "", time.Time{}, fmt.Errorf("token endpoint %s refused %q: HTTP %d %s: %s", endpoint, o.username, resp.StatusCode, body.Error, body.Desc)
	}
	exp, err := expiry(body.IDToken)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("token endpoint %s: id_token: %w", endpoint, err)
	}
	return body.IDToken, exp, nil
}

// expiry reads the exp claim of a compact JWT without verifying it: the
// API server verifies the token; the plugin only tells client-go when to
// ask again.
func expiry(jwt string) (time.Time, error) {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return time.Time{}, errors.New("not a compact JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, err
	}
	var c struct {
		Exp int64 `json:"exp"`
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return time.Time{}, err
	}
	if c.Exp == 0 {
		return time.Time{}, errors.New("no exp claim")
	}
	return time.Unix(c.Exp, 0), nil
}
