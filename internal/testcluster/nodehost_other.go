//go:build !linux

package testcluster

// The node runs on Linux only (nodePrereqs says so); these never run.

func killCgroup(string) {}

func unmountUnder(string) {}

func lockHost() (func(), error) { return func() {}, nil }
