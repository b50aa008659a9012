package rendercache

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"regexp"
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
// identified by its own executable as well (executableDigest: its Go build
// ID, else its SHA-256), so two such builds share keys only when their
// executables are byte for byte the same. An executable that cannot be read is an error: the cache is
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
		how = why + ": keyed by the executable as well (" + b.Executable + ")"
	}
	id, err = BuildDigest(b)
	return id, how, err
}

// executableDigest names the running executable's bytes: the Go build ID
// the toolchain wrote into it ("go-build-id:" + the ID, whose last part is
// the linker's content hash of the file), read from the ELF note
// .note.go.buildid or from the `\xff Go build ID: "…"` string in the first
// 32 KiB (Mach-O, PE) as cmd/go itself reads it; when there is none,
// "sha256:" + hex(SHA-256) of the whole file. Hashing a 100 MB
// executable on every command cost a development build about 0.1 s of
// CPU; the build ID is read in microseconds and changes with every byte
// the linker wrote.
func executableDigest() (string, error) {
	p, err := os.Executable()
	if err != nil {
		return "", err
	}
	if id := goBuildID(p); id != "" {
		return goBuildIDPrefix + id, nil
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

// goBuildIDPrefix marks an executable named by its Go build ID.
const goBuildIDPrefix = "go-build-id:"

var (
	buildIDMarker = []byte("\xff Go build ID: \"")
	buildIDRE     = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}(/[A-Za-z0-9_-]{1,64}){1,3}$`)
)

// goBuildID is the Go build ID of the executable at path, "" when it has
// none that reads as one (not a Go executable, or another toolchain's).
func goBuildID(path string) string {
	id := ""
	if ef, err := elf.Open(path); err == nil {
		defer ef.Close()
		if sec := ef.Section(".note.go.buildid"); sec != nil {
			// One note: namesz, descsz, type (4 bytes each), "Go\0\0", the ID.
			if data, err := sec.Data(); err == nil && len(data) > 16 && string(data[12:16]) == "Go\x00\x00" {
				if n := int(ef.ByteOrder.Uint32(data[4:8])); n <= len(data)-16 {
					id = string(data[16 : 16+n])
				}
			}
		}
	} else if f, err := os.Open(path); err == nil {
		defer f.Close()
		head := make([]byte, 32<<10)
		n, _ := io.ReadFull(f, head)
		if i := bytes.Index(head[:n], buildIDMarker); i >= 0 {
			rest := head[i+len(buildIDMarker) : n]
			if j := bytes.IndexByte(rest, '"'); j >= 0 {
				id = string(rest[:j])
			}
		}
	}
	if !buildIDRE.MatchString(id) {
		return ""
	}
	return id
}
