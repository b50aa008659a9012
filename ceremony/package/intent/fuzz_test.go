package intent

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzParse: whatever Parse accepts, it writes back canonically and reads
// back to the same canonical bytes and the same digest.
func FuzzParse(f *testing.F) {
	v, _ := json.Marshal(valid())
	f.Add(v)
	c, _ := Canonical(valid())
	f.Add(c)
	f.Add([]byte(`{"schema":null}`))
	f.Add([]byte(`{"generation":1e3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := Parse(data)
		if err != nil {
			return
		}
		c, err := Canonical(in)
		if err != nil {
			t.Fatalf("accepted but not canonicalisable: %v", err)
		}
		again, err := Parse(c)
		if err != nil {
			t.Fatalf("canonical form refused: %v\n%s", err, c)
		}
		d1, _ := Digest(in)
		d2, _ := Digest(again)
		if d1 != d2 {
			t.Fatalf("digest changed on re-read: %s %s", d1, d2)
		}
	})
}

// FuzzParseActive: whatever ParseActive accepts is exactly what
// BuildActive writes for its intent and time.
func FuzzParseActive(f *testing.F) {
	_, data, err := BuildActive(valid(), time.Date(2026, 7, 24, 1, 30, 0, 0, time.UTC))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{"schema":"qinglong/plugin-package-active@v1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := ParseActive(data)
		if err != nil {
			return
		}
		at, err := time.Parse(time.RFC3339, a.Receipt.ActivatedAt)
		if err != nil {
			t.Fatal(err)
		}
		_, again, err := BuildActive(a.Intent, at)
		if err != nil {
			t.Fatalf("accepted but BuildActive refuses its intent: %v", err)
		}
		if string(again) != string(data) {
			t.Fatalf("accepted bytes differ from what BuildActive writes:\n%s\n%s", data, again)
		}
	})
}
