//go:build unix

package stagelayout

import "syscall"

// openFlags keep an open from blocking on a named pipe.
const openFlags = syscall.O_NONBLOCK
