package safefile

import "syscall"

// times are a stat's modification and change times.
func times(st *syscall.Stat_t) (mtime, ctime syscall.Timespec) { return st.Mtimespec, st.Ctimespec }
