package fail

import (
	"errors"
	"fmt"
	"testing"
)

func TestClassOf(t *testing.T) {
	base := errors.New("boom")
	tests := []struct {
		name string
		err  error
		want Class
		code int
	}{
		{"plain", base, Other, 1},
		{"invalid", Wrap(Invalid, base), Invalid, 2},
		{"conflict wrapped by fmt", fmt.Errorf("apply: %w", Wrap(Conflict, base)), Conflict, 3},
		{"unavailable", Errorf(Unavailable, "read head: %w", base), Unavailable, 4},
		{"outermost wins", Wrap(Tamper, fmt.Errorf("x: %w", Wrap(Invalid, base))), Tamper, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClassOf(tt.err); got != tt.want {
				t.Fatalf("ClassOf = %v, want %v", got, tt.want)
			}
			if got := ClassOf(tt.err).ExitCode(); got != tt.code {
				t.Fatalf("ExitCode = %d, want %d", got, tt.code)
			}
			if !errors.Is(tt.err, base) {
				t.Fatalf("classification lost the wrapped error")
			}
		})
	}
	if Wrap(Invalid, nil) != nil {
		t.Fatal("Wrap(nil) must stay nil")
	}
}
