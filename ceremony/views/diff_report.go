package views

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// Each calls fn with each object's change in the report's order (the
// inventory's), its diff text read back when the report is spooled. It
// stops at fn's first error.
func (r *DiffReport) Each(fn func(ObjectChange) error) error {
	for _, ch := range r.Objects {
		if ch.spooled != nil {
			text, err := r.texts.get(ch.spooled)
			if err != nil {
				return err
			}
			ch.Diff, ch.spooled = text, nil
		}
		if err := fn(ch); err != nil {
			return err
		}
	}
	return nil
}

// Fill reads a spooled report's texts back into Objects and lets the spool
// go: the report is then an ordinary value, for -o yaml and templates.
func (r *DiffReport) Fill() error {
	if r.texts == nil {
		return nil
	}
	i := 0
	err := r.Each(func(ch ObjectChange) error {
		r.Objects[i] = ch
		i++
		return nil
	})
	if err != nil {
		return err
	}
	return r.Close()
}

// Close lets a spooled report's file go (its texts with it); a report held
// in memory has nothing to let go.
func (r *DiffReport) Close() error {
	if r.texts == nil {
		return nil
	}
	err := r.texts.close()
	r.texts = nil
	for i := range r.Objects {
		r.Objects[i].spooled = nil
	}
	return err
}

// digest is DiffDigest of the report's objects, computed one object at a
// time (a spooled text is read back for its turn only).
func (r *DiffReport) digest() (string, error) {
	a, err := canon.NewMemberArrayDigest(DomainDiff, map[string]any{"schema": DiffSchema}, "objects")
	if err != nil {
		return "", err
	}
	if err := r.Each(func(ch ObjectChange) error { _, err := a.Add(ch); return err }); err != nil {
		return "", err
	}
	return a.Sum(), nil
}

// errSpooled refuses to encode a spooled report whole.
var errSpooled = errors.New("diff report: its texts are spooled; encode it with WriteJSON, or Fill it first")

// MarshalJSON is the report's JSON; a spooled report is refused rather
// than encoded without its texts.
func (r DiffReport) MarshalJSON() ([]byte, error) {
	if r.texts != nil {
		return nil, errSpooled
	}
	type plain DiffReport
	return json.Marshal(plain(r))
}

// WriteJSON writes the report as json.MarshalIndent(r, "", "  ") does,
// then a newline, byte for byte, one object at a time: a spooled report
// is never held whole.
func (r *DiffReport) WriteJSON(w io.Writer) error {
	shell := *r
	shell.Objects, shell.texts = []ObjectChange{}, nil
	head, err := json.MarshalIndent(shell, "", "  ")
	if err != nil {
		return err
	}
	mark := []byte(`"objects": []`)
	if bytes.Count(head, mark) != 1 {
		return errors.New("diff report: the objects member cannot be told apart in its JSON")
	}
	cut := bytes.Index(head, mark) + len(mark) - 1 // at the "]"
	bw := bufio.NewWriter(w)
	bw.Write(head[:cut])
	n := 0
	err = r.Each(func(ch ObjectChange) error {
		b, err := json.MarshalIndent(ch, "    ", "  ")
		if err != nil {
			return err
		}
		if n > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString("\n    ")
		bw.Write(b)
		n++
		return nil
	})
	if err != nil {
		return err
	}
	if n > 0 {
		bw.WriteString("\n  ")
	}
	bw.Write(head[cut:])
	bw.WriteByte('\n')
	return bw.Flush()
}
