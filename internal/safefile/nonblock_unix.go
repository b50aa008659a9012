//go:build unix

package safefile

import "syscall"

// NonblockFlag keeps an open from blocking on a named pipe (O_NONBLOCK;
// on a regular file it changes nothing).
const NonblockFlag = syscall.O_NONBLOCK
