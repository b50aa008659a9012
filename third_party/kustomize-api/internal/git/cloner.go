// Copyright 2019 The Kubernetes Authors.
// SPDX-License-Identifier: Apache-2.0

package git

import (
	"fmt"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Cloner is a function that can clone a git repo.
type Cloner func(repoSpec *RepoSpec) error

// ClonerUsingGitExec refuses to clone: kubectl-ql3 renders a release from
// the local files its lock binds, and a repository fetched at render time
// would be content no digest covers (and a program, git, run with the
// network on behalf of whoever wrote the kustomization). Upstream runs
// `git init`, `fetch` and `submodule update` here.
func ClonerUsingGitExec(repoSpec *RepoSpec) error {
	return fmt.Errorf("%q is a git repository reference: kubectl-ql3 renders from local files only and never runs git; vendor the base into the release tree", repoSpec.raw)
}

// DoNothingCloner returns a cloner that only sets
// cloneDir field in the repoSpec.  It's assumed that
// the cloneDir is associated with some fake filesystem
// used in a test.
func DoNothingCloner(dir filesys.ConfirmedDir) Cloner {
	return func(rs *RepoSpec) error {
		rs.Dir = dir
		return nil
	}
}
