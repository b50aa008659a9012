package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

var (
	wrapperOnce sync.Once
	wrapperPath string
	wrapperErr  error
)

// rusageWrapper builds hack/bench/rusage into bin/ once: every client is
// run through it, so that its peak RSS is its own (see that command).
func rusageWrapper() (string, error) {
	wrapperOnce.Do(func() {
		if wrapperPath, wrapperErr = filepath.Abs(filepath.Join("bin", "bench-rusage")); wrapperErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", wrapperPath, "./hack/bench/rusage").CombinedOutput()
		if err != nil {
			wrapperErr = fmt.Errorf("build hack/bench/rusage (run the benchmark from the repository root): %v: %s", err, out)
		}
	})
	return wrapperPath, wrapperErr
}

// Proc is one measured client process: wall time from fork to exit, the
// peak resident set (wait4's ru_maxrss) and CPU time, and the times of
// the progress lines it wrote on stderr.
type Proc struct {
	Wall      float64            `json:"wallSeconds"`
	MaxRSSMiB float64            `json:"maxRssMiB"`
	User      float64            `json:"userSeconds"`
	Sys       float64            `json:"sysSeconds"`
	Phases    map[string]float64 `json:"phases,omitempty"`
	Throttled []string           `json:"throttled,omitempty"`
	// Stderr holds the first stderr lines, "+seconds text".
	Stderr []string `json:"stderr,omitempty"`
	// Failed is set for a peer that did not do its job (exited non-zero).
	// When its own wait timed out, Wall is a lower bound of its time; when
	// it failed before (Broke), it has no time at all.
	Failed string `json:"failed,omitempty"`
	Broke  bool   `json:"broke,omitempty"`

	lines  []stampedLine
	stdout []byte
}

type stampedLine struct {
	at   float64
	text string
}

// run executes name with args and env, timing it and stamping each stderr
// line with its arrival time. A non-zero exit is an error carrying stderr.
func run(env []string, name string, args ...string) (*Proc, error) {
	wrapper, err := rusageWrapper()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(wrapper, append([]string{name}, args...)...)
	cmd.Env = env
	usageR, usageW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer usageR.Close()
	cmd.ExtraFiles = []*os.File{usageW}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	p := &Proc{}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		usageW.Close()
		return nil, err
	}
	usageW.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(errPipe)
		sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
		for sc.Scan() {
			p.lines = append(p.lines, stampedLine{time.Since(start).Seconds(), sc.Text()})
		}
		_, _ = io.Copy(io.Discard, errPipe)
	}()
	<-done
	err = cmd.Wait()
	p.Wall = time.Since(start).Seconds()
	p.stdout = stdout.Bytes()
	var maxRSS, user, sys int64
	if _, serr := fmt.Fscan(usageR, &maxRSS, &user, &sys); serr != nil && err == nil {
		err = fmt.Errorf("no rusage from %s: %v", wrapper, serr)
	}
	p.MaxRSSMiB = float64(maxRSS) / 1024 // KiB on Linux
	p.User, p.Sys = time.Duration(user).Seconds(), time.Duration(sys).Seconds()
	for i, l := range p.lines {
		if i < 60 {
			p.Stderr = append(p.Stderr, fmt.Sprintf("+%.3f %s", l.at, l.text))
		}
		if strings.Contains(l.text, "throttl") || strings.Contains(l.text, "Waited before sending request") {
			p.Throttled = append(p.Throttled, l.text)
		}
	}
	if err != nil {
		var tail []string
		for _, l := range p.lines {
			tail = append(tail, l.text)
		}
		if len(tail) > 40 {
			tail = tail[len(tail)-40:]
		}
		return p, fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, strings.Join(tail, "\n"))
	}
	return p, nil
}

// restamp gives a Proc read back from a results file its stamped lines
// again, from the Stderr lines run kept ("+seconds text", the first 60).
func (p *Proc) restamp() error {
	p.lines = nil
	for _, l := range p.Stderr {
		at, text, _ := strings.Cut(l, " ")
		sec, err := strconv.ParseFloat(strings.TrimPrefix(at, "+"), 64)
		if err != nil {
			return fmt.Errorf("stderr line %q: %w", l, err)
		}
		p.lines = append(p.lines, stampedLine{at: sec, text: text})
	}
	return nil
}

// mark is the arrival time of the first stderr line starting with prefix
// and containing every one of contains, or -1.
func (p *Proc) mark(prefix string, contains ...string) float64 {
next:
	for _, l := range p.lines {
		if !strings.HasPrefix(l.text, prefix) {
			continue
		}
		for _, c := range contains {
			if !strings.Contains(l.text, c) {
				continue next
			}
		}
		return l.at
	}
	return -1
}

// phases turns ordered marks into durations: each phase runs from the
// previous mark (the process start for the first) to its own; "exit" is
// the rest. A missing mark leaves its phase out.
func (p *Proc) phases(marks []phaseMark) {
	p.Phases = map[string]float64{}
	prev := 0.0
	for _, m := range marks {
		t := p.mark(m.prefix, m.contains...)
		if t < 0 {
			continue
		}
		p.Phases[m.name] = round3(t - prev)
		prev = t
	}
	p.Phases["exit"] = round3(p.Wall - prev)
}

type phaseMark struct {
	name     string
	prefix   string
	contains []string
}

// The progress lines of preflight and apply (ceremony's o.say) that end
// each phase.
var (
	preflightMarks = []phaseMark{
		{"load", "preflight: release", nil},               // start, kubeconfig, render, lock verify
		{"identityHead", "preflight: head", nil},          // cluster identity, Head read, transition rules
		{"access", "access: ", nil},                       // permission review (builds that have one)
		{"dryRun", "preflight: server-side dry-run", nil}, // dry-run of every object
		{"record", "preflight: record", nil},              // preflight record written
	}
	applyMarks = []phaseMark{
		{"loadAcquire", "apply: acquired", nil}, // start, render, verify, identity, Head read, permission review (builds that have one), CAS
		{"apply", "apply: ", []string{"server-side applied"}},
		{"converge", "converge: ", []string{"current"}},
		{"commit", "commit: ", nil}, // final identity read + Head commit CAS
		{"receipt", "receipt: ", nil},
	}
)

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }
