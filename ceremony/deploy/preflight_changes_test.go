package deploy

import "testing"

// The apply's refusal of a changed release directory names each bound
// member that changed, by its record field, and nothing else.
func TestPreflightReleaseChanges(t *testing.T) {
	base := PreflightRelease{Dir: "/r", Version: "1.0.0", LockDigest: "sha256:a", SourceDigest: "sha256:s",
		RenderDigest: "sha256:r", InventoryDigest: "sha256:i", InventoryCount: 3}
	tests := []struct {
		name string
		edit func(*PreflightRelease)
		want string
	}{
		{"lock rewritten", func(p *PreflightRelease) { p.LockDigest = "sha256:b" }, "lockDigest sha256:a at preflight, sha256:b now"},
		{"source and render", func(p *PreflightRelease) { p.SourceDigest, p.RenderDigest = "sha256:t", "sha256:q" },
			"sourceDigest sha256:s at preflight, sha256:t now; renderDigest sha256:r at preflight, sha256:q now"},
		{"version and count", func(p *PreflightRelease) { p.Version, p.InventoryCount = "1.0.1", 4 },
			"version 1.0.0 at preflight, 1.0.1 now; inventoryCount 3 at preflight, 4 now"},
		{"every field compared", func(p *PreflightRelease) { p.Dir = "/s" }, "dir /r at preflight, /s now"},
		{"unchanged", func(*PreflightRelease) {}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := base
			tt.edit(&now)
			if got := base.changes(now); got != tt.want {
				t.Errorf("changes = %q, want %q", got, tt.want)
			}
		})
	}
}
