package jwkset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/qinglong/kubectl-ql3/internal/strictjson"
)

// topMembers is the exact set of members of a keyset document.
var topMembers = []string{"generation", "keys", "revokedKids"}

// maxDepth bounds nesting: the shape has three levels (document, keys
// array, key); one more lets an unknown array member such as x5c be named.
const maxDepth = 4

var generationRE = regexp.MustCompile(`^[1-9][0-9]*$`)

// Parse reads one keyset generation from the bytes of a keyset file and
// validates it (docs/keyset.md): at most HardMaxBytes of strict UTF-8 JSON,
// one object of exactly the members generation, keys and revokedKids, no
// duplicate member names anywhere, and every rule of Validate. Errors are
// fail.Invalid and name the offending member.
func Parse(data []byte) (*Keyset, error) {
	if err := checkText(data); err != nil {
		return nil, err
	}
	top, err := object("document", data, topMembers, topMembers)
	if err != nil {
		return nil, err
	}
	k := &Keyset{}
	g := bytes.TrimSpace(top["generation"])
	if !generationRE.Match(g) {
		return nil, invalidf("generation: %s is not a positive integer written in plain decimal digits", clip(g))
	}
	if k.Generation, err = strconv.ParseInt(string(g), 10, 64); err != nil || k.Generation > MaxGeneration {
		return nil, invalidf("generation: %s is larger than %d", g, int64(MaxGeneration))
	}
	keys, err := array("keys", top["keys"])
	if err != nil {
		return nil, err
	}
	if len(keys) > MaxKeys {
		return nil, invalidf("keys: %d keys, at most %d are allowed; revoke old keys first", len(keys), MaxKeys)
	}
	for i, raw := range keys {
		j, err := parseJWK(fmt.Sprintf("keys[%d]", i), raw)
		if err != nil {
			return nil, err
		}
		k.Keys = append(k.Keys, j)
	}
	revoked, err := array("revokedKids", top["revokedKids"])
	if err != nil {
		return nil, err
	}
	if len(revoked) > MaxRevokedKids {
		return nil, invalidf("revokedKids: %d entries, at most %d are allowed", len(revoked), MaxRevokedKids)
	}
	k.RevokedKids = []string{}
	for i, raw := range revoked {
		s, err := str(fmt.Sprintf("revokedKids[%d]", i), raw)
		if err != nil {
			return nil, err
		}
		k.RevokedKids = append(k.RevokedKids, s)
	}
	if err := k.Validate(); err != nil {
		return nil, err
	}
	return k, nil
}

// ParseJWK reads one public JWK, a JSON object on its own (the key a
// rotation adds), with the same rules as a key inside a keyset.
func ParseJWK(data []byte) (JWK, error) {
	if err := checkText(data); err != nil {
		return JWK{}, err
	}
	return parseJWK("key", data)
}

func parseJWK(field string, raw json.RawMessage) (JWK, error) {
	members, err := object(field, raw, nil, nil)
	if err != nil {
		return JWK{}, err
	}
	for _, p := range privateMembers {
		if _, ok := members[p]; ok {
			return JWK{}, invalidf("%s.%s: a private key member; a keyset holds public keys only — remove %q and check the private key was not exposed", field, p, p)
		}
	}
	var j JWK
	if j.Kty, err = str(field+".kty", members["kty"]); err != nil {
		return JWK{}, err
	}
	allowed, ok := allowedMembers[j.Kty]
	if !ok {
		return JWK{}, invalidf("%s.kty: %q; want %q (Ed25519), %q (P-256) or %q", field, j.Kty, KtyOKP, KtyEC, KtyRSA)
	}
	names := make([]string, 0, len(members))
	for name := range members {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !slices.Contains(allowed, name) {
			return JWK{}, invalidf("%s.%s: unknown member for a %s key; allowed are %v", field, name, j.Kty, allowed)
		}
	}
	fields := map[string]*string{"kid": &j.Kid, "alg": &j.Alg, "use": &j.Use, "crv": &j.Crv, "x": &j.X, "y": &j.Y, "n": &j.N, "e": &j.E}
	for _, name := range allowed[1:] {
		raw, present := members[name]
		if !present {
			if name == "use" {
				continue
			}
			return JWK{}, invalidf("%s.%s: missing", field, name)
		}
		if *fields[name], err = str(field+"."+name, raw); err != nil {
			return JWK{}, err
		}
		if name == "use" && j.Use == "" {
			return JWK{}, invalidf("%s.use: empty; leave it out or write \"sig\"", field)
		}
	}
	if err := j.Validate(field); err != nil {
		return JWK{}, err
	}
	return j, nil
}

// checkText enforces the byte-level rules: size, strict UTF-8, no byte
// order mark, exactly one JSON value, no duplicate member names and no
// nesting deeper than the shape.
func checkText(data []byte) error {
	if len(data) > HardMaxBytes {
		return invalidf("%d bytes, more than the hard cap of %d", len(data), HardMaxBytes)
	}
	if !utf8.Valid(data) {
		return invalidf("not valid UTF-8")
	}
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return invalidf("starts with a byte order mark; save the file as UTF-8 without BOM")
	}
	return checkJSON(data)
}

// checkJSON: one JSON value, no duplicate member names at any depth
// (encoding/json silently keeps the last), no nesting deeper than the
// shape.
func checkJSON(data []byte) error {
	if err := strictjson.Check(data, maxDepth, "keyset"); err != nil {
		return invalidf("%s", err)
	}
	return nil
}
