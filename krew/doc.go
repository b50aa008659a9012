// Package krew holds the plugin's Krew manifest: ql3.yaml is the reference
// copy of the manifest goreleaser generates for a release (dist/krew/ql3.yaml,
// from the krews section of .goreleaser.yaml), and ../.krew.yaml is the
// template krew-release-bot fills in for krew-index.
//
// Its tests keep the three in step, run krew's own validate-krew-manifest on
// them, and install a goreleaser-built archive with krew itself, through the
// real kubectl, against a local control plane. They need `make tools` and
// `make controlplane` (`make test` runs both).
package krew
