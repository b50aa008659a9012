package deploy

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
)

// gz is text as one gzip member, its header set by hd.
func gz(t *testing.T, text []byte, hd func(*gzip.Header)) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if hd != nil {
		hd(&w.Header)
	}
	if _, err := w.Write(text); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestHeadCompressedRules: a head.json over 64 KiB is stored compressed
// in binaryData (a shorter one in data), reads back whatever encoder
// wrote the member, and each rule of the container (docs/head.md §2.3)
// broken once is tamper; a member that would expand past the bound is
// refused having decompressed no more than the bound.
func TestHeadCompressedRules(t *testing.T) {
	t.Parallel() // pure: runs while the package's cluster tests wait on the API server
	small, err := upgradeHead(t, ids("a", "b")).ConfigMap("ns")
	if err != nil || small.BinaryData != nil || small.Data[HeadKey] == "" {
		t.Fatalf("a small Head is not stored in data: %v", err)
	}
	h := upgradeHead(t, testkit.TenThousand(true))
	cm, err := h.ConfigMap("ns")
	if err != nil {
		t.Fatal(err)
	}
	text := storedText(t, cm)
	if _, ok := cm.Data[HeadKey]; ok {
		t.Fatal("a compressed Head also holds head.json in data")
	}
	other := cm.DeepCopy() // another encoder's member of the same text
	other.BinaryData[HeadKeyGzip] = gz(t, text, nil)
	if got, err := ParseHeadConfigMap(other); err != nil || got.SelfDigest != h.SelfDigest {
		t.Fatalf("the same head.json compressed by another encoder: %v", err)
	}
	member := cm.BinaryData[HeadKeyGzip]
	for name, c := range map[string]struct {
		edit func(*corev1.ConfigMap)
		err  string
	}{
		"also in data":    {func(c *corev1.ConfigMap) { c.Data[HeadKey] = string(text) }, "holds head.json twice"},
		"another key":     {func(c *corev1.ConfigMap) { c.BinaryData = map[string][]byte{HeadKey: member} }, "exactly the key"},
		"a key more":      {func(c *corev1.ConfigMap) { c.BinaryData["x"] = []byte{1} }, "exactly the key"},
		"not gzip":        {func(c *corev1.ConfigMap) { c.BinaryData[HeadKeyGzip] = text }, "not gzip"},
		"truncated":       {func(c *corev1.ConfigMap) { c.BinaryData[HeadKeyGzip] = member[:len(member)-4] }, "gzip:"},
		"bytes after it":  {func(c *corev1.ConfigMap) { c.BinaryData[HeadKeyGzip] = append(bytes.Clone(member), 0) }, "1 bytes follow"},
		"a second member": {func(c *corev1.ConfigMap) { c.BinaryData[HeadKeyGzip] = append(bytes.Clone(member), gz(t, nil, nil)...) }, "bytes follow"},
		"a file name": {func(c *corev1.ConfigMap) {
			c.BinaryData[HeadKeyGzip] = gz(t, text, func(h *gzip.Header) { h.Name = "head.json" })
		}, "gzip header"},
		"a comment": {func(c *corev1.ConfigMap) {
			c.BinaryData[HeadKeyGzip] = gz(t, text, func(h *gzip.Header) { h.Comment = "x" })
		}, "gzip header"},
		"a modified time": {func(c *corev1.ConfigMap) {
			c.BinaryData[HeadKeyGzip] = gz(t, text, func(h *gzip.Header) { h.ModTime = time.Unix(1, 0) })
		}, "gzip header"},
		"a short head.json":  {func(c *corev1.ConfigMap) { c.BinaryData[HeadKeyGzip] = gz(t, []byte(small.Data[HeadKey]), nil) }, "is stored in data key"},
		"not canonical":      {func(c *corev1.ConfigMap) { c.BinaryData[HeadKeyGzip] = gz(t, append([]byte(" "), text...), nil) }, "not canonical"},
		"over the bound":     {func(c *corev1.ConfigMap) { c.BinaryData[HeadKeyGzip] = gz(t, bytes.Repeat([]byte(" "), 1<<20), nil) }, "more than the 921600-byte bound"},
		"nothing at all":     {func(c *corev1.ConfigMap) { c.BinaryData = nil }, `data key "head.json" missing`},
		"empty binaryData":   {func(c *corev1.ConfigMap) { c.BinaryData[HeadKeyGzip] = nil }, "not gzip"},
		"label v1 for v2":    {func(c *corev1.ConfigMap) { c.Labels[LabelHeadSchema] = LabelHeadSchemaValue }, "labels must be exactly"},
		"a flat key too":     {func(c *corev1.ConfigMap) { c.Data["phase"] = PhaseCommitted }, "data must hold exactly"},
		"another annotation": {func(c *corev1.ConfigMap) { c.Annotations["x"] = "y" }, "annotations must be exactly"},
	} {
		bad := cm.DeepCopy()
		c.edit(bad)
		_, err := ParseHeadConfigMap(bad)
		if !fail.Is(err, fail.Tamper) || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want tamper %q", name, err, c.err)
		}
	}
}

// TestHeadV1CompressedIsTamper: a v1 head.json over 64 KiB (as the first
// format wrote large Heads) compressed, under its own label, is tamper:
// only a v2 text is ever compressed.
func TestHeadV1CompressedIsTamper(t *testing.T) {
	t.Parallel() // pure
	h := upgradeHead(t, testkit.ShortNames("ns"))
	v1, err := h.encode(HeadSchema)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := h.ConfigMap("ns")
	if err != nil {
		t.Fatal(err)
	}
	cm.Labels[LabelHeadSchema] = LabelHeadSchemaValue
	cm.BinaryData[HeadKeyGzip] = gz(t, v1, nil)
	if _, err := ParseHeadConfigMap(cm); !fail.Is(err, fail.Tamper) || !strings.Contains(err.Error(), "only a v2 one is compressed") {
		t.Fatalf("a compressed v1 head.json: %v", err)
	}
}

// BenchmarkHeadContainer is what the container of docs/head.md §2.3 costs
// a Head of 10,001 objects with hashed names: its ConfigMap written
// (encode, and compress) and read (decompress, then every rule and
// digest), against the same head.json held in data (as it was before the
// container), in the same run.
func BenchmarkHeadContainer(b *testing.B) {
	h := upgradeHead(b, testkit.TenThousand(true))
	compressed, err := h.ConfigMap("ns")
	if err != nil {
		b.Fatal(err)
	}
	text, _, err := StoredHeadJSON(compressed)
	if err != nil {
		b.Fatal(err)
	}
	plain := compressed.DeepCopy()
	plain.BinaryData, plain.Data = nil, map[string]string{HeadKey: string(text)}
	b.Run("write/compressed", func(b *testing.B) {
		for b.Loop() {
			if _, err := h.ConfigMap("ns"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("write/text", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := h.stored(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for name, cm := range map[string]*corev1.ConfigMap{"read/compressed": compressed, "read/in-data": plain} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := ParseHeadConfigMap(cm); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
