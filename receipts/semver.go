package receipts

import "github.com/Masterminds/semver/v3"

// maxVersionLen bounds a version string; a receipt file name carries it.
const maxVersionLen = 128

// isSemVer reports whether v is strict SemVer 2.0.0 without a leading "v".
func isSemVer(v string) bool {
	if len(v) > maxVersionLen {
		return false
	}
	_, err := semver.StrictNewVersion(v)
	return err == nil
}

// compareSemVer orders two valid SemVer 2.0.0 versions by precedence
// (semver.org §11); build metadata is ignored.
func compareSemVer(a, b string) int {
	return semver.MustParse(a).Compare(semver.MustParse(b))
}
