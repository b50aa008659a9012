package fleet

import (
	"context"
	"reflect"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// specDiff names the first field of running's spec that differs from the
// spec the management cluster's API server makes of want — a dry-run
// create of want under a generated name, so this server's defaults,
// version and admission apply; where they treat the dry-run otherwise
// than a real create (admission by name or by dryRun), the two differ and
// running is refused: the check fails closed — or "" when the two are
// equal but for the labels naming each Job itself.
// Every field counts, those want leaves unset too: a Job suspended, with
// a command of its own or another container is not the Job of this plan.
func (vj ViaJob) specDiff(ctx context.Context, want, running *batchv1.Job) (string, error) {
	probe := want.DeepCopy()
	probe.Name, probe.GenerateName = "", want.Name+"-"
	made, err := vj.Client.BatchV1().Jobs(want.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: JobFieldManager})
	if err != nil {
		return "", mgmtErr("dry-run create of the Job "+want.Name+" (to compare with the running one)", err)
	}
	return fieldDiff(reflect.ValueOf(ownNamesOut(made)), reflect.ValueOf(ownNamesOut(running)), "spec"), nil
}

// ownNamesOut is job's spec without the labels naming job itself (its
// UID and name, in the selector and the pod template): the only parts of
// two Jobs made of one spec that differ.
func ownNamesOut(job *batchv1.Job) batchv1.JobSpec {
	s := *job.Spec.DeepCopy()
	own := map[string]string{batchv1.ControllerUidLabel: string(job.UID), "controller-uid": string(job.UID), batchv1.JobNameLabel: job.Name, "job-name": job.Name}
	for _, m := range []map[string]string{s.Template.Labels, selectorLabels(s.Selector)} {
		for k, v := range own {
			if m[k] == v {
				delete(m, k)
			}
		}
	}
	return s
}

func selectorLabels(s *metav1.LabelSelector) map[string]string {
	if s == nil {
		return nil
	}
	return s.MatchLabels
}

// fieldDiff is the JSON path (under path) of the first field where a and
// b differ, descending into structs (and pointers to them), or "".
func fieldDiff(a, b reflect.Value, path string) string {
	if equality.Semantic.DeepEqual(a.Interface(), b.Interface()) {
		return ""
	}
	if a.Kind() == reflect.Pointer && !a.IsNil() && !b.IsNil() {
		a, b = a.Elem(), b.Elem()
	}
	if a.Kind() != reflect.Struct {
		return path
	}
	for i := range a.NumField() {
		name, _, _ := strings.Cut(a.Type().Field(i).Tag.Get("json"), ",")
		if name == "" || !a.Type().Field(i).IsExported() {
			continue
		}
		if d := fieldDiff(a.Field(i), b.Field(i), path+"."+name); d != "" {
			return d
		}
	}
	return path
}
