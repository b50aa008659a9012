package receipts

import (
	"cmp"
	"regexp"
	"strings"
)

// semverRE is the SemVer 2.0.0 grammar (semver.org), without a leading "v".
var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// maxVersionLen bounds a version string; a receipt file name carries it.
const maxVersionLen = 128

func isSemVer(v string) bool { return len(v) <= maxVersionLen && semverRE.MatchString(v) }

// compareSemVer orders two valid SemVer 2.0.0 versions by precedence
// (semver.org §11); build metadata is ignored.
func compareSemVer(a, b string) int {
	ma, mb := semverRE.FindStringSubmatch(a), semverRE.FindStringSubmatch(b)
	for i := 1; i <= 3; i++ {
		if c := compareNumeric(ma[i], mb[i]); c != 0 {
			return c
		}
	}
	pa, pb := ma[4], mb[4]
	switch {
	case pa == "" && pb == "":
		return 0
	case pa == "":
		return 1 // a release outranks any pre-release
	case pb == "":
		return -1
	}
	ia, ib := strings.Split(pa, "."), strings.Split(pb, ".")
	for i := 0; i < len(ia) && i < len(ib); i++ {
		if c := compareIdentifier(ia[i], ib[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(ia), len(ib))
}

// compareNumeric compares decimal strings without leading zeros.
func compareNumeric(a, b string) int {
	return cmp.Or(cmp.Compare(len(a), len(b)), cmp.Compare(a, b))
}

func compareIdentifier(a, b string) int {
	na, nb := isNumeric(a), isNumeric(b)
	switch {
	case na && nb:
		return compareNumeric(a, b)
	case na:
		return -1 // numeric identifiers rank below alphanumeric ones
	case nb:
		return 1
	}
	return cmp.Compare(a, b)
}

func isNumeric(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
