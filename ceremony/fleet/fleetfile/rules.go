package fleetfile

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var (
	// labelRE is a DNS-1123 label (length checked separately).
	labelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	// subdomainRE is a DNS-1123 subdomain (length checked separately).
	subdomainRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	// labelNameRE is a label key's name part, and a non-empty label value.
	labelNameRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	// soakRE is a duration of whole hours, minutes and seconds.
	soakRE = regexp.MustCompile(`^(?:([0-9]{1,9})h)?(?:([0-9]{1,9})m)?(?:([0-9]{1,9})s)?$`)
)

// checkName is the rule of a target's, a namespace's and a wave's name:
// a DNS-1123 label of 1 to 63 characters. It returns the problem, or "".
func checkName(v string) string {
	if len(v) == 0 || len(v) > 63 || !labelRE.MatchString(v) {
		return quote(v) + " is not a DNS-1123 label (1-63 of a-z, 0-9 and '-', starting and ending with a letter or digit)"
	}
	return ""
}

// checkLabelKey is Kubernetes' rule of a label key: an optional prefix (a
// DNS-1123 subdomain of at most 253 characters) and '/', then a name of 1
// to 63 characters of letters, digits, '-', '_' and '.', starting and
// ending with a letter or digit.
func checkLabelKey(k string) string {
	prefix, name, hasPrefix := strings.Cut(k, "/")
	if !hasPrefix {
		prefix, name = "", k
	}
	switch {
	case hasPrefix && (len(prefix) == 0 || len(prefix) > 253 || !subdomainRE.MatchString(prefix)):
		return "the key's prefix " + quote(prefix) + " is not a DNS-1123 subdomain of at most 253 characters"
	case len(name) == 0 || len(name) > 63 || !labelNameRE.MatchString(name):
		return "the key's name " + quote(name) + " is not a label name (1-63 of letters, digits, '-', '_' and '.', starting and ending with a letter or digit)"
	}
	return ""
}

// checkLabelValue is Kubernetes' rule of a label value: empty, or like a
// label key's name.
func checkLabelValue(v string) string {
	if v != "" && (len(v) > 63 || !labelNameRE.MatchString(v)) {
		return quote(v) + " is not a label value (empty, or 1-63 of letters, digits, '-', '_' and '.', starting and ending with a letter or digit)"
	}
	return ""
}

// checkPath is the rule of a kubeconfig or release path: relative to the
// fleet file's directory, inside it, clean, '/'-separated, without control
// characters. (Load also resolves its symbolic links.)
func checkPath(v, dir string) string {
	switch {
	case v == "":
		return "is empty"
	case len(v) > MaxPathBytes:
		return fmt.Sprintf("is %d bytes long, at most %d are allowed", len(v), MaxPathBytes)
	case strings.ContainsFunc(v, isControl):
		return quote(v) + " holds a control character"
	case strings.Contains(v, `\`):
		return quote(v) + ` holds a '\'; separate directories with '/'`
	case strings.HasPrefix(v, "/"):
		return quote(v) + " is absolute; write it relative to " + dir
	case v == ".." || strings.HasPrefix(v, "../") || strings.Contains(v, "/../") || strings.HasSuffix(v, "/.."):
		return quote(v) + " leads outside " + dir
	case v == ".":
		return quote(v) + " names " + dir + " itself; name a file or directory inside it"
	case path.Clean(v) != v:
		return quote(v) + " is not a clean path; write " + quote(path.Clean(v))
	}
	return ""
}

// checkContext is the rule of a kubeconfig context name: 1 to 253 bytes
// without control characters.
func checkContext(v string) string {
	switch {
	case v == "":
		return "is empty; leave the field out for the kubeconfig's current context"
	case len(v) > MaxContextBytes:
		return fmt.Sprintf("is %d bytes long, at most %d are allowed", len(v), MaxContextBytes)
	case strings.ContainsFunc(v, isControl):
		return quote(v) + " holds a control character"
	}
	return ""
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// parseSoak reads a soak: whole hours, minutes and seconds in that order,
// each at most once and at least one (30s, 5m, 1h30m, 0s), at most MaxSoak.
func parseSoak(v string) (time.Duration, string) {
	m := soakRE.FindStringSubmatch(v)
	if v == "" || m == nil {
		return 0, quote(v) + " is not a duration of whole hours, minutes and seconds, like 30s, 5m or 1h30m (0s for none)"
	}
	var seconds int64 // at most 9 digits each: no overflow
	for i, unit := range []int64{3600, 60, 1} {
		if m[i+1] != "" {
			n, _ := strconv.ParseInt(m[i+1], 10, 64)
			seconds += n * unit
		}
	}
	if seconds > int64(MaxSoak/time.Second) {
		return 0, quote(v) + " is longer than 24h"
	}
	d := time.Duration(seconds) * time.Second
	return d, ""
}

// CheckName is the rule of a target's, a wave's and a namespace's name, for
// the formats built on the fleet: nil, or an error saying what is wrong.
func CheckName(v string) error { return problemErr(checkName(v)) }

// CheckPath is the rule of a path relative to a directory it must stay in
// (a kubeconfig, a release, a plan's preflight record), dir naming that
// directory in the error ("the plan's directory"): nil, or an error saying
// what is wrong.
func CheckPath(v, dir string) error { return problemErr(checkPath(v, dir)) }

func problemErr(p string) error {
	if p == "" {
		return nil
	}
	return errors.New(p)
}
