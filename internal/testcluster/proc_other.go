//go:build !linux

package testcluster

import "os/exec"

func detach(cmd *exec.Cmd) {}
