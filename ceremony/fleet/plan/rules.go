package plan

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/qinglong/kubectl-ql3/ceremony/fleet/fleetfile"
	"github.com/qinglong/kubectl-ql3/internal/strictjson"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

var (
	// semverRE is SemVer 2.0.0 (semver.org's expression), no leading v.
	semverRE = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)` +
		`(?:-((?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
		`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
	// tokenRE is an expected-Head token of a present Head.
	tokenRE = regexp.MustCompile(`^ql3h1-([1-9][0-9]{0,15})-[0-9a-f]{64}-[0-9a-f]{64}-[0-9a-f]{64}$`)
)

// check is every rule of docs/fleet.md §4.2, in the doc's order; the error
// names the member of the first broken one.
func (p *Plan) check() error {
	if !canon.IsDigest(p.FleetDigest) {
		return fmt.Errorf("fleetDigest: %q is not a digest", strictjson.Clip(p.FleetDigest))
	}
	if err := p.Tool.check(); err != nil {
		return err
	}
	if len(p.Waves) == 0 {
		return fmt.Errorf("waves: a plan has at least one wave")
	}
	count := 0
	waves, names, files, records, heads := map[string]string{}, map[string]string{}, map[string]string{}, map[string]string{}, map[string]string{}
	for i, w := range p.Waves {
		path := fmt.Sprintf("waves[%d]", i)
		if err := w.check(path); err != nil {
			return err
		}
		if err := unique(waves, w.Name, path+".name"); err != nil {
			return err
		}
		for j, t := range w.Targets {
			tp := fmt.Sprintf("%s.targets[%d]", path, j)
			if err := t.check(tp); err != nil {
				return err
			}
			for _, u := range []struct {
				seen       map[string]string
				key, field string
			}{{names, t.Name, tp + ".name"}, {files, t.Preflight, tp + ".preflight"}, {records, t.PreflightDigest, tp + ".preflightDigest"},
				{heads, "cluster " + t.ClusterIdentity + " namespace " + t.Namespace, tp}} {
				if err := unique(u.seen, u.key, u.field); err != nil {
					return err
				}
			}
			count++
		}
	}
	if count > fleetfile.MaxTargets {
		return fmt.Errorf("waves: %d targets, at most %d are allowed", count, fleetfile.MaxTargets)
	}
	return nil
}

func (t Tool) check() error {
	switch {
	case t.Name != ToolName:
		return fmt.Errorf("tool.name: %q, want %q", strictjson.Clip(t.Name), ToolName)
	case t.Version == "" || len(t.Version) > MaxVersionBytes || strings.ContainsFunc(t.Version, isControl):
		return fmt.Errorf("tool.version: %q is not 1 to %d bytes without control characters", strictjson.Clip(t.Version), MaxVersionBytes)
	case t.FieldManager == "" || len(t.FieldManager) > MaxVersionBytes || strings.ContainsFunc(t.FieldManager, isControl):
		return fmt.Errorf("tool.fieldManager: %q is not 1 to %d bytes without control characters", strictjson.Clip(t.FieldManager), MaxVersionBytes)
	}
	return nil
}

// unique records key as field's; a key seen before is an error naming
// both fields.
func unique(seen map[string]string, key, field string) error {
	if prev, dup := seen[key]; dup {
		return fmt.Errorf("%s: %s is also %s's: each is unique in a plan (one Head, one target, one record)", field, strictjson.Clip(key), prev)
	}
	seen[key] = field
	return nil
}

// check is a wave's own rules.
func (w Wave) check(path string) error {
	if err := fleetfile.CheckName(w.Name); err != nil {
		return fmt.Errorf("%s.name: %v", path, err)
	}
	max := fleetfile.MaxTargets
	switch {
	case w.MaxParallel < 1 || w.MaxParallel > max:
		return fmt.Errorf("%s.maxParallel: %d is not from 1 to %d", path, w.MaxParallel, max)
	case w.MaxFailures < 0 || w.MaxFailures > max:
		return fmt.Errorf("%s.maxFailures: %d is not from 0 to %d", path, w.MaxFailures, max)
	case w.SoakSeconds < 0 || w.SoakSeconds > int64(fleetfile.MaxSoak.Seconds()):
		return fmt.Errorf("%s.soakSeconds: %d is not from 0 to %d", path, w.SoakSeconds, int64(fleetfile.MaxSoak.Seconds()))
	case w.Gate != fleetfile.GateAuto && w.Gate != fleetfile.GateApproval:
		return fmt.Errorf("%s.gate: %q, want %q or %q", path, strictjson.Clip(w.Gate), fleetfile.GateAuto, fleetfile.GateApproval)
	case len(w.Targets) == 0:
		return fmt.Errorf("%s.targets: a wave has at least one target", path)
	}
	return nil
}

// check is a target entry's own rules.
func (t Target) check(path string) error {
	if err := fleetfile.CheckName(t.Name); err != nil {
		return fmt.Errorf("%s.name: %v", path, err)
	}
	if err := fleetfile.CheckName(t.Namespace); err != nil {
		return fmt.Errorf("%s.namespace: %v", path, err)
	}
	if err := fleetfile.CheckPath(t.Preflight, "the plan's directory"); err != nil {
		return fmt.Errorf("%s.preflight: %v", path, err)
	}
	for _, d := range []struct{ member, v string }{{"clusterIdentity", t.ClusterIdentity}, {"preflightDigest", t.PreflightDigest},
		{"commandDigest", t.CommandDigest}, {"lockDigest", t.LockDigest}, {"inventoryDigest", t.InventoryDigest}} {
		if !canon.IsDigest(d.v) {
			return fmt.Errorf("%s.%s: %q is not a digest (sha256: and 64 lowercase hex digits)", path, d.member, strictjson.Clip(d.v))
		}
	}
	switch t.Transition {
	case TransitionInstall, TransitionUpgrade, TransitionRollback, TransitionRetire:
	default:
		return fmt.Errorf("%s.transition: %q, want install, upgrade, rollback or retire", path, strictjson.Clip(t.Transition))
	}
	if len(t.Version) > MaxVersionBytes || !semverRE.MatchString(t.Version) {
		return fmt.Errorf("%s.version: %q is not a SemVer 2.0.0 version of at most %d bytes", path, strictjson.Clip(t.Version), MaxVersionBytes)
	}
	return t.checkHead(path)
}

// checkHead: the token is a token, install exactly onto no Head, and the
// generation is the token's plus one.
func (t Target) checkHead(path string) error {
	var from int64
	if t.ExpectedHead != AbsentToken {
		m := tokenRE.FindStringSubmatch(t.ExpectedHead)
		if m == nil {
			return fmt.Errorf("%s.expectedHead: %q is not an expected-Head token (%s, or ql3h1-<generation>-<64 hex>-<64 hex>-<64 hex>)", path, strictjson.Clip(t.ExpectedHead), AbsentToken)
		}
		from, _ = strconv.ParseInt(m[1], 10, 64)
		if from >= MaxGeneration {
			return fmt.Errorf("%s.expectedHead: generation %d is too large", path, from)
		}
	}
	if (t.Transition == TransitionInstall) != (from == 0) {
		return fmt.Errorf("%s.transition: %s onto expectedHead %s; an install is exactly onto no Head (%s), every other transition onto one", path, t.Transition, strictjson.Clip(t.ExpectedHead), AbsentToken)
	}
	if t.Generation != from+1 {
		return fmt.Errorf("%s.generation: %d, want %d (the expected Head's generation plus one)", path, t.Generation, from+1)
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }
