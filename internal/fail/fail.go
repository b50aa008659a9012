// Package fail classifies errors into the outcomes a script must tell apart
// (docs/ceremony.md §9). Only main turns a class into an exit code.
package fail

import (
	"errors"
	"fmt"
)

// Class is an outcome class. The zero value is a plain failure.
type Class int

const (
	// Other is any failure that fits no class below (exit 1).
	Other Class = iota
	// Invalid is bad input: flags, files, release, lock, preflight (exit 2).
	Invalid
	// Conflict means someone else moved the Head, or a race was lost (exit 3).
	Conflict
	// Unavailable means the outcome could not be decided; rerunning is safe (exit 4).
	Unavailable
	// Tamper means a record failed verification: Head, receipt, signature (exit 5).
	Tamper
)

// ExitCode is the process exit status for the class.
func (c Class) ExitCode() int {
	switch c {
	case Invalid:
		return 2
	case Conflict:
		return 3
	case Unavailable:
		return 4
	case Tamper:
		return 5
	}
	return 1
}

func (c Class) String() string {
	switch c {
	case Invalid:
		return "invalid"
	case Conflict:
		return "conflict"
	case Unavailable:
		return "unavailable"
	case Tamper:
		return "tamper"
	}
	return "error"
}

type classed struct {
	class Class
	err   error
}

func (e *classed) Error() string { return e.err.Error() }
func (e *classed) Unwrap() error { return e.err }

// Wrap marks err with class c; nil stays nil.
func Wrap(c Class, err error) error {
	if err == nil {
		return nil
	}
	return &classed{class: c, err: err}
}

// Errorf formats an error of class c; %w wraps as fmt.Errorf does.
func Errorf(c Class, format string, args ...any) error {
	return &classed{class: c, err: fmt.Errorf(format, args...)}
}

// ClassOf is the outermost class on err's chain, Other if none.
func ClassOf(err error) Class {
	var ce *classed
	if errors.As(err, &ce) {
		return ce.class
	}
	return Other
}

// Is reports whether err's class is c.
func Is(err error, c Class) bool { return err != nil && ClassOf(err) == c }
