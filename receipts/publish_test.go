package receipts

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// listDir is the sorted names in dir.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestPublish(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "receipts") // created by Publish
	r := newReceipt().sealed(t)
	want := mustBytes(t, r)

	res, err := Publish(dir, r, nil, nil)
	if err != nil || res.Replayed || res.Path != filepath.Join(dir, FileName(r)) || res.SignaturePath != "" {
		t.Fatalf("first publish: %+v %v", res, err)
	}
	if got, _ := os.ReadFile(res.Path); !bytes.Equal(got, want) {
		t.Fatal("published bytes differ from Bytes()")
	}
	if fi, _ := os.Stat(res.Path); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
	if res, err = Publish(dir, r, nil, nil); err != nil || !res.Replayed {
		t.Fatalf("replay: %+v %v", res, err)
	}

	// Signing later adds the signature without touching the receipt.
	k := testKey(1)
	if res, err = Publish(dir, r, k, fakeRendered(r)); err != nil || !res.Replayed || res.SignatureReplayed || res.SignaturePath != res.Path+".sig" {
		t.Fatalf("add signature: %+v %v", res, err)
	}
	sig, _ := os.ReadFile(res.SignaturePath)
	if res.AttestationPath != filepath.Join(dir, AttestationName(r)) || res.AttestationReplayed {
		t.Fatalf("add attestation: %+v", res)
	}
	if got, _ := os.ReadFile(res.AttestationPath); !bytes.Equal(got, mustAttest(t, r, k)) {
		t.Fatal("published attestation differs from Attest()")
	}
	if res, err = Publish(dir, r, k, fakeRendered(r)); err != nil || !res.Replayed || !res.SignatureReplayed || !res.AttestationReplayed {
		t.Fatalf("signed replay: %+v %v", res, err)
	}

	// Another key's signature for the same receipt: conflict, unchanged.
	if _, err = Publish(dir, r, testKey(2), fakeRendered(r)); !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "already exists, by key") {
		t.Fatalf("other signer: %v", err)
	}
	if got, _ := os.ReadFile(res.SignaturePath); !bytes.Equal(got, sig) {
		t.Fatal("signature changed")
	}

	// A different receipt under the same name: tamper, unchanged.
	diverged := newReceipt().with(func(r *Receipt) { r.Transition.ForceConflicts = true }).sealed(t)
	if FileName(diverged) != FileName(r) {
		t.Fatal("test receipts must share a name")
	}
	if _, err = Publish(dir, diverged, k, fakeRendered(diverged)); !fail.Is(err, fail.Tamper) || !strings.Contains(err.Error(), "history diverged") {
		t.Fatalf("diverged: %v", err)
	}
	if got, _ := os.ReadFile(res.Path); !bytes.Equal(got, want) {
		t.Fatal("receipt changed")
	}

	// A garbage signature file is tamper.
	r2 := following(r, KindUpgrade, "3.1.0").sealed(t)
	_ = os.WriteFile(filepath.Join(dir, FileName(r2)+".sig"), []byte("junk"), 0o644)
	if _, err = Publish(dir, r2, k, fakeRendered(r2)); !fail.Is(err, fail.Tamper) || !strings.Contains(err.Error(), "not a signature of this receipt") {
		t.Fatalf("junk signature: %v", err)
	}

	wantNames := []string{AttestationName(r), FileName(r), FileName(r) + ".sig", FileName(r2), FileName(r2) + ".sig"}
	if got := listDir(t, dir); strings.Join(got, " ") != strings.Join(wantNames, " ") {
		t.Fatalf("directory holds %q, want %q (no temporary files)", got, wantNames)
	}

	unsealed := newReceipt().r
	if _, err := Publish(dir, &unsealed, nil, nil); err == nil {
		t.Fatal("published an unsealed receipt")
	}
	file := filepath.Join(dir, FileName(r))
	if _, err := Publish(file, r, nil, nil); !fail.Is(err, fail.Invalid) {
		t.Fatalf("directory is a file: %v", err)
	}
}

// A symbolic link at a name publish would write — dangling, or to a file
// elsewhere holding the very bytes — is refused as tamper and nothing is
// written: link(2) does not follow it, so before it was reported written
// (dangling) or replayed (the copy elsewhere, which its owner could change
// later) while the directory held no receipt of its own.
func TestPublishRefusesSymlinks(t *testing.T) {
	r := newReceipt().sealed(t)
	k := testKey(1)
	elsewhere := filepath.Join(t.TempDir(), "copy")
	if err := os.WriteFile(elsewhere, mustBytes(t, r), 0o644); err != nil {
		t.Fatal(err)
	}
	publish := func(dir string) error { _, err := Publish(dir, r, k, fakeRendered(r)); return err }
	writeNew := func(dir string) error { _, err := WriteNew(dir, FileName(r), mustBytes(t, r)); return err }
	for _, c := range []struct {
		name, at, target string
		write            func(dir string) error
	}{
		{"a dangling link at the receipt", FileName(r), "nowhere", publish},
		{"a link at the receipt to a copy elsewhere", FileName(r), elsewhere, publish},
		{"a dangling link at the signature", FileName(r) + SignatureSuffix, "nowhere", publish},
		{"a dangling link at the attestation", AttestationName(r), "nowhere", publish},
		{"a dangling link where WriteNew writes", FileName(r), "nowhere", writeNew},
		{"a link where WriteNew writes, to a copy elsewhere", FileName(r), elsewhere, writeNew},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			link := filepath.Join(dir, c.at)
			if err := os.Symlink(c.target, link); err != nil {
				t.Fatal(err)
			}
			before := listDir(t, dir)
			err := c.write(dir)
			if !fail.Is(err, fail.Tamper) || !strings.Contains(err.Error(), "is a symbolic link") {
				t.Fatalf("got %v (class %v), want tamper naming the symbolic link", err, fail.ClassOf(err))
			}
			if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Fatalf("the link was replaced: %v %v", fi, err)
			}
			if _, err := os.Stat(filepath.Join(dir, "nowhere")); err == nil {
				t.Fatal("a file was written through the dangling link")
			}
			if c.at == FileName(r) {
				if got := listDir(t, dir); strings.Join(got, " ") != strings.Join(before, " ") {
					t.Fatalf("directory holds %q, want only %q", got, before)
				}
			}
		})
	}
}

// A signature file that names the signer's own key but is not the bytes
// that key makes (Ed25519 is deterministic) was not made by it: tamper,
// not a conflict with another signer.
func TestPublishOwnKeyForgedSignature(t *testing.T) {
	dir := t.TempDir()
	r := newReceipt().sealed(t)
	k := testKey(1)
	real, err := Sign(r, k)
	if err != nil {
		t.Fatal(err)
	}
	other, err := Sign(r, testKey(2))
	if err != nil {
		t.Fatal(err)
	}
	ownID, _ := KeyID(k.Public().(ed25519PublicKey))
	otherID, _ := KeyID(testKey(2).Public().(ed25519PublicKey))
	forged := bytes.Replace(other, []byte(otherID), []byte(ownID), 1)
	if bytes.Equal(forged, other) || bytes.Equal(forged, real) {
		t.Fatal("the forgery must name the signer's key and differ from its signature")
	}
	if _, err := ParseSignature(forged); err != nil {
		t.Fatalf("the forgery must parse as a signature: %v", err)
	}
	sigPath := filepath.Join(dir, FileName(r)+SignatureSuffix)
	if err := os.WriteFile(sigPath, forged, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Publish(dir, r, k, fakeRendered(r)); !fail.Is(err, fail.Tamper) || !strings.Contains(err.Error(), "not a signature of this receipt") {
		t.Fatalf("got %v (class %v), want tamper", err, fail.ClassOf(err))
	}
	if got := mustRead(t, sigPath); !bytes.Equal(got, forged) {
		t.Fatal("the signature file was changed")
	}
}

const helperEnv = "QL3_RECEIPTS_PUBLISH_HELPER"

// TestMain runs the child processes of TestPublishConcurrent: with the
// helper variable set, the test binary waits for the start file, then
// publishes the shared receipt once and exits, running no test.
func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		if err := publishHelper(dir); err != nil {
			fmt.Fprintln(os.Stderr, "publish helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func publishHelper(dir string) error {
	// Ready, then wait for the start: the test closes our stdin.
	os.Stdout.WriteString("READY\n")
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		return err
	}
	r := newReceipt().inv(200).r
	if err := derive(&r); err != nil {
		return err
	}
	if err := r.Seal(); err != nil {
		return err
	}
	res, err := Publish(dir, &r, testKey(9), fakeRendered(&r))
	if err != nil {
		return err
	}
	if !res.Replayed {
		os.Stdout.WriteString("WROTE\n")
	}
	return nil
}

func concurrentReceipt(t testing.TB) *Receipt { return newReceipt().inv(200).sealed(t) }

// TestPublishConcurrent races goroutines and separate processes to publish
// one receipt name: exactly one file results, complete, and no temporary
// file is left.
func TestPublishConcurrent(t *testing.T) {
	for round := range 3 {
		base := t.TempDir()
		dir := filepath.Join(base, "receipts")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		const procs, goroutines = 3, 8
		var cmds []*exec.Cmd
		var outs []*bufio.Reader
		var starts []io.WriteCloser
		for range procs {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), helperEnv+"="+dir)
			cmd.Stderr = os.Stderr
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			out := bufio.NewReader(stdout)
			if line, err := out.ReadString('\n'); line != "READY\n" { // the process waits for its start
				t.Fatalf("process: %q %v", line, err)
			}
			cmds, outs, starts = append(cmds, cmd), append(outs, out), append(starts, stdin)
		}
		r := concurrentReceipt(t)
		k := testKey(9)
		start := make(chan struct{})
		var wg sync.WaitGroup
		results := make([]PublishResult, goroutines)
		errs := make([]error, goroutines)
		for i := range goroutines {
			wg.Go(func() {
				<-start
				results[i], errs[i] = Publish(dir, r, k, fakeRendered(r))
			})
		}
		for _, stdin := range starts {
			stdin.Close()
		}
		close(start)
		wg.Wait()
		wrote := 0
		for i, err := range errs {
			if err != nil {
				t.Fatalf("goroutine %d: %v", i, err)
			}
			if !results[i].Replayed {
				wrote++
			}
		}
		for i, cmd := range cmds {
			rest, _ := io.ReadAll(outs[i])
			if err := cmd.Wait(); err != nil {
				t.Fatalf("process %d: %v\n%s", i, err, rest)
			}
			wrote += strings.Count(string(rest), "WROTE\n")
		}
		if wrote != 1 {
			t.Errorf("round %d: %d publishers wrote the receipt, want exactly 1", round, wrote)
		}
		want := []string{AttestationName(r), FileName(r), FileName(r) + ".sig"}
		if got := listDir(t, dir); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("round %d: directory holds %q, want %q", round, got, want)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, AttestationName(r))); !bytes.Equal(got, mustAttest(t, r, k)) {
			t.Fatalf("round %d: attestation is not the expected bytes", round)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, FileName(r))); !bytes.Equal(got, mustBytes(t, r)) {
			t.Fatalf("round %d: receipt is not the expected bytes", round)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, FileName(r)+".sig")); !bytes.Equal(got, mustSign(t, r, k)) {
			t.Fatalf("round %d: signature is not the expected bytes", round)
		}
	}
}
