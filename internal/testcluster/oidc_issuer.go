package testcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// oidcIssuer is the test OpenID Connect issuer: an HTTPS server in the test
// process, with a serving certificate from the control plane's CA, that
// serves discovery (/.well-known/openid-configuration), the JWKS of one
// fresh ES256 key (/keys) and a token endpoint (/token) granting ID tokens
// by the OAuth 2.0 password grant (RFC 6749 §4.3) to the accounts a test
// registered. kube-apiserver's JWT authenticator trusts it; the exec
// credential plugin (oidclogin) asks it for tokens.
type oidcIssuer struct {
	url      string
	audience string // the one client ID, and the tokens' aud
	key      *ecdsa.PrivateKey
	kid      string // the RFC 7638 thumbprint of the key
	srv      *http.Server

	mu       sync.Mutex
	accounts map[string]oidcAccount
	granted  map[string]int // tokens the token endpoint granted, per username
}

type oidcAccount struct {
	password string
	groups   []string
}

// idClaims are the claims of the ID tokens the issuer mints.
type idClaims struct {
	Issuer    string   `json:"iss"`
	Subject   string   `json:"sub"`
	Audience  []string `json:"aud"`
	Expiry    int64    `json:"exp"`
	IssuedAt  int64    `json:"iat"`
	NotBefore int64    `json:"nbf"`
	Groups    []string `json:"groups,omitempty"`
}

// oidcTokenLifetime is how long an ID token the issuer grants is valid.
const oidcTokenLifetime = 10 * time.Minute

func startIssuer(ca *authority, audience string) (*oidcIssuer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	kid, err := jwkThumbprint(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	crt, crtKey, err := ca.issue("ql3-test-oidc-issuer", nil, true)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(crt, crtKey)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	is := &oidcIssuer{
		url: "https://" + ln.Addr().String(), audience: audience, key: key, kid: kid,
		accounts: map[string]oidcAccount{}, granted: map[string]int{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", is.discovery)
	mux.HandleFunc("GET /keys", is.jwks)
	mux.HandleFunc("POST /token", is.token)
	is.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}}
	go func() { _ = is.srv.ServeTLS(ln, "", "") }()
	return is, nil
}

func (is *oidcIssuer) stop() { _ = is.srv.Close() }

// register gives username a fresh password and these groups (replacing an
// earlier registration) and returns the password.
func (is *oidcIssuer) register(username string, groups []string) string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	pw := base64.RawURLEncoding.EncodeToString(b)
	is.mu.Lock()
	defer is.mu.Unlock()
	is.accounts[username] = oidcAccount{password: pw, groups: append([]string(nil), groups...)}
	return pw
}

// grants is how many tokens the token endpoint granted username.
func (is *oidcIssuer) grants(username string) int {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.granted[username]
}

// claims are the claims of a token issued now for username and groups.
func (is *oidcIssuer) claims(username string, groups []string) idClaims {
	now := time.Now()
	return idClaims{Issuer: is.url, Subject: username, Audience: []string{is.audience},
		Expiry: now.Add(oidcTokenLifetime).Unix(), IssuedAt: now.Unix(), NotBefore: now.Unix(), Groups: groups}
}

func (is *oidcIssuer) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                is.url,
		"jwks_uri":                              is.url + "/keys",
		"token_endpoint":                        is.url + "/token",
		"grant_types_supported":                 []string{"password"},
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"ES256"},
		"claims_supported":                      []string{"iss", "sub", "aud", "exp", "iat", "nbf", "groups"},
	})
}

func (is *oidcIssuer) jwks(w http.ResponseWriter, _ *http.Request) {
	jwk, err := publicJWK(&is.key.PublicKey)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	jwk["kid"], jwk["use"], jwk["alg"] = is.kid, "sig", "ES256"
	writeJSON(w, http.StatusOK, map[string]any{"keys": []any{jwk}})
}

// token is the password grant: client_id must be the audience, scope must
// ask for openid, and the username and password those registered. Errors
// are RFC 6749 §5.2's.
func (is *oidcIssuer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	f := r.PostForm
	switch {
	case f.Get("grant_type") != "password":
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "only grant_type=password is supported")
		return
	case f.Get("client_id") != is.audience:
		oauthError(w, http.StatusUnauthorized, "invalid_client", fmt.Sprintf("unknown client_id %q", f.Get("client_id")))
		return
	case !slices.Contains(strings.Fields(f.Get("scope")), "openid"):
		oauthError(w, http.StatusBadRequest, "invalid_scope", "scope must include openid")
		return
	}
	user := f.Get("username")
	is.mu.Lock()
	acct, ok := is.accounts[user]
	ok = ok && subtle.ConstantTimeCompare([]byte(acct.password), []byte(f.Get("password"))) == 1
	if ok {
		is.granted[user]++
	}
	is.mu.Unlock()
	if !ok {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown username or wrong password")
		return
	}
	tok, err := signES256(is.key, is.kid, is.claims(user, acct.groups))
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{"access_token": tok, "id_token": tok, "token_type": "Bearer",
		"expires_in": int(oidcTokenLifetime.Seconds())})
}

func oauthError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// signES256 is a compact JWS (RFC 7515) of claims under key, ES256 (RFC
// 7518 §3.4: the signature is R and S, 32 bytes each, big-endian).
func signES256(key *ecdsa.PrivateKey, kid string, claims idClaims) (string, error) {
	header, err := json.Marshal(map[string]string{"alg": "ES256", "typ": "JWT", "kid": kid})
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	b64 := base64.RawURLEncoding.EncodeToString
	input := b64(header) + "." + b64(payload)
	sum := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
	if err != nil {
		return "", err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + b64(sig), nil
}

// publicJWK is the P-256 public key as a JWK's required members (RFC 7518
// §6.2.1).
func publicJWK(pub *ecdsa.PublicKey) (map[string]string, error) {
	pt, err := pub.Bytes() // 0x04 || X || Y
	if err != nil {
		return nil, err
	}
	if len(pt) != 65 {
		return nil, errors.New("not a P-256 public key")
	}
	b64 := base64.RawURLEncoding.EncodeToString
	return map[string]string{"kty": "EC", "crv": "P-256", "x": b64(pt[1:33]), "y": b64(pt[33:])}, nil
}

// jwkThumbprint is the RFC 7638 thumbprint of pub: SHA-256 of its required
// members in lexicographic order, no whitespace (encoding/json sorts map
// keys), base64url.
func jwkThumbprint(pub *ecdsa.PublicKey) (string, error) {
	jwk, err := publicJWK(pub)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(jwk)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}
