// Package views holds the operator's read-only views of a deployment:
// Diff (what a release would change, from the same server-side dry-run
// preflight makes), Status (what the cluster holds now against the
// committed Head) and History (the receipts chain, verified first).
//
// Nothing here writes to the cluster: the only requests are GETs and
// server-side apply dry-runs (dryRun=All). Secret values never leave the
// package: every object is masked before it is compared or printed.
package views
