package main

import "testing"

// TestDeletedOnce: the retire rows' "deleted exactly once" from the audit
// log, where a killed client's landed DELETE is logged 504.
func TestDeletedOnce(t *testing.T) {
	for _, tt := range []struct {
		ok, unknown int
		want        bool
	}{
		{1, 0, true},  // answered
		{0, 1, true},  // the killed client's delete landed (504), the recovery got 404
		{1, 2, true},  // 5xx answers after the one that landed changed nothing
		{0, 0, false}, // gone, but no delete of the ceremony's removed it
		{2, 0, false}, // deleted twice: the second a recreated object
	} {
		if got := deletedOnce(tt.ok, tt.unknown); got != tt.want {
			t.Errorf("deletedOnce(%d, %d) = %t, want %t", tt.ok, tt.unknown, got, tt.want)
		}
	}
}
