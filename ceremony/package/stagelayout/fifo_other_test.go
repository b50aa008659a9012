//go:build !unix

package stagelayout_test

import "testing"

// mkfifo: no named pipes in a directory here.
func mkfifo(t *testing.T, _ string) { t.Skip("named pipes in a directory are a unix thing") }
