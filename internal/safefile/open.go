package safefile

import (
	"fmt"
	"os"
)

// OpenRegular opens path for reading when it is a regular file (symbolic
// links followed): a named pipe or a device would block the reader or
// never end, so it is refused (fail.Invalid) — the open itself does not
// block on a pipe (NonblockFlag). Errors name the path.
func OpenRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|NonblockFlag, 0)
	if err != nil {
		return nil, invalidf("%v", err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s: not a regular file (%s)", path, fi.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, invalidf("%v", err)
	}
	return f, nil
}
