package deploy

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// The Head's compressed container (docs/head.md §2.3). A stored head.json
// longer than HeadPlainMaxBytes (only a v2 text is: a longer v1 one is
// never written) is carried gzip-compressed in binaryData[HeadKeyGzip], in
// place of data[HeadKey]. The text inside is the stored head.json, checked
// exactly as if it were in data; the gzip bytes are only its container:
// nothing is computed over them, and they are not unique (encoders differ).
const (
	HeadKeyGzip       = "head.json.gz"
	HeadPlainMaxBytes = 64 << 10
)

// headContainer is the ConfigMap's data and binaryData for the stored
// head.json text data: data[HeadKey] up to HeadPlainMaxBytes, else
// binaryData[HeadKeyGzip]. data holds the flat keys already.
func headContainer(cm *corev1.ConfigMap, text []byte) {
	if len(text) <= HeadPlainMaxBytes {
		cm.Data[HeadKey] = string(text)
		return
	}
	var b bytes.Buffer
	w, _ := gzip.NewWriterLevel(&b, gzip.DefaultCompression) // a valid level: never an error
	_, _ = w.Write(text)                                     // a bytes.Buffer does not fail
	_ = w.Close()
	cm.BinaryData = map[string][]byte{HeadKeyGzip: b.Bytes()}
}

// StoredHeadJSON is cm's stored head.json: data[HeadKey], or the text
// binaryData[HeadKeyGzip] holds. Exactly one of the two, and no other
// binaryData key; a compressed text is at most HeadMaxBytes and longer than
// HeadPlainMaxBytes (a shorter one is stored in data). compressed says
// which it was. Every violation is tamper.
func StoredHeadJSON(cm *corev1.ConfigMap) (text []byte, compressed bool, err error) {
	ref := cm.Namespace + "/" + cm.Name
	raw, plain := cm.Data[HeadKey]
	gz, packed := cm.BinaryData[HeadKeyGzip]
	switch {
	case len(cm.BinaryData) > 0 && (!packed || len(cm.BinaryData) != 1):
		return nil, false, tamper("%s: binaryData must be absent or exactly the key %q, got %v", ref, HeadKeyGzip, slices.Sorted(maps.Keys(cm.BinaryData)))
	case plain && packed:
		return nil, false, tamper("%s holds head.json twice: data key %q and binaryData key %q", ref, HeadKey, HeadKeyGzip)
	case plain:
		return []byte(raw), false, nil
	case !packed:
		return nil, false, tamper("%s: data key %q missing", ref, HeadKey)
	}
	text, err = gunzipHead(gz)
	if err != nil {
		return nil, true, tamper("%s: binaryData key %q: %v", ref, HeadKeyGzip, err)
	}
	if len(text) <= HeadPlainMaxBytes {
		return nil, true, tamper("%s: binaryData key %q holds a head.json of %d bytes: one of at most %d is stored in data key %q", ref, HeadKeyGzip, len(text), HeadPlainMaxBytes, HeadKey)
	}
	return text, true, nil
}

// gunzipHead decompresses one gzip member (RFC 1952) with no name,
// comment, extra field or modification time, and nothing after it, to at
// most HeadMaxBytes: it never holds more than that of the text, however
// much the member would expand to.
func gunzipHead(gz []byte) ([]byte, error) {
	src := bytes.NewReader(gz)
	zr, err := gzip.NewReader(src)
	if err != nil {
		return nil, fmt.Errorf("not gzip: %w", err)
	}
	zr.Multistream(false)
	if hd := zr.Header; hd.Name != "" || hd.Comment != "" || hd.Extra != nil || !hd.ModTime.IsZero() {
		return nil, errors.New("the gzip header has a name, comment, extra field or modification time")
	}
	text, err := io.ReadAll(io.LimitReader(zr, HeadMaxBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("gzip: %w", err)
	case len(text) > HeadMaxBytes:
		return nil, fmt.Errorf("it decompresses to more than the %d-byte bound of head.json", HeadMaxBytes)
	case src.Len() != 0:
		return nil, fmt.Errorf("%d bytes follow the gzip member", src.Len())
	}
	return text, nil
}
