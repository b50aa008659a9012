package views

import (
	"fmt"
	"os"
	"sync"
)

// textSpool keeps a large diff's texts in an unnamed temporary file
// instead of memory: at 10,000 objects the texts of 7,000 changed
// ConfigMaps are about 20 MB, held from their comparison until they are
// printed (after the summary) and hashed into the diff digest (in
// inventory order). The file is created private (0600) and unlinked at
// once where the system allows it, so it is gone when the process ends;
// it holds what the report prints (Secret values already masked).
type textSpool struct {
	mu   sync.Mutex
	f    *os.File
	end  int64
	name string // set while the file still has a name to remove
}

// span is where one text stands in the spool's file.
type span struct{ off, n int64 }

// newTextSpool is a spool, or nil when no temporary file can be made (the
// texts are then kept in memory, as for a small diff).
func newTextSpool() *textSpool {
	f, err := os.CreateTemp("", "kubectl-ql3-diff-*")
	if err != nil {
		return nil
	}
	s := &textSpool{f: f, name: f.Name()}
	if os.Remove(f.Name()) == nil {
		s.name = ""
	}
	return s
}

// put stores text and says where; safe for concurrent use.
func (s *textSpool) put(text string) (*span, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.f.WriteAt([]byte(text), s.end); err != nil {
		return nil, fmt.Errorf("diff text spool: %w", err)
	}
	sp := &span{s.end, int64(len(text))}
	s.end += sp.n
	return sp, nil
}

// get is the text put at sp.
func (s *textSpool) get(sp *span) (string, error) {
	b := make([]byte, sp.n)
	if n, err := s.f.ReadAt(b, sp.off); int64(n) != sp.n {
		return "", fmt.Errorf("diff text spool: read %d of %d bytes: %w", n, sp.n, err)
	}
	return string(b), nil
}

// close lets the file go.
func (s *textSpool) close() error {
	err := s.f.Close()
	if s.name != "" {
		if rerr := os.Remove(s.name); err == nil {
			err = rerr
		}
	}
	return err
}
