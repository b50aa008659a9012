package deploy

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// On a terminal the block is drawn in place: each refresh and each
// progress line erase it first (cursor up, clear to the end of the
// screen), lines are cut to the terminal's width, and finish leaves none of
// it behind.
func TestProgressTTY(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b, true, 40)
	p.start(10)
	p.update(3, 1, []waitingObject{
		{"apps/v1 Deployment ns/web", "InProgress: Deployment does not have minimum availability."},
		{"v1 Service ns/web", "InProgress: Service does not have load balancer ingress IP address"},
	})
	block := "applied 3/10, current 1/10\n" +
		"  apps/v1 Deployment ns/web: InProgres…\n" + // 39 columns: one less than the terminal's
		"  v1 Service ns/web: InProgress: Servi…"
	if got := b.String(); got != block {
		t.Fatalf("first draw:\n%q\nwant\n%q", got, block)
	}
	b.Reset()
	if _, err := p.Write([]byte("apply: 10 object(s) server-side applied\n")); err != nil {
		t.Fatal(err)
	}
	erase := "\r\x1b[2A\x1b[J"
	if want := erase + "apply: 10 object(s) server-side applied\n" + block; b.String() != want {
		t.Fatalf("a progress line through the block:\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	many := make([]waitingObject, 8)
	for i := range many {
		many[i] = waitingObject{"v1 ConfigMap ns/c", "NotFound"}
	}
	p.update(10, 2, many)
	if !strings.HasPrefix(b.String(), erase+"applied 10/10, current 2/10\n") || !strings.HasSuffix(b.String(), "  … and 3 more not Current") {
		t.Fatalf("refresh with 8 waiting (5 shown):\n%q", b.String())
	}
	b.Reset()
	p.finish()
	if want := "\r\x1b[6A\x1b[J"; b.String() != want {
		t.Fatalf("finish: %q, want %q", b.String(), want)
	}
	b.Reset()
	if _, err := p.Write([]byte("commit: generation 1 committed\n")); err != nil {
		t.Fatal(err)
	}
	if b.String() != "commit: generation 1 committed\n" {
		t.Fatalf("after finish lines are plain: %q", b.String())
	}
}

// Elsewhere (a pipe, a CI log) progress lines pass through untouched and
// the only line of its own is a plain `waiting:` line, at most once every
// plainEvery and only while something is still not Current.
func TestProgressPlain(t *testing.T) {
	var b bytes.Buffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newProgress(&b, false, 0)
	p.now = func() time.Time { return now }
	p.start(10)
	waiting := []waitingObject{{"apps/v1 Deployment ns/web", "InProgress: Deployment not Available"}, {"v1 Service ns/web", "NotFound"}}
	p.update(4, 1, waiting)
	if b.Len() != 0 {
		t.Fatalf("a waiting line before %s: %q", plainEvery, b.String())
	}
	now = now.Add(plainEvery)
	p.update(10, 8, waiting)
	want := "waiting: applied 10/10, current 8/10; apps/v1 Deployment ns/web: InProgress: Deployment not Available (and 1 more)\n"
	if b.String() != want {
		t.Fatalf("waiting line:\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	now = now.Add(plainEvery / 2)
	p.update(10, 9, waiting[:1])
	now = now.Add(plainEvery)
	p.update(10, 10, nil)
	if _, err := p.Write([]byte("converge: read back in 3 poll(s) with 1 LIST and 2 GET request(s)\n")); err != nil {
		t.Fatal(err)
	}
	p.finish()
	if want := "converge: read back in 3 poll(s) with 1 LIST and 2 GET request(s)\n"; b.String() != want {
		t.Fatalf("plain output: %q, want %q", b.String(), want)
	}
}

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven char", 10, "eleven ch…"},
		{"two\nlines", 20, "two lines"},
		{"ünïcödé wörds", 8, "ünïcödé…"},
		{"x", 0, ""},
	} {
		if got := cut(tc.in, tc.n); got != tc.want {
			t.Errorf("cut(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
