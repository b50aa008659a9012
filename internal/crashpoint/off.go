//go:build !ql3crash

package crashpoint

// Enabled reports whether this binary carries the crash hook.
const Enabled = false

// At does nothing: this binary was built without the ql3crash tag.
func At(string) {}
