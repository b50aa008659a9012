package deploy

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// progress shows how far apply and convergence are: `applied n/N`,
// `current n/N`, and for the first objects still not Current their kstatus
// message. On a terminal (stderr is a TTY) that block is redrawn in place
// under the ordinary progress lines, which pass through it; elsewhere it
// writes nothing of its own except, while objects keep waiting, one plain
// `waiting:` line every plainEvery (so a CI log shows what is slow).
type progress struct {
	mu         sync.Mutex
	out        io.Writer
	tty        bool
	width      int           // terminal columns (lines are cut to fit: a wrapped line would break the redraw)
	plainEvery time.Duration // non-TTY cadence of the waiting line
	now        func() time.Time

	total, applied, current int
	waiting                 []waitingObject // the first few not yet Current
	more                    int             // how many more are waiting
	drawn                   int             // lines of the block now on screen
	lastPlain               time.Time
	started                 time.Time
}

// waitingObject is one object not yet Current and why.
type waitingObject struct{ what, message string }

const (
	progressShown = 5                // waiting objects named in the block
	plainEvery    = 10 * time.Second // non-TTY waiting line
)

// newProgress wraps out. tty decides the mode; width 0 means 80.
func newProgress(out io.Writer, tty bool, width int) *progress {
	if width <= 0 {
		width = 80
	}
	return &progress{out: out, tty: tty, width: width, plainEvery: plainEvery, now: time.Now}
}

// terminal tells whether w is a terminal, and its width.
func terminal(w io.Writer) (bool, int) {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false, 0
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		width = 0
	}
	return true, width
}

// progress returns the command's progress display, installing it in front
// of o.Progress the first time (apply, then converge, share it).
func (o *Options) progress() *progress {
	if p, ok := o.Progress.(*progress); ok {
		return p
	}
	tty, width := terminal(o.Progress)
	p := newProgress(o.Progress, tty, width)
	o.Progress = p
	return p
}

// Write passes a progress line through; on a terminal the block is
// cleared first and drawn again after it.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty || p.drawn == 0 {
		return p.out.Write(b)
	}
	p.clear()
	n, err := p.out.Write(b)
	p.draw()
	return n, err
}

// start sets the number of objects and begins showing the block.
func (p *progress) start(total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total, p.started, p.lastPlain = total, p.now(), p.now()
}

// update records the counts and the objects still waiting (in the order
// they should be named) and refreshes the display.
func (p *progress) update(applied, current int, waiting []waitingObject) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.applied, p.current = applied, current
	p.more = max(0, len(waiting)-progressShown)
	p.waiting = append(p.waiting[:0], waiting[:min(len(waiting), progressShown)]...)
	if p.tty {
		p.clear()
		p.draw()
		return
	}
	if len(waiting) > 0 && p.now().Sub(p.lastPlain) >= p.plainEvery {
		p.lastPlain = p.now()
		line := fmt.Sprintf("waiting: applied %d/%d, current %d/%d", p.applied, p.total, p.current, p.total)
		if len(p.waiting) > 0 {
			line += fmt.Sprintf("; %s: %s", p.waiting[0].what, p.waiting[0].message)
		}
		if n := len(waiting) - 1; n > 0 {
			line += fmt.Sprintf(" (and %d more)", n)
		}
		fmt.Fprintln(p.out, line)
	}
}

// finish removes the block from the terminal: what follows is plain lines.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		p.clear()
	}
	p.total = 0
}

// clear erases the block drawn last (cursor at the start of its last line).
func (p *progress) clear() {
	if p.drawn == 0 {
		return
	}
	s := "\r"
	if p.drawn > 1 {
		s += fmt.Sprintf("\x1b[%dA", p.drawn-1)
	}
	fmt.Fprint(p.out, s+"\x1b[J")
	p.drawn = 0
}

// draw writes the block, leaving the cursor at the end of its last line.
func (p *progress) draw() {
	if p.total == 0 {
		return
	}
	lines := []string{fmt.Sprintf("applied %d/%d, current %d/%d", p.applied, p.total, p.current, p.total)}
	for _, w := range p.waiting {
		lines = append(lines, "  "+w.what+": "+w.message)
	}
	if p.more > 0 {
		lines = append(lines, fmt.Sprintf("  … and %d more not Current", p.more))
	}
	for i, l := range lines {
		lines[i] = cut(l, p.width-1)
	}
	fmt.Fprint(p.out, strings.Join(lines, "\n"))
	p.drawn = len(lines)
}

// cut shortens s to at most n runes (one line of the terminal).
func cut(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n < 1 {
		return ""
	}
	return string(r[:n-1]) + "…"
}
