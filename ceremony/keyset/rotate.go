package keyset

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/qinglong/kubectl-ql3/ceremony/keyset/jwkset"
)

// Summary describes one keyset generation, as keyset verify, plan-rotation
// and publish report it: no key material, only what a reviewer compares.
type Summary struct {
	File        string       `json:"file"`
	Generation  int64        `json:"generation"`
	Digest      string       `json:"digest"`
	Keys        []KeySummary `json:"keys"`
	RevokedKids []string     `json:"revokedKids"`
}

// KeySummary names one key of a Summary.
type KeySummary struct {
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Kty string `json:"kty"`
	Crv string `json:"crv,omitempty"`
}

// Summarize describes k, read from (or to be written to) file.
func Summarize(file string, k *jwkset.Keyset) (Summary, error) {
	d, err := k.Digest()
	if err != nil {
		return Summary{}, err
	}
	s := Summary{File: file, Generation: k.Generation, Digest: d, RevokedKids: k.RevokedKids}
	for _, j := range k.Keys {
		s.Keys = append(s.Keys, KeySummary{Kid: j.Kid, Alg: j.Alg, Kty: j.Kty, Crv: j.Crv})
	}
	if s.RevokedKids == nil {
		s.RevokedKids = []string{}
	}
	return s, nil
}

// Kids lists the summary's key IDs, comma-separated.
func (s Summary) Kids() string {
	kids := make([]string, len(s.Keys))
	for i, k := range s.Keys {
		kids[i] = k.Kid
	}
	return strings.Join(kids, ", ")
}

// NewFile is a file a plan asks to create (never to replace).
type NewFile struct {
	Path string
	Data []byte
}

// RotationPlan is `kubectl ql3 keyset plan-rotation`: the two generations
// of a rotation, the files that hold them and the order in which they may
// be published (docs/keyset.md, "Rotation").
type RotationPlan struct {
	Current   Summary  `json:"current"`
	Overlap   Summary  `json:"overlap"`
	Revoking  Summary  `json:"revoking"`
	Revoked   []string `json:"revoked"`
	Procedure []string `json:"procedure"`
	// Files are the overlap and the revoking generation's files, in dir.
	Files []NewFile `json:"-"`
}

// PlanRotation plans replacing the keys of cur, read from curFile, by add
// (jwkset.PlanRotation; revoke limits the revocation), the two new files
// named keyset-<generation>.json in dir.
func PlanRotation(cur *jwkset.Keyset, curFile string, add jwkset.JWK, revoke []string, dir string) (*RotationPlan, error) {
	r, err := jwkset.PlanRotation(cur, add, revoke)
	if err != nil {
		return nil, err
	}
	p := &RotationPlan{Revoked: r.Revoked}
	for _, g := range []struct {
		into *Summary
		file string
		k    *jwkset.Keyset
	}{{&p.Current, curFile, cur}, {&p.Overlap, "", r.Overlap}, {&p.Revoking, "", r.Revoking}} {
		if g.file == "" {
			g.file = filepath.Join(dir, fmt.Sprintf("keyset-%d.json", g.k.Generation))
			data, err := g.k.Encode()
			if err != nil {
				return nil, err
			}
			p.Files = append(p.Files, NewFile{Path: g.file, Data: data})
		}
		if *g.into, err = Summarize(g.file, g.k); err != nil {
			return nil, err
		}
	}
	p.Procedure = []string{
		fmt.Sprintf("publish %s (generation %d, digest %s)", p.Overlap.File, p.Overlap.Generation, p.Overlap.Digest),
		fmt.Sprintf("wait until every replica has observed generation %d; until then do not sign with key %q", p.Overlap.Generation, add.Kid),
		fmt.Sprintf("only then publish %s (generation %d, digest %s), which revokes %s", p.Revoking.File, p.Revoking.Generation, p.Revoking.Digest, strings.Join(r.Revoked, ", ")),
		fmt.Sprintf("the revoked keys are revoked cluster-wide only once every replica has observed generation %d", p.Revoking.Generation),
	}
	return p, nil
}
