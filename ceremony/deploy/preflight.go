package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/safefile"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// PreflightSchema is the preflight record's schema.
const PreflightSchema = "qinglong/preflight@v1"

// Command is the exact intent an operator asked for. Its digest is the
// command digest the Head and the receipt carry.
type Command struct {
	Transition      string       `json:"transition"`
	ExpectedHead    ExpectedHead `json:"expectedHead"`
	Version         string       `json:"version"`
	LockDigest      string       `json:"lockDigest"`
	InventoryDigest string       `json:"inventoryDigest"`
	ClusterIdentity string       `json:"clusterIdentity"`
	Namespace       string       `json:"namespace"`
	FieldManager    string       `json:"fieldManager"`
	ForceConflicts  bool         `json:"forceConflicts"`
	// Supersedes (preflight --supersede N) names the applying generation
	// this transition supersedes (docs/ceremony.md §7.5); absent otherwise,
	// so every other record is byte for byte what it was before.
	Supersedes *SupersedeIntent `json:"supersedes,omitempty"`
	// Approval (preflight --approval) is the two-person rule's policy
	// after this transition: "two-person", or absent when off, so every
	// record without the rule is byte for byte what it was before.
	Approval string `json:"approval,omitempty"`
}

// SupersedeIntent is the applying generation a preflight supersedes, as
// that Head recorded its transition: the command and preflight digests and
// the mutation id of the process that last held it.
type SupersedeIntent struct {
	Generation      int64  `json:"generation"`
	CommandDigest   string `json:"commandDigest"`
	PreflightDigest string `json:"preflightDigest"`
	MutationID      string `json:"mutationId"`
}

// supersedeIntentOf is the intent that supersedes the applying Head h.
func supersedeIntentOf(h *Head) SupersedeIntent {
	return SupersedeIntent{Generation: h.Generation, CommandDigest: h.Transition.CommandDigest,
		PreflightDigest: h.Transition.PreflightDigest, MutationID: h.Transition.MutationID}
}

// check is the record's own rule for supersedes: an upgrade or rollback,
// the generation its expected Head names (2 or more), digests and a
// mutation id.
func (s *SupersedeIntent) check(c Command) error {
	switch {
	case s == nil:
		return nil
	case c.Transition != TransitionUpgrade && c.Transition != TransitionRollback:
		return fmt.Errorf("command.supersedes on a %s: only an upgrade or a rollback supersedes", c.Transition)
	case s.Generation < 2 || s.Generation != c.ExpectedHead.Generation:
		return fmt.Errorf("command.supersedes.generation %d: want the expected Head's generation %d, at least 2", s.Generation, c.ExpectedHead.Generation)
	case !inventory.IsDigest(s.CommandDigest) || !inventory.IsDigest(s.PreflightDigest) || !mutationIDRE.MatchString(s.MutationID):
		return fmt.Errorf("command.supersedes: commandDigest and preflightDigest must be digests and mutationId 32 lowercase hex digits")
	}
	return nil
}

// Digest is the command digest.
func (c Command) Digest() (string, error) { return inventory.DigestOf(inventory.DomainCommand, c) }

// PreflightRelease binds the release directory the preflight verified.
type PreflightRelease struct {
	Dir             string `json:"dir"`
	Version         string `json:"version"`
	LockDigest      string `json:"lockDigest"`
	SourceDigest    string `json:"sourceDigest"`
	RenderDigest    string `json:"renderDigest"`
	InventoryDigest string `json:"inventoryDigest"`
	InventoryCount  int    `json:"inventoryCount"`
}

// changes names each member of r that now differs, by its record field
// (its json name), in the record's order: "lockDigest sha256:… at
// preflight, sha256:… now; …". Every field is compared, so a member added
// to the record is named too.
func (r PreflightRelease) changes(now PreflightRelease) string {
	var out []string
	then, cur := reflect.ValueOf(r), reflect.ValueOf(now)
	for i := range then.NumField() {
		if a, b := then.Field(i).Interface(), cur.Field(i).Interface(); a != b {
			name, _, _ := strings.Cut(then.Type().Field(i).Tag.Get("json"), ",")
			out = append(out, fmt.Sprintf("%s %v at preflight, %v now", name, a, b))
		}
	}
	return strings.Join(out, "; ")
}

// PreflightSteps are the transcripts of the read-only steps.
type PreflightSteps struct {
	Identity string `json:"identity"`
	DryRun   string `json:"dryRun"`
}

// PreflightRecord is what `kubectl ql3 preflight` writes and `apply` and
// `resume` consume. Its canonical JSON without selfDigest, under the
// "preflight" domain, is the preflight digest (= SelfDigest).
type PreflightRecord struct {
	Schema        string           `json:"schema"`
	Command       Command          `json:"command"`
	CommandDigest string           `json:"commandDigest"`
	Release       PreflightRelease `json:"release"`
	Target        receipts.Target  `json:"target"`
	Tool          receipts.Tool    `json:"tool"`
	Steps         PreflightSteps   `json:"steps"`
	// DiffDigest, set by preflight --diff only, is the digest of the
	// change list the operator was shown (docs/head.md, "diffDigest").
	DiffDigest string `json:"diffDigest,omitempty"`
	// Retired, on a retire only, lists each retired object with the UID,
	// resourceVersion and reviewed digest preflight read (all empty:
	// absent), outcome "pending" (docs/ceremony.md §11). Omitted on other
	// transitions.
	Retired []receipts.Retired `json:"retired,omitempty"`
	// Proposer, when the transition needs an approval (the Head's policy
	// is on or command.approval turns it on), is the preflight's caller
	// as the API server authenticated them; absent otherwise.
	Proposer   string `json:"proposer,omitempty"`
	SelfDigest string `json:"selfDigest"`
}

// Seal computes the command and preflight digests.
func (p *PreflightRecord) Seal() error {
	var err error
	if p.CommandDigest, err = p.Command.Digest(); err != nil {
		return err
	}
	p.SelfDigest, err = digestWithout(inventory.DomainPreflight, p, "selfDigest")
	return err
}

// Bytes is the record's canonical JSON.
func (p *PreflightRecord) Bytes() ([]byte, error) { return inventory.Canonical(p) }

// ParsePreflight strictly parses a preflight record and checks its digests.
func ParsePreflight(name string, data []byte) (*PreflightRecord, error) {
	bad := func(format string, args ...any) error {
		return fail.Errorf(fail.Invalid, "preflight %s: "+format, append([]any{name}, args...)...)
	}
	var p PreflightRecord
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimSuffix(data, []byte("\n"))))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, bad("%v", err)
	}
	if dec.More() {
		return nil, bad("trailing data")
	}
	canon, err := p.Bytes()
	if err != nil {
		return nil, bad("%v", err)
	}
	if !bytes.Equal(canon, bytes.TrimSuffix(data, []byte("\n"))) {
		return nil, bad("not canonical JSON, or fields missing or repeated")
	}
	if p.Schema != PreflightSchema {
		return nil, bad("schema %q, want %q", p.Schema, PreflightSchema)
	}
	want := p
	if err := want.Seal(); err != nil {
		return nil, bad("%v", err)
	}
	if want.CommandDigest != p.CommandDigest || want.SelfDigest != p.SelfDigest {
		return nil, bad("commandDigest or selfDigest does not match the content: the record was edited")
	}
	c := p.Command
	switch {
	case c.Transition != TransitionInstall && c.Transition != TransitionUpgrade && c.Transition != TransitionRollback && c.Transition != TransitionRetire:
		return nil, bad("command.transition %q", c.Transition)
	case c.Version != p.Release.Version || c.LockDigest != p.Release.LockDigest || c.InventoryDigest != p.Release.InventoryDigest:
		return nil, bad("command and release disagree")
	case c.ClusterIdentity != p.Target.ClusterIdentity || c.Namespace != p.Target.Namespace:
		return nil, bad("command and target disagree")
	case !inventory.IsDigest(p.Steps.Identity) || !inventory.IsDigest(p.Steps.DryRun):
		return nil, bad("steps.identity and steps.dryRun must be digests")
	case p.DiffDigest != "" && !inventory.IsDigest(p.DiffDigest):
		return nil, bad("diffDigest %q is not a digest", p.DiffDigest)
	}
	if err := checkRetiredList(c.Transition, true, p.Retired); err != nil {
		return nil, bad("%v", err)
	}
	if err := c.Supersedes.check(c); err != nil {
		return nil, bad("%v", err)
	}
	if err := checkApprovalIntent(&p); err != nil {
		return nil, bad("%v", err)
	}
	return &p, nil
}

// MaxPreflightBytes caps a preflight record file, as receipts.MaxFileSize
// caps a receipt (a record is smaller than the receipt of its transition).
const MaxPreflightBytes = receipts.MaxFileSize

// ReadPreflight reads and parses a preflight record file: a regular file
// of at most MaxPreflightBytes (safefile.ReadRegular: a named pipe in its
// place is refused, never waited on).
func ReadPreflight(path string) (*PreflightRecord, error) {
	data, err := safefile.ReadRegular(path, MaxPreflightBytes)
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "--preflight: %w", err)
	}
	return ParsePreflight(path, data)
}

// WriteNoReplace writes data to path through a temporary file in the same
// directory and publishes it with link(2), which fails if path exists: an
// existing file is never replaced. An existing byte-identical file is a
// replay (replayed=true).
func WriteNoReplace(path string, data []byte) (replayed bool, err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(dir, ".ql3-*.tmp")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if !os.IsExist(err) {
			return false, err
		}
		if same, rerr := holds(path, data); rerr != nil || same {
			return same, rerr
		}
		return false, fail.Errorf(fail.Invalid, "%s already exists with different content; it was not replaced (choose another --out)", path)
	}
	return false, nil
}

// holds reports whether the regular file at path holds exactly data; it
// reads at most one byte more (safefile.OpenRegular: a named pipe at path
// is refused, never waited on).
func holds(path string, data []byte) (bool, error) {
	f, err := safefile.OpenRegular(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	existing, err := io.ReadAll(io.LimitReader(f, int64(len(data))+1))
	return err == nil && bytes.Equal(existing, data), err
}

func (e ExpectedHead) describe() string {
	if e.Generation == 0 {
		return "absent"
	}
	return fmt.Sprintf("generation %d", e.Generation)
}
