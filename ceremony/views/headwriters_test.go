package views

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
)

// TestHeadWritersWhereTheHeadHoldsIt: head.json's writers and write time
// are read from the entries that own the key where the Head holds it —
// binaryData["head.json.gz"] for a compressed Head (docs/head.md §2.3) —
// and an entry claiming the other place, later, owns nothing there.
func TestHeadWritersWhereTheHeadHoldsIt(t *testing.T) {
	at := func(s int) *metav1.Time { m := metav1.NewTime(time.Unix(1_800_000_000+int64(s), 0)); return &m }
	entry := func(manager string, s int, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Time: at(s),
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	gz := entry(deploy.HeadFieldManager, 10, `{"f:binaryData":{".":{},"f:head.json.gz":{}}}`)
	plain := entry("forger", 20, `{"f:data":{".":{},"f:head.json":{}}}`)
	for name, c := range map[string]struct {
		cm          corev1.ConfigMap
		manager     string
		written     *metav1.Time
		wantWriters int
	}{
		"compressed": {corev1.ConfigMap{BinaryData: map[string][]byte{deploy.HeadKeyGzip: {1}}}, deploy.HeadFieldManager, at(10), 1},
		"in data":    {corev1.ConfigMap{Data: map[string]string{deploy.HeadKey: "{}"}}, "forger", at(20), 1},
	} {
		c.cm.ManagedFields = []metav1.ManagedFieldsEntry{gz, plain}
		writers, err := headWriters(&c.cm)
		if err != nil {
			t.Fatal(err)
		}
		when, ok := headJSONWritten(&c.cm)
		if len(writers) != c.wantWriters || writers[0].Manager != c.manager || !ok || !when.Equal(c.written.Time) {
			t.Errorf("%s: writers %+v, written %v (%v): want only %s at %v", name, writers, when, ok, c.manager, c.written.Time)
		}
	}
}
