package intent

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"

	"github.com/qinglong/kubectl-ql3/internal/strictjson"
)

var integerRE = regexp.MustCompile(`^[1-9][0-9]{0,15}$`)

// Parse reads an intent document: at most MaxIntentBytes of UTF-8 JSON,
// one object with exactly the v1 members, no duplicates, each of its JSON
// type (strings; generation a plain decimal integer; previousLockDigest a
// string or null), then Normalize. Errors are fail.Invalid and name the
// member.
func Parse(data []byte) (Intent, error) {
	if len(data) > MaxIntentBytes {
		return Intent{}, invalidf("document is %d bytes, at most %d are allowed", len(data), MaxIntentBytes)
	}
	return parseIntent("intent", data)
}

func parseIntent(what string, data []byte) (Intent, error) {
	m, err := strict.Object(what, data, members)
	if err != nil {
		return Intent{}, err
	}
	var in Intent
	for _, f := range []struct {
		name string
		dst  *string
	}{
		{"schema", &in.Schema}, {"clusterIdentity", &in.ClusterIdentity}, {"namespace", &in.Namespace},
		{"projectId", &in.ProjectID}, {"packageId", &in.PackageID}, {"lockDigest", &in.LockDigest},
		{"stageReference", &in.StageReference}, {"stageReceiptDigest", &in.StageReceiptDigest},
		{"adapterEvidenceDigest", &in.AdapterEvidenceDigest}, {"contentDigest", &in.ContentDigest},
	} {
		if *f.dst, err = strict.String(f.name, m[f.name]); err != nil {
			return Intent{}, err
		}
	}
	if in.Generation, err = integer("generation", m["generation"]); err != nil {
		return Intent{}, err
	}
	if raw := m["previousLockDigest"]; !bytes.Equal(raw, []byte("null")) {
		p, err := strict.String("previousLockDigest", raw)
		if err != nil {
			return Intent{}, invalidf("previousLockDigest: write a digest string or null")
		}
		in.PreviousLockDigest = &p
	}
	return Normalize(in)
}

// strict reads the members with this format's error texts (pinned by its
// test vectors).
var strict = strictjson.Reader{Invalid: invalidf, NotString: "is not a JSON string"}

// integer is a positive integer member in plain decimal digits, at most
// MaxGeneration.
func integer(name string, raw json.RawMessage) (int64, error) {
	if !integerRE.Match(raw) {
		return 0, invalidf("%s: %s is not a positive integer written in plain decimal digits", name, strictjson.Clip(raw))
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n > MaxGeneration {
		return 0, invalidf("%s: %s is larger than %d (2^53-1)", name, raw, int64(MaxGeneration))
	}
	return n, nil
}
