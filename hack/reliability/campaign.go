package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// Config is one campaign's parameters.
type Config struct {
	Seed      uint64
	RunsScale float64  // multiplies every case's run count (full campaign)
	Quick     bool     // a few runs per case: the version `make test` runs
	Cases     []string // only these cases (by name prefix); empty = all
	Binary    string   // the built kubectl-ql3
	Root      string   // the module root (fixtures live in testdata/releases)
	Workers   int      // runs in flight at once within a case
	Log       io.Writer
}

// Row is one line of the table.
type Row struct {
	Case     string         `json:"case"`
	Runs     int            `json:"runs"`
	Expected string         `json:"expected"`
	Observed string         `json:"observed"`
	Pass     bool           `json:"pass"`
	Seconds  float64        `json:"seconds"`
	Details  map[string]any `json:"details,omitempty"`
	Failures []string       `json:"failures,omitempty"` // the first few, each with how to replay it
}

// Report is reliability.json.
type Report struct {
	Command        string    `json:"command"`
	Seed           uint64    `json:"seed"`
	RunsScale      float64   `json:"runsScale"`
	Quick          bool      `json:"quick"`
	Started        time.Time `json:"started"`
	Seconds        float64   `json:"seconds"`
	GoVersion      string    `json:"goVersion"`
	Platform       string    `json:"platform"`
	CPUs           int       `json:"cpus"`
	PluginVersion  string    `json:"pluginVersion"`
	KubeAPIServer  string    `json:"kubeAPIServer"`
	Pass           bool      `json:"pass"`
	Rows           []Row     `json:"rows"`
	ReplayTemplate string    `json:"replay"`
}

// campaign holds what every case shares.
type campaign struct {
	cfg         Config
	cp          *testcluster.ControlPlane
	admin       kubernetes.Interface
	toolVersion string // the binary's version; every lock admits it
	identity    string // the cluster identity
	work        string // scratch directory, removed at the end
	audit       *auditTail
	serial      atomic.Int64
	logMu       sync.Mutex
}

type caseFunc func(c *campaign, cs *caseState) []Row

type caseDef struct {
	name string
	fn   caseFunc
}

// caseState is one case's randomness and failure log.
type caseState struct {
	name string
	seed uint64
	mu   sync.Mutex
	fail []string
	nf   int
}

// rng is the random source of run i of this case: a replay of
// `-seed S -case NAME` draws the same numbers for every run.
func (s *caseState) rng(i int) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(s.name))
	return rand.New(rand.NewPCG(s.seed^h.Sum64(), uint64(i)))
}

func (s *caseState) failf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nf++
	if len(s.fail) < 8 {
		s.fail = append(s.fail, fmt.Sprintf(format, args...))
	}
}

func (s *caseState) failures() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]string(nil), s.fail...)
	if s.nf > len(s.fail) {
		out = append(out, fmt.Sprintf("… and %d more", s.nf-len(s.fail)))
	}
	return out
}

// runs scales a full-campaign run count; quick uses its own.
func (c *campaign) runs(full, quick int) int {
	if c.cfg.Quick {
		return quick
	}
	n := int(float64(full)*c.cfg.RunsScale + 0.5)
	return max(n, 1)
}

func (c *campaign) logf(format string, args ...any) {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	fmt.Fprintf(c.cfg.Log, "reliability: "+format+"\n", args...)
}

// parallel runs fn(i) for i in [0, n) with the configured number of
// workers.
func (c *campaign) parallel(n int, fn func(i int)) {
	workers := max(c.cfg.Workers, 1)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// Run starts a control plane, runs the cases and returns the report.
func Run(cfg Config, cases []caseDef) (*Report, error) {
	started := time.Now()
	if cfg.Log == nil {
		cfg.Log = os.Stderr
	}
	if cfg.RunsScale <= 0 {
		cfg.RunsScale = 1
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 3
	}
	c := &campaign{cfg: cfg}
	var err error
	if c.toolVersion, err = binaryVersion(cfg.Binary); err != nil {
		return nil, err
	}
	if c.work, err = os.MkdirTemp("", "ql3-reliability-"); err != nil {
		return nil, err
	}
	defer os.RemoveAll(c.work)
	c.logf("seed %d (replay with -seed %d); starting a control plane", cfg.Seed, cfg.Seed)
	c.cp, err = testcluster.Start(testcluster.Options{ControllerManager: true, AuditLog: true})
	if err != nil {
		return nil, err
	}
	keepLogs := false
	defer func() { c.cp.Stop(keepLogs) }()
	c.admin = c.cp.Clientset()
	c.audit = &auditTail{path: c.cp.AuditLogPath}
	if c.identity, err = deploy.ReadClusterIdentity(context.Background(), deploy.NewIdentityReader(c.admin)); err != nil {
		return nil, err
	}
	sv, err := c.admin.Discovery().ServerVersion()
	if err != nil {
		return nil, err
	}
	// One clean install first: it defines the release's CRD cluster-wide
	// (every case's objects resolve through discovery from then on) and
	// proves the ceremony works here at all.
	if err := c.warmup(); err != nil {
		return nil, fmt.Errorf("warm-up install: %w", err)
	}
	rep := &Report{
		Seed: cfg.Seed, RunsScale: cfg.RunsScale, Quick: cfg.Quick, Started: started.UTC().Truncate(time.Second),
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, CPUs: runtime.NumCPU(),
		PluginVersion: c.toolVersion, KubeAPIServer: sv.GitVersion, Pass: true,
		ReplayTemplate: fmt.Sprintf("go run ./hack/reliability -seed %d -case NAME", cfg.Seed),
	}
	for _, cd := range cases {
		if !selected(cfg.Cases, cd.name) {
			continue
		}
		c.logf("case %s", cd.name)
		t0 := time.Now()
		cs := &caseState{name: cd.name, seed: cfg.Seed}
		rows := cd.fn(c, cs)
		secs := float64(time.Since(t0).Milliseconds()) / 1000
		for i := range rows {
			row := &rows[i]
			if row.Seconds == 0 {
				row.Seconds = secs / float64(len(rows))
			}
			if i == len(rows)-1 {
				row.Failures = append(row.Failures, cs.failures()...)
			}
			if len(row.Failures) > 0 {
				row.Pass = false
			}
			if !row.Pass {
				rep.Pass = false
				keepLogs = true
			}
			c.logf("%s: %s: %s (%.0fs)", row.Case, passWord(row.Pass), row.Observed, row.Seconds)
			for _, f := range row.Failures {
				c.logf("  %s", f)
			}
		}
		rep.Rows = append(rep.Rows, rows...)
	}
	if len(rep.Rows) == 0 {
		return nil, fmt.Errorf("no case matches %q", cfg.Cases)
	}
	rep.Seconds = float64(time.Since(started).Milliseconds()) / 1000
	return rep, nil
}

func selected(want []string, name string) bool {
	if len(want) == 0 {
		return true
	}
	for _, w := range want {
		if strings.HasPrefix(name, w) {
			return true
		}
	}
	return false
}

func passWord(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func binaryVersion(bin string) (string, error) {
	out, err := exec.Command(bin, "version", "--client", "-o", "json").Output()
	if err != nil {
		return "", fmt.Errorf("%s version --client: %w (run `make build`)", bin, err)
	}
	var v struct {
		Plugin struct {
			Version string `json:"version"`
		} `json:"plugin"`
	}
	if err := json.Unmarshal(out, &v); err != nil || v.Plugin.Version == "" {
		return "", fmt.Errorf("%s version --client -o json: %q: %v", bin, out, err)
	}
	return v.Plugin.Version, nil
}

// --- namespaces, releases, users -------------------------------------------

// namespace creates a fresh control namespace (the Head lives there, so it
// exists before the first install). Namespaces are left to the control
// plane's end: deleting hundreds of them would only load the 2 cores.
func (c *campaign) namespace(prefix string) (string, error) {
	name := fmt.Sprintf("%s-%d", prefix, c.serial.Add(1))
	_, err := c.admin.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	return name, err
}

var versionLabelRE = regexp.MustCompile(`app.kubernetes.io/version: .*`)

// release copies testdata/releases/<fixture> into a fresh directory,
// retargets it to namespace ns, relabels it as version (if given) and locks
// it for this cluster and the binary's version.
func (c *campaign) release(fixture, ns, version string) (string, error) {
	dir := filepath.Join(c.work, "releases", fmt.Sprintf("%s-%s-%d", ns, fixture, c.serial.Add(1)))
	src := filepath.Join(c.cfg.Root, "testdata", "releases", fixture)
	entries, err := os.ReadDir(src)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == inventory.LockFile {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return "", err
		}
		if e.Name() == "kustomization.yaml" {
			data = []byte(strings.Replace(string(data), "namespace: ql3-demo", "namespace: "+ns, 1))
			if version != "" {
				data = versionLabelRE.ReplaceAll(data, []byte("app.kubernetes.io/version: "+version))
			}
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			return "", err
		}
	}
	if version == "" {
		version = strings.TrimPrefix(strings.SplitN(fixture, "-", 2)[0], "v")
	}
	return dir, c.lock(dir, version)
}

func (c *campaign) lock(dir, version string) error {
	rel, err := inventory.Render(filesys.MakeFsOnDisk(), dir, inventory.Options{})
	if err != nil {
		return fmt.Errorf("render %s: %w", dir, err)
	}
	l, err := inventory.NewLock(rel, version, c.identity, c.toolVersion)
	if err != nil {
		return err
	}
	data, err := l.Marshal()
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, inventory.LockFile), data, 0o644)
}

// user mints a client certificate for a fresh user name (one identity per
// process, so the audit log tells every process apart).
func (c *campaign) user(prefix string, groups ...string) (name, kubeconfig string, err error) {
	name = fmt.Sprintf("%s-%d", prefix, c.serial.Add(1))
	kubeconfig, err = c.cp.Kubeconfig(name, groups...)
	return name, kubeconfig, err
}

func (c *campaign) restConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 500, 1000
	return cfg, nil
}

// options are in-process ceremony options for a client configuration.
func (c *campaign) options(cfg *rest.Config, receiptsDir string) (deploy.Options, error) {
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 500, 1000
	}
	cl, err := deploy.NewKubeCluster(cfg)
	if err != nil {
		return deploy.Options{}, err
	}
	return deploy.Options{
		Cluster: cl, FS: filesys.MakeFsOnDisk(), ToolVersion: c.toolVersion,
		Timeout: 2 * time.Minute, ReceiptsDir: receiptsDir,
	}, nil
}

// adminOptions are in-process options as the admin.
func (c *campaign) adminOptions(receiptsDir string) (deploy.Options, error) {
	return c.options(c.cp.RESTConfig(), receiptsDir)
}

func (c *campaign) preflight(o deploy.Options, dir, kind string, exp deploy.ExpectedHead) (*deploy.PreflightResult, error) {
	out := filepath.Join(c.work, "preflights", fmt.Sprintf("pf-%d.json", c.serial.Add(1)))
	return deploy.RunPreflight(context.Background(), o, deploy.PreflightRequest{Dir: dir, Transition: kind, Expected: exp, Out: out})
}

// deploy runs a clean preflight and apply as the admin.
func (c *campaign) deploy(o deploy.Options, dir, kind string, exp deploy.ExpectedHead) (*deploy.ApplyResult, error) {
	pf, err := c.preflight(o, dir, kind, exp)
	if err != nil {
		return nil, fmt.Errorf("preflight: %w", err)
	}
	return deploy.RunApply(context.Background(), o, deploy.ApplyRequest{Preflight: pf.Record})
}

func (c *campaign) head(ns string) (*deploy.Head, error) {
	cl, err := deploy.NewKubeCluster(c.cp.RESTConfig())
	if err != nil {
		return nil, err
	}
	return deploy.ReadHead(context.Background(), cl, ns)
}

// checkConverged is the end state every fault case must reach: the Head
// committed at generation gen with this preflight, the receipts directory
// holding exactly the receipts of generations 1..gen as one audited chain
// (stray temporary files allowed), and the newest receipt byte-identical to
// the one rebuilt from the Head.
func (c *campaign) checkConverged(ns string, pf *deploy.PreflightRecord, gen int64, rdir string) (*deploy.Head, []byte, error) {
	h, err := c.head(ns)
	if err != nil {
		return nil, nil, fmt.Errorf("read head: %w", err)
	}
	if h == nil || h.Phase != deploy.PhaseCommitted || h.Generation != gen || h.Transition.PreflightDigest != pf.SelfDigest {
		return h, nil, fmt.Errorf("head is %s, want generation %d committed with preflight %s", describeHead(h), gen, pf.SelfDigest)
	}
	r, err := deploy.ReceiptFromHead(h)
	if err != nil {
		return h, nil, err
	}
	want, err := r.Bytes()
	if err != nil {
		return h, nil, err
	}
	got, err := os.ReadFile(filepath.Join(rdir, receipts.FileName(r)))
	if err != nil {
		return h, nil, fmt.Errorf("receipt: %w", err)
	}
	if !bytes.Equal(got, want) {
		return h, nil, fmt.Errorf("receipt %s differs from the one rebuilt from the Head", receipts.FileName(r))
	}
	entries, err := os.ReadDir(rdir)
	if err != nil {
		return h, nil, err
	}
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), receipts.FileSuffix) {
			n++
		}
	}
	if int64(n) != gen {
		return h, nil, fmt.Errorf("receipts directory holds %d receipts, want %d", n, gen)
	}
	rep, err := receipts.Audit([]string{rdir}, receipts.AuditOptions{})
	if err != nil {
		return h, nil, fmt.Errorf("audit: %w", err)
	}
	if !rep.OK() {
		js, _ := json.Marshal(rep)
		return h, nil, fmt.Errorf("audit failed: %s", js)
	}
	return h, want, nil
}

func describeHead(h *deploy.Head) string {
	if h == nil {
		return "absent"
	}
	return fmt.Sprintf("generation %d %s (%s %s, preflight %s)", h.Generation, h.Phase, h.Transition.Kind, h.Current.Version, h.Transition.PreflightDigest)
}

// --- the built binary --------------------------------------------------------

type procResult struct {
	code   int
	stdout string
	stderr string
	killed bool // ended by SIGKILL
}

// runBinary runs the plugin with KUBECONFIG=kubeconfig and extra env.
func (c *campaign) runBinary(kubeconfig string, env []string, args ...string) procResult {
	cmd := exec.Command(c.cfg.Binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(append(cleanEnv(), "KUBECONFIG="+kubeconfig), env...)
	err := cmd.Run()
	return procResult{code: exitCode(err), stdout: out.String(), stderr: errb.String(), killed: killedBySignal(err)}
}

// cleanEnv is the environment without KUBECONFIG and the crash hook.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "QL3_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// errorLines counts the stderr lines that start with "error: ".
func errorLines(stderr string) int {
	n := 0
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "error: ") {
			n++
		}
	}
	return n
}

// --- the audit log -------------------------------------------------------------

// auditTail reads the API server's audit log incrementally: the campaign
// checks it hundreds of times and the file grows to many megabytes.
type auditTail struct {
	path   string
	mu     sync.Mutex
	offset int64
	events []testcluster.AuditEvent
}

func (a *auditTail) refresh() error {
	f, err := os.Open(a.path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(a.offset, io.SeekStart); err != nil {
		return err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	end := bytes.LastIndexByte(data, '\n')
	if end < 0 {
		return nil
	}
	evs, err := testcluster.ParseAuditLog(data[:end+1])
	if err != nil {
		return err
	}
	a.offset += int64(end + 1)
	a.events = append(a.events, evs...)
	return nil
}

// writes returns the completed, non-dry-run writes by user. Access
// reviews (SelfSubjectAccessReview and friends) persist nothing and are not
// writes. It waits briefly for the log to settle: the API server writes an
// event as the response completes.
func (c *campaign) writes(user string) ([]testcluster.AuditEvent, error) {
	a := c.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	var last int
	for i := 0; i < 5; i++ {
		if err := a.refresh(); err != nil {
			return nil, err
		}
		if i > 0 && len(a.events) == last {
			break
		}
		last = len(a.events)
		time.Sleep(150 * time.Millisecond)
	}
	var out []testcluster.AuditEvent
	for _, e := range a.events {
		if e.User.Username == user && e.Stage == "ResponseComplete" && !e.Read() && !e.DryRun() && !e.Review() {
			out = append(out, e)
		}
	}
	return out, nil
}

// split separates successful (2xx) writes into the Head's and the rest.
func split(evs []testcluster.AuditEvent) (head, workload []testcluster.AuditEvent) {
	for _, e := range evs {
		if e.ResponseStatus.Code >= 300 {
			continue
		}
		if e.ObjectRef.Resource == "configmaps" && e.ObjectRef.Name == deploy.HeadName {
			head = append(head, e)
		} else {
			workload = append(workload, e)
		}
	}
	return head, workload
}

func describeEvents(evs []testcluster.AuditEvent) string {
	var parts []string
	for i, e := range evs {
		if i == 4 {
			parts = append(parts, fmt.Sprintf("… %d more", len(evs)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%s %s/%s/%s (%d)", e.Verb, e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name, e.ResponseStatus.Code))
	}
	return strings.Join(parts, ", ")
}

// lines streams r line by line into ch (closed at EOF) and into buf.
func lines(r io.Reader, buf *syncBuffer, ch chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		buf.WriteString(sc.Text() + "\n")
		if ch != nil {
			ch <- sc.Text()
		}
	}
	if ch != nil {
		close(ch)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) WriteString(v string) {
	s.mu.Lock()
	s.b.WriteString(v)
	s.mu.Unlock()
}

// Write makes it an io.Writer (the ceremony's Progress).
func (s *syncBuffer) Write(p []byte) (int, error) {
	s.WriteString(string(p))
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// killedBySignal reports whether the process ended by a signal (SIGKILL
// from the campaign or from the crash hook).
func killedBySignal(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}

func (c *campaign) warmup() error {
	ns, err := c.namespace("warmup")
	if err != nil {
		return err
	}
	dir, err := c.release("v3.0.0", ns, "")
	if err != nil {
		return err
	}
	o, err := c.adminOptions(filepath.Join(c.work, "receipts", ns))
	if err != nil {
		return err
	}
	_, err = c.deploy(o, dir, deploy.TransitionInstall, deploy.ExpectedHead{})
	return err
}

// stream runs the plugin, sends every stderr line to ch as it comes (ch is
// closed at the end) and hands the started process to onStart.
func (c *campaign) stream(kubeconfig string, env []string, ch chan<- string, onStart func(*os.Process), args ...string) (procResult, error) {
	cmd := exec.Command(c.cfg.Binary, args...)
	cmd.Env = append(append(cleanEnv(), "KUBECONFIG="+kubeconfig), env...)
	var out, errb syncBuffer
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		close(ch)
		return procResult{}, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		close(ch)
		return procResult{}, err
	}
	if err := cmd.Start(); err != nil {
		close(ch)
		return procResult{}, err
	}
	if onStart != nil {
		onStart(cmd.Process)
	}
	done := make(chan struct{}, 2)
	go func() { lines(stdout, &out, nil); done <- struct{}{} }()
	go func() { lines(stderr, &errb, ch); done <- struct{}{} }()
	<-done
	<-done
	err = cmd.Wait()
	return procResult{code: exitCode(err), stdout: out.String(), stderr: errb.String(), killed: killedBySignal(err)}, nil
}
