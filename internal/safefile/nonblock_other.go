//go:build !unix

package safefile

// NonblockFlag: opening a file does not block here.
const NonblockFlag = 0
