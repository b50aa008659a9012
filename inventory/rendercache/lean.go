package rendercache

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/safefile"
)

// LeanEntry is an entry whose objects stay in its file: GetLean verifies
// the file's MAC, then reads its members, keeping of each object only
// where it lies and the SHA-256 of its bytes; Object reads it again and
// checks that digest, so that it is exactly what the MAC covered. At
// 10,000 objects that is about 0.5 MB held instead of the 8 MB file.
type LeanEntry struct {
	// Entry's members but Objects, which Object reads.
	Entry
	src   io.ReaderAt
	file  *safefile.File
	spans []span
}

// span is where one object lies in src, and the digest of its bytes.
type span struct {
	off int64
	n   int
	sum [sha256.Size]byte
}

// Len is the number of objects.
func (e *LeanEntry) Len() int { return len(e.spans) }

// Object reads object i's JSON again. An object whose bytes are no longer
// those the MAC covered (the file was changed in place since GetLean) is
// refused with fail.Unavailable: read the release again.
func (e *LeanEntry) Object(i int) ([]byte, error) {
	s := e.spans[i]
	buf := make([]byte, s.n)
	if _, err := e.src.ReadAt(buf, s.off); err != nil {
		return nil, fail.Errorf(fail.Unavailable, "render cache entry %s: objects[%d]: %v", e.file.Name(), i, err)
	}
	if sha256.Sum256(buf) != s.sum {
		return nil, fail.Errorf(fail.Unavailable, "render cache entry %s: objects[%d] changed after the entry was verified; run the command again (or with --no-cache)", e.file.Name(), i)
	}
	return buf, nil
}

// Close lets the entry's file go.
func (e *LeanEntry) Close() error { return e.file.Close() }

// GetLean reads the entry for key as Get does (the same file checks, MAC
// before parse, the same parse and key; every failure a miss wrapping
// ErrMiss), without holding it: a first pass streams the entry member's
// bytes through the MAC and a SHA-256, in constant memory; only when the
// MAC verifies does a second pass parse them, hashing them again, and its
// result is used only if that hash is the first pass's and the file is
// unchanged across both. The caller closes the entry.
func (c *Cache) GetLean(key string) (*LeanEntry, error) {
	if len(c.MACKey) != KeySize {
		return nil, fmt.Errorf("%w: no render cache key", ErrMiss)
	}
	path := c.path(key)
	f, err := safefile.Open(path, MaxEntryBytes, safefile.Perm{})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: no entry", ErrMiss)
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrMiss, err)
	}
	e, err := c.leanEntry(f, key)
	if err == nil {
		err = f.Unchanged()
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %v", ErrMiss, err)
	}
	return e, nil
}

// leanEntry verifies and parses the open entry file f.
func (c *Cache) leanEntry(f *safefile.File, key string) (*LeanEntry, error) {
	src, start, n, mac, err := entryMember(f)
	if err != nil {
		return nil, err
	}
	member := func() io.Reader { return io.NewSectionReader(src, start, n) }
	m, first := newMAC(c.MACKey), sha256.New()
	if _, err := io.Copy(io.MultiWriter(m, first), member()); err != nil {
		return nil, err
	}
	if !hmac.Equal(mac, []byte(macOf(m))) {
		return nil, errors.New("entry not written with this installation's key")
	}
	second := sha256.New()
	var spans []span
	e, err := parseEntry(io.TeeReader(member(), second), func(raw json.RawMessage, end int64) error {
		spans = append(spans, span{off: start + end - int64(len(raw)), n: len(raw), sum: sha256.Sum256(raw)})
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case !bytes.Equal(first.Sum(nil), second.Sum(nil)):
		return nil, errors.New("entry changed while being read")
	case e.Key != key:
		return nil, fmt.Errorf("the entry is for key %s", e.Key)
	}
	return &LeanEntry{Entry: *e, src: src, file: f, spans: spans}, nil
}

// entryMember is where the entry member of file f lies (in src, from start,
// n bytes) and its mac: in f itself when Put wrote it ({"entry":E,"mac":"M"}
// framed), else in the file decoded in full, as Get decodes it.
func entryMember(f *safefile.File) (src io.ReaderAt, start, n int64, mac []byte, err error) {
	size := f.Size()
	head := make([]byte, min(size, int64(len(framedHead))))
	tail := make([]byte, min(size-int64(len(head)), 4096))
	if _, err := f.ReadAt(head, 0); err != nil {
		return nil, 0, 0, nil, err
	}
	if _, err := f.ReadAt(tail, size-int64(len(tail))); err != nil {
		return nil, 0, 0, nil, err
	}
	// framed looks at both ends only; between them lies the entry member.
	if _, mac, ok := framed(append(head, tail...)); ok {
		end := size - int64(len(tail)-len(bytes.TrimRight(tail, " \t\r\n"))) - int64(framedTail)
		return f, int64(len(head)), end - int64(len(head)), mac, nil
	}
	data, err := io.ReadAll(io.NewSectionReader(f, 0, size))
	if err != nil {
		return nil, 0, 0, nil, err
	}
	entry, mac, err := unframed(data)
	if err != nil {
		return nil, 0, 0, nil, err
	}
	return bytes.NewReader(entry), 0, int64(len(entry)), mac, nil
}
