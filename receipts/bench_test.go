package receipts

import (
	"testing"
)

// BenchmarkAuditChain1000 audits a 1,000-receipt chain (20 identities each)
// in a directory.
func BenchmarkAuditChain1000(b *testing.B) {
	dir := b.TempDir()
	writeChain(b, dir, chain(b, 1000, 20))
	b.ResetTimer()
	for b.Loop() {
		rep, err := Audit([]string{dir}, AuditOptions{})
		if err != nil || !rep.OK() {
			b.Fatalf("audit: %v %+v", err, rep.Chain)
		}
	}
}

// BenchmarkParse parses a receipt with a 1,000-identity inventory.
func BenchmarkParse(b *testing.B) {
	data := mustBytes(b, newReceipt().inv(1000).sealed(b))
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}
