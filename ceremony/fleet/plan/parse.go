package plan

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/strictjson"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// maxDepth is how deep the record nests: plan, waves, wave, targets,
// target.
const maxDepth = 5

// unsealed is the plan without selfDigest: what the plan digest covers.
type unsealed struct {
	Schema      string `json:"schema"`
	FleetDigest string `json:"fleetDigest"`
	Tool        Tool   `json:"tool"`
	Waves       []Wave `json:"waves"`
}

func canonWithout(p *Plan) ([]byte, error) {
	return canon.Canonical(unsealed{Schema: p.Schema, FleetDigest: p.FleetDigest, Tool: p.Tool, Waves: p.Waves})
}

// Parse reads a fleet plan record (docs/fleet.md §4.3), name naming it in
// errors: at most MaxPlanBytes; exactly the canonical JSON of a plan (one
// trailing newline allowed), so no unknown, missing or repeated member;
// the schema; the plan digest recomputed; then every rule of §4.2. A
// selfDigest that does not match the content is fail.Tamper (the record
// was edited after it was sealed); everything else is fail.Invalid.
func Parse(name string, data []byte) (*Plan, error) {
	bad := func(format string, args ...any) error {
		return fail.Errorf(fail.Invalid, "fleet plan %s: "+format, append([]any{name}, args...)...)
	}
	if len(data) > MaxPlanBytes {
		return nil, bad("the file is %d bytes, at most %d are allowed", len(data), MaxPlanBytes)
	}
	body := bytes.TrimSuffix(data, []byte("\n"))
	if err := strictjson.Check(body, maxDepth, "fleet plan"); err != nil {
		return nil, bad("%v", err)
	}
	var p Plan
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, bad("%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	c, err := canon.Canonical(&p)
	if err != nil {
		return nil, bad("%v", err)
	}
	if !bytes.Equal(c, body) {
		return nil, bad("not canonical JSON (RFC 8785, one line), or members missing: a plan is written only by fleet preflight")
	}
	if p.Schema != Schema {
		return nil, bad("schema %q, want %q", strictjson.Clip(p.Schema), Schema)
	}
	want := p
	if err := want.Seal(); err != nil {
		return nil, bad("%v", err)
	}
	if want.SelfDigest != p.SelfDigest {
		return nil, fail.Errorf(fail.Tamper, "fleet plan %s: selfDigest %s does not match the content (%s): the plan was edited after fleet preflight sealed it; do not use it, run fleet preflight again",
			name, strictjson.Clip(p.SelfDigest), want.SelfDigest)
	}
	if err := p.check(); err != nil {
		return nil, bad("%v", err)
	}
	return &p, nil
}
