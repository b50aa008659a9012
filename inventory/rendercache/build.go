package rendercache

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// Module is one module of a build, as the build identity covers it.
type Module struct {
	Path    string `json:"path"`
	Version string `json:"version"`
	Sum     string `json:"sum"`
	// Replace is the replacement's path@version, if any.
	Replace string `json:"replace,omitempty"`
}

// Setting is one build setting (debug.BuildSetting): a flag such as
// -tags or -ldflags, a GOOS/GOARCH/CGO value, or a vcs.* stamp.
type Setting struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Build is what a build identity binds: the main module, every dependency
// (kustomize's modules among them) with their sums, the build settings
// (VCS revision and modified flag among them), and, for a build those do
// not identify (Identified), the SHA-256 of the executable itself.
type Build struct {
	GoVersion  string    `json:"goVersion"`
	Main       Module    `json:"main"`
	Deps       []Module  `json:"deps"`
	Settings   []Setting `json:"settings"`
	Executable string    `json:"executable,omitempty"`
}

// BuildOf extracts the build identity's input from build information.
// Dependencies are sorted by path, settings by key then value. Executable
// is left empty: see BuildID.
func BuildOf(bi *debug.BuildInfo) Build {
	mod := func(m *debug.Module) Module {
		out := Module{Path: m.Path, Version: m.Version, Sum: m.Sum}
		if m.Replace != nil {
			out.Replace = m.Replace.Path + "@" + m.Replace.Version + " " + m.Replace.Sum
		}
		return out
	}
	b := Build{GoVersion: bi.GoVersion, Main: mod(&bi.Main), Deps: []Module{}, Settings: []Setting{}}
	for _, d := range bi.Deps {
		b.Deps = append(b.Deps, mod(d))
	}
	slices.SortFunc(b.Deps, func(x, y Module) int { return strings.Compare(x.Path, y.Path) })
	for _, s := range bi.Settings {
		b.Settings = append(b.Settings, Setting{Key: s.Key, Value: s.Value})
	}
	slices.SortFunc(b.Settings, func(x, y Setting) int {
		return cmp.Or(strings.Compare(x.Key, y.Key), strings.Compare(x.Value, y.Value))
	})
	return b
}

// Identified reports whether the build information alone names the code
// of the build, and why not: the main module has a released version (with
// its sum) or a VCS revision of an unmodified tree, and every dependency
// and replacement has a go.sum hash. A development build of a modified
// tree, or one without VCS stamps (built outside a checkout, or with
// -buildvcs=false), or one with a local replacement, is not identified:
// two such builds with one go.sum would otherwise share every key.
func (b Build) Identified() (bool, string) {
	rev, modified := "", ""
	for _, s := range b.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	released := b.Main.Version != "" && b.Main.Version != "(devel)" && b.Main.Sum != ""
	switch {
	case !released && rev == "":
		return false, "the build has no module version and no VCS revision"
	case !released && modified != "false":
		return false, "the build is of a modified tree (vcs.modified=" + modified + ")"
	case b.Main.Replace != "":
		return false, "the main module is replaced"
	}
	for _, d := range b.Deps {
		if d.Sum == "" || (d.Replace != "" && strings.HasSuffix(d.Replace, " ")) {
			return false, "dependency " + d.Path + " has no go.sum hash (a local replacement)"
		}
	}
	return true, ""
}

// BuildDigest is the build identity of b: the canonical JSON of b under
// DomainBuild.
func BuildDigest(b Build) (string, error) { return canon.DigestOf(DomainBuild, b) }

// BuildID is the running binary's build identity, and how it was made
// ("" when the build information identifies the build; otherwise a
// sentence saying that the executable's digest was added, and why). A
// build the information does not identify (Build.Identified) is
// identified by the SHA-256 of its own executable file as well, so two
// such builds share keys only when their executables are byte for byte
// the same. An executable that cannot be read is an error: the cache is
// then off.
func BuildID() (id, how string, err error) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = &debug.BuildInfo{}
	}
	b := BuildOf(bi)
	if ok, why := b.Identified(); !ok {
		if b.Executable, err = executableDigest(); err != nil {
			return "", "", fmt.Errorf("%s, and its executable cannot be hashed: %w", why, err)
		}
		how = why + ": keyed by the executable's SHA-256 as well"
	}
	id, err = BuildDigest(b)
	return id, how, err
}

// executableDigest is "sha256:" + hex(SHA-256) of the running executable.
func executableDigest() (string, error) {
	p, err := os.Executable()
	if err != nil {
		return "", err
	}
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return canon.DigestPrefix + hex.EncodeToString(h.Sum(nil)), nil
}
