package receipts

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/qinglong/kubectl-ql3/internal/crashpoint"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/intoto"
	"github.com/qinglong/kubectl-ql3/internal/safefile"
)

// TempPattern names the temporary files Publish writes before linking them
// into place; a crash between write and cleanup can leave one behind.
const TempPattern = ".ql3-receipt-*.tmp"

// PublishResult says what Publish did.
type PublishResult struct {
	// Path is the receipt file.
	Path string `json:"path"`
	// Replayed is true when the identical receipt was already there and
	// nothing was written.
	Replayed bool `json:"replayed"`
	// SignaturePath is the signature file, empty when none was asked for.
	SignaturePath string `json:"signaturePath,omitempty"`
	// SignatureReplayed is true when the identical signature was already
	// there.
	SignatureReplayed bool `json:"signatureReplayed,omitempty"`
	// AttestationPath is the attestation file (in-toto in DSSE), written
	// with the signature; empty when no signer was given.
	AttestationPath string `json:"attestationPath,omitempty"`
	// AttestationReplayed is true when the identical attestation was
	// already there.
	AttestationReplayed bool `json:"attestationReplayed,omitempty"`
}

// Publish writes the sealed receipt r into dir as FileName(r) without ever
// replacing a file, and, with a signer, its detached signature and its
// attestation (AttestationName: in-toto in DSSE, docs/receipts.md §7)
// beside it, in that order. The attestation states rel, the release the
// deployment applied, which a signer therefore requires; without a signer
// there is neither signature nor attestation and rel is not used (no key,
// no envelope: an unsigned attestation would prove nothing).
//
// Each file is written to a temporary file in dir, synced, then linked to
// its final name (link(2) fails if the name exists) and the directory is
// synced; the temporary file is removed on every path. Concurrent
// publishers of one name therefore leave exactly one complete file. An
// existing byte-identical file is a replay. An existing receipt that
// differs means history diverged: fail.Tamper, nothing changed. An existing
// signature by another key for this receipt is fail.Conflict; any other
// differing signature is fail.Tamper; the attestation likewise (another
// key's attestation of this receipt: fail.Conflict). dir is created if
// missing.
func Publish(dir string, r *Receipt, signer ed25519.PrivateKey, rel *Rendered) (PublishResult, error) {
	data, err := r.Bytes()
	if err != nil {
		return PublishResult{}, err
	}
	var sig, att []byte
	if signer != nil {
		if sig, err = Sign(r, signer); err != nil {
			return PublishResult{}, err
		}
		if att, err = Attest(r, rel, signer); err != nil {
			return PublishResult{}, err
		}
	}
	if err := ensureDir(dir); err != nil {
		return PublishResult{}, err
	}
	res := PublishResult{Path: filepath.Join(dir, FileName(r))}
	if res.Replayed, err = linkNew(dir, res.Path, data); err != nil {
		var differs *existsError
		if errors.As(err, &differs) {
			return res, fail.Errorf(fail.Tamper, "receipt %q already exists with different content; history diverged, nothing was written", res.Path)
		}
		return res, fmt.Errorf("publish receipt %q: %w", res.Path, err)
	}
	if sig == nil {
		return res, nil
	}
	res.SignaturePath = res.Path + SignatureSuffix
	if res.SignatureReplayed, err = linkNew(dir, res.SignaturePath, sig); err != nil {
		var differs *existsError
		if !errors.As(err, &differs) {
			return res, fmt.Errorf("publish signature %q: %w", res.SignaturePath, err)
		}
		if old, perr := ParseSignature(differs.existing); perr == nil && old.ReceiptDigest == r.SelfDigest && !ownKey(old.KeyID, signer) {
			return res, fail.Errorf(fail.Conflict, "signature %q already exists, by key %q; nothing was written", res.SignaturePath, old.KeyID)
		}
		return res, fail.Errorf(fail.Tamper, "signature %q already exists and is not a signature of this receipt; nothing was written", res.SignaturePath)
	}
	res.AttestationPath = filepath.Join(dir, AttestationName(r))
	res.AttestationReplayed, err = publishAttestation(dir, res.AttestationPath, r, data, att)
	return res, err
}

// ownKey reports whether id is the key id of signer's public key. Ed25519
// is deterministic, so a signature file naming the signer's own key that
// is not the bytes Sign makes was not made by this key: it is tamper, not
// another signer's conflict.
func ownKey(id string, signer ed25519.PrivateKey) bool {
	own, err := KeyID(signer.Public().(ed25519.PublicKey))
	return err == nil && own == id
}

// publishAttestation links the attestation att of the receipt r (file
// bytes data) at path without replacing: an existing attestation of this
// receipt by another key is fail.Conflict, anything else there (by this
// key, stating another release) fail.Tamper.
func publishAttestation(dir, path string, r *Receipt, data, att []byte) (bool, error) {
	replayed, err := linkNew(dir, path, att)
	if err == nil {
		return replayed, nil
	}
	var differs *existsError
	if !errors.As(err, &differs) {
		return false, fmt.Errorf("publish attestation %q: %w", path, err)
	}
	ours, _ := intoto.Parse(att)
	if id, _, cerr := CheckAttestation(differs.existing, r, data, nil); cerr == nil && id != ours.KeyID {
		return false, fail.Errorf(fail.Conflict, "attestation %q already exists, by key %q; nothing was written", path, id)
	}
	return false, fail.Errorf(fail.Tamper, "attestation %q already exists and is not an attestation of this receipt; nothing was written", path)
}

// existsError reports that the target name holds different bytes.
type existsError struct{ existing []byte }

func (e *existsError) Error() string { return "file exists with different content" }

// linkNew publishes data at path without replacing: it reports replayed
// when path already holds exactly data, and an *existsError when it holds
// anything else.
func linkNew(dir, path string, data []byte) (replayed bool, err error) {
	if same, err := sameContent(path, data); err != nil || same {
		return same, err
	}
	tmp, err := os.CreateTemp(dir, TempPattern)
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	if err := writeSync(tmp, data); err != nil {
		return false, err
	}
	crashpoint.At("publish-before-link")
	switch err := os.Link(tmp.Name(), path); {
	case err == nil:
		crashpoint.At("publish-after-link")
		return false, syncDir(dir)
	case errors.Is(err, fs.ErrExist):
		// Lost a race, or the file was there all along: it is complete
		// either way, since only fully written files are ever linked.
		return sameContent(path, data)
	default:
		return false, err
	}
}

// sameContent reads path: false when nothing is there, true when it holds
// exactly data, an *existsError otherwise. A symbolic link at the name
// is fail.Tamper (someone put it there: dangling, or to a file elsewhere
// that could change later; a published name only ever holds one regular
// file); anything else that is not a regular file is refused by the open,
// which does not block (safefile.OpenRegular); and the file opened must be
// the one the name held.
func sameContent(path string, data []byte) (bool, error) {
	named, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if named.Mode()&fs.ModeSymlink != 0 {
		return false, fail.Errorf(fail.Tamper, "%s is a symbolic link, not a file publish wrote; publish never follows nor replaces one; nothing was written", path)
	}
	f, err := safefile.OpenRegular(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if opened, err := f.Stat(); err != nil || !os.SameFile(named, opened) {
		return false, fail.Errorf(fail.Tamper, "%s changed while it was read; nothing was written", path)
	}
	existing, err := io.ReadAll(io.LimitReader(f, int64(max(len(data), MaxFileSize))+1))
	if err != nil {
		return false, err
	}
	if !bytes.Equal(existing, data) {
		return false, &existsError{existing: existing}
	}
	return true, nil
}

// Holds reports whether path, as Publish and WriteNew judge a name, holds
// exactly data already: a regular file itself (not a symbolic link to a
// copy elsewhere) with those bytes. A caller that would otherwise publish
// data asks it first, to skip work a replay needs; anything but true is
// for Publish or WriteNew to replay or refuse.
func Holds(path string, data []byte) bool {
	same, err := sameContent(path, data)
	return err == nil && same
}

func writeSync(f *os.File, data []byte) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func ensureDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return fail.Errorf(fail.Invalid, "receipt directory %q is not a directory", dir)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("receipt directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("receipt directory: %w", err)
	}
	return syncDir(filepath.Dir(filepath.Clean(dir)))
}

// syncDir makes a directory's entries durable. Windows cannot sync a
// directory; its rename/link metadata is journaled by NTFS.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
