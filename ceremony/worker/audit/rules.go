package audit

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
	"github.com/qinglong/kubectl-ql3/internal/manifestaudit"
)

// Names of the reviewed Worker shape (ADR-0234, ADR-0239; docs/worker.md).
const (
	// RoleLabel = RoleValue marks the Worker Deployment and its pods.
	RoleLabel = "qinglong.io/role"
	RoleValue = "worker"
	// MaxPrivateBytes bounds the private memory emptyDir (4 MiB).
	MaxPrivateBytes = 4 << 20
)

var identityKeys = []string{"ca.crt", "tls.crt", "tls.key"}

const podPath = "spec.template.spec"

var rules = []Rule{
	manifestaudit.NewRule("deployment", "exactly one workload: an apps/v1 Deployment labelled "+RoleLabel+"="+RoleValue+" on itself and its PodTemplate", checkDeployment),
	manifestaudit.NewRule("single-replica", "spec.replicas is 1", checkReplicas),
	manifestaudit.NewRule("recreate", "strategy Recreate", checkRecreate),
	manifestaudit.NewRule("state-pvc", "exactly one PersistentVolumeClaim volume, its claim rendered (or read) with accessModes exactly [ReadWriteOnce], mounted read-write by the worker container", checkPVC),
	manifestaudit.NewRule("projected-volume", "exactly one projected volume, with exactly two sources: Secret "+delivery.IdentitySecret+" (ca.crt, tls.key, tls.crt) and Secret "+delivery.SecretName+" (credential-token); no other volume references a Secret", checkProjected),
	manifestaudit.NewRule("secret-separation", "no Secret of the release holds credential-token; a rendered "+delivery.IdentitySecret+" holds exactly ca.crt, tls.key, tls.crt; the release renders no "+delivery.SecretName, checkSeparation),
	manifestaudit.NewRule("private-copy", "one initContainer copying from the projected volume into a Memory emptyDir of sizeLimit at most 4Mi; the worker container mounts that emptyDir and not the projected volume", checkPrivateCopy),
	manifestaudit.NewRule("identity-generation", "the PodTemplate carries "+delivery.AnnotationIdentityGeneration+"; deployable and live: not "+delivery.IdentityPlaceholder, checkIdentityGeneration),
	manifestaudit.NewRule("automount-token", "automountServiceAccountToken false on the pod", checkAutomount),
	manifestaudit.NewRule("no-token-projection", "no projected serviceAccountToken source", checkTokenProjection),
	manifestaudit.NewRule("no-ports", "no container or initContainer declares a port", checkPorts),
	manifestaudit.NewRule("no-sidecars", "exactly one container; no initContainer with restartPolicy Always; no ephemeral containers", checkSidecars),
	manifestaudit.NewRule("no-probes", "no liveness, readiness or startup probe", checkProbes),
	manifestaudit.NewRule("credential-annotations", "base and deployable: the release sets none of the five credential annotations; live: all five or none", checkCredentialAnnotations),
}

type subject struct {
	mode      Mode
	objs      []*unstructured.Unstructured
	workloads []*unstructured.Unstructured
	dep       *appsv1.Deployment
	depU      *unstructured.Unstructured
	decodeErr error
}

func newSubject(objs []*unstructured.Unstructured, mode Mode) *subject {
	s := &subject{mode: mode, objs: objs}
	for _, o := range objs {
		if manifestaudit.Workload(o) {
			s.workloads = append(s.workloads, o)
		}
	}
	if len(s.workloads) == 1 && s.workloads[0].GetKind() == "Deployment" {
		d := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(s.workloads[0].Object, d); err != nil {
			s.decodeErr = err
			return s
		}
		s.dep, s.depU = d, s.workloads[0]
	}
	return s
}

func (s *subject) at(path, expected, found string) []Finding {
	return []Finding{manifestaudit.At(s.depU, path, expected, found)}
}

// pod is the Deployment's pod spec; nil when there is no single Deployment
// (the deployment rule reports it; the others stay quiet).
func (s *subject) pod() *corev1.PodSpec {
	if s.dep == nil {
		return nil
	}
	return &s.dep.Spec.Template.Spec
}

func checkDeployment(s *subject) []Finding {
	switch {
	case len(s.workloads) != 1:
		var kinds []string
		for _, w := range s.workloads {
			kinds = append(kinds, w.GetKind()+"/"+w.GetName())
		}
		return []Finding{{Path: "", Expected: "exactly one workload, a Deployment", Found: fmt.Sprintf("%d: %s", len(s.workloads), strings.Join(kinds, ", "))}}
	case s.workloads[0].GetKind() != "Deployment" || s.workloads[0].GetAPIVersion() != "apps/v1":
		return []Finding{manifestaudit.At(s.workloads[0], "", "an apps/v1 Deployment", s.workloads[0].GetAPIVersion()+" "+s.workloads[0].GetKind())}
	case s.decodeErr != nil:
		return []Finding{manifestaudit.At(s.workloads[0], "", "a Deployment that decodes", s.decodeErr.Error())}
	}
	var out []Finding
	if v := s.dep.Labels[RoleLabel]; v != RoleValue {
		out = append(out, manifestaudit.At(s.depU, "metadata.labels."+RoleLabel, manifestaudit.Quote(RoleValue), manifestaudit.Quote(v)))
	}
	if v := s.dep.Spec.Template.Labels[RoleLabel]; v != RoleValue {
		out = append(out, manifestaudit.At(s.depU, "spec.template.metadata.labels."+RoleLabel, manifestaudit.Quote(RoleValue), manifestaudit.Quote(v)))
	}
	return out
}

func checkReplicas(s *subject) []Finding {
	if s.dep == nil {
		return nil
	}
	if r := s.dep.Spec.Replicas; r == nil || *r != 1 {
		found := "<unset> (defaults to 1 only when absent from every apply; set it)"
		if r != nil {
			found = fmt.Sprint(*r)
		}
		return s.at("spec.replicas", "1", found)
	}
	return nil
}

func checkRecreate(s *subject) []Finding {
	if s.dep == nil {
		return nil
	}
	if t := s.dep.Spec.Strategy.Type; t != appsv1.RecreateDeploymentStrategyType {
		return s.at("spec.strategy.type", "Recreate", manifestaudit.Quote(string(t)))
	}
	return nil
}

// main is the worker container (the one container; -1 when there is not
// exactly one).
func (s *subject) main() *corev1.Container {
	p := s.pod()
	if p == nil || len(p.Containers) != 1 {
		return nil
	}
	return &p.Containers[0]
}

func checkPVC(s *subject) []Finding {
	p := s.pod()
	if p == nil {
		return nil
	}
	var idx []int
	for i, v := range p.Volumes {
		if v.PersistentVolumeClaim != nil {
			idx = append(idx, i)
		}
	}
	if len(idx) != 1 {
		return s.at(podPath+".volumes", "exactly one persistentVolumeClaim volume", fmt.Sprint(len(idx)))
	}
	v := p.Volumes[idx[0]]
	path := fmt.Sprintf("%s.volumes[%d]", podPath, idx[0])
	var out []Finding
	if v.PersistentVolumeClaim.ReadOnly {
		out = append(out, manifestaudit.At(s.depU, path+".persistentVolumeClaim.readOnly", "false", "true"))
	}
	claim := v.PersistentVolumeClaim.ClaimName
	var pvc *unstructured.Unstructured
	for _, o := range s.objs {
		if o.GetKind() == "PersistentVolumeClaim" && o.GetAPIVersion() == "v1" && o.GetName() == claim {
			pvc = o
		}
	}
	if pvc == nil {
		out = append(out, manifestaudit.At(s.depU, path+".persistentVolumeClaim.claimName", "a PersistentVolumeClaim of the release", manifestaudit.Quote(claim)))
	} else {
		modes, _, _ := unstructured.NestedStringSlice(pvc.Object, "spec", "accessModes")
		if !slices.Equal(modes, []string{"ReadWriteOnce"}) {
			out = append(out, manifestaudit.At(pvc, "spec.accessModes", "[ReadWriteOnce]", fmt.Sprint(modes)))
		}
	}
	if c := s.main(); c != nil {
		i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == v.Name })
		if i < 0 || c.VolumeMounts[i].ReadOnly {
			out = append(out, manifestaudit.At(s.depU, podPath+".containers[0].volumeMounts", "the state claim "+manifestaudit.Quote(v.Name)+" mounted read-write", "not mounted read-write"))
		}
	}
	return out
}

// projected returns the indexes of projected volumes.
func (s *subject) projected() []int {
	var idx []int
	for i, v := range s.pod().Volumes {
		if v.Projected != nil {
			idx = append(idx, i)
		}
	}
	return idx
}

func itemKeys(items []corev1.KeyToPath) []string {
	var k []string
	for _, it := range items {
		k = append(k, it.Key)
	}
	sort.Strings(k)
	return k
}

func checkProjected(s *subject) []Finding {
	p := s.pod()
	if p == nil {
		return nil
	}
	var out []Finding
	for i, v := range p.Volumes {
		if v.Secret != nil {
			out = append(out, manifestaudit.At(s.depU, fmt.Sprintf("%s.volumes[%d].secret", podPath, i), "no Secret volume (the two Secrets come through the one projected volume)", manifestaudit.Quote(v.Secret.SecretName)))
		}
	}
	idx := s.projected()
	if len(idx) != 1 {
		return append(out, manifestaudit.At(s.depU, podPath+".volumes", "exactly one projected volume", fmt.Sprint(len(idx))))
	}
	path := fmt.Sprintf("%s.volumes[%d].projected.sources", podPath, idx[0])
	seen := map[string][]string{}
	for j, src := range p.Volumes[idx[0]].Projected.Sources {
		if src.Secret == nil {
			continue
		}
		name := src.Secret.Name
		if name != delivery.IdentitySecret && name != delivery.SecretName {
			out = append(out, manifestaudit.At(s.depU, fmt.Sprintf("%s[%d].secret.name", path, j), manifestaudit.Quote(delivery.IdentitySecret)+" or "+manifestaudit.Quote(delivery.SecretName), manifestaudit.Quote(name)))
			continue
		}
		if _, dup := seen[name]; dup {
			out = append(out, manifestaudit.At(s.depU, fmt.Sprintf("%s[%d].secret.name", path, j), "each Secret once", manifestaudit.Quote(name)+" twice"))
		}
		seen[name] = itemKeys(src.Secret.Items)
		if src.Secret.Optional != nil && *src.Secret.Optional {
			out = append(out, manifestaudit.At(s.depU, fmt.Sprintf("%s[%d].secret.optional", path, j), "false", "true"))
		}
	}
	if k, ok := seen[delivery.IdentitySecret]; !ok || !slices.Equal(k, identityKeys) {
		out = append(out, manifestaudit.At(s.depU, path, "Secret "+delivery.IdentitySecret+" with items ca.crt, tls.crt, tls.key", fmt.Sprint(k)))
	}
	if k, ok := seen[delivery.SecretName]; !ok || !slices.Equal(k, []string{delivery.SecretKey}) {
		out = append(out, manifestaudit.At(s.depU, path, "Secret "+delivery.SecretName+" with the one item "+delivery.SecretKey, fmt.Sprint(k)))
	}
	return out
}

func checkSeparation(s *subject) []Finding {
	var out []Finding
	for _, o := range s.objs {
		if o.GetKind() != "Secret" || o.GetAPIVersion() != "v1" {
			continue
		}
		keys := secretKeys(o)
		switch {
		case o.GetName() == delivery.SecretName:
			out = append(out, manifestaudit.At(o, "", "no "+delivery.SecretName+" in the release (kubectl ql3 worker publish creates it)", "rendered"))
		case slices.Contains(keys, delivery.SecretKey):
			out = append(out, manifestaudit.At(o, "data", "no "+delivery.SecretKey+" outside "+delivery.SecretName, "present"))
		}
		if o.GetName() == delivery.IdentitySecret && !slices.Equal(keys, identityKeys) {
			out = append(out, manifestaudit.At(o, "data", "exactly ca.crt, tls.crt, tls.key", fmt.Sprint(keys)))
		}
	}
	return out
}

// secretKeys are the sorted, distinct data and stringData keys of a Secret.
func secretKeys(o *unstructured.Unstructured) []string {
	var keys []string
	for _, f := range []string{"data", "stringData"} {
		m, _, _ := unstructured.NestedMap(o.Object, f)
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

func checkPrivateCopy(s *subject) []Finding {
	p := s.pod()
	if p == nil {
		return nil
	}
	var out []Finding
	var mem []int
	for i, v := range p.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory {
			mem = append(mem, i)
		}
	}
	if len(mem) != 1 {
		return s.at(podPath+".volumes", "exactly one emptyDir with medium Memory", fmt.Sprint(len(mem)))
	}
	priv := p.Volumes[mem[0]]
	max := resource.NewQuantity(MaxPrivateBytes, resource.BinarySI)
	if l := priv.EmptyDir.SizeLimit; l == nil || l.Cmp(*max) > 0 {
		found := "<unset>"
		if l != nil {
			found = l.String()
		}
		out = append(out, manifestaudit.At(s.depU, fmt.Sprintf("%s.volumes[%d].emptyDir.sizeLimit", podPath, mem[0]), "at most 4Mi", found))
	}
	proj := ""
	if idx := s.projected(); len(idx) == 1 {
		proj = p.Volumes[idx[0]].Name
	}
	mounts := func(c corev1.Container, name string) (bool, bool) {
		for _, m := range c.VolumeMounts {
			if m.Name == name {
				return true, m.ReadOnly
			}
		}
		return false, false
	}
	if len(p.InitContainers) != 1 {
		out = append(out, manifestaudit.At(s.depU, podPath+".initContainers", "exactly one initContainer (the private copy)", fmt.Sprint(len(p.InitContainers))))
	} else {
		ic := p.InitContainers[0]
		if ok, ro := mounts(ic, proj); proj == "" || !ok || !ro {
			out = append(out, manifestaudit.At(s.depU, podPath+".initContainers[0].volumeMounts", "the projected volume mounted read-only", "not mounted read-only"))
		}
		if ok, _ := mounts(ic, priv.Name); !ok {
			out = append(out, manifestaudit.At(s.depU, podPath+".initContainers[0].volumeMounts", "the private emptyDir "+manifestaudit.Quote(priv.Name), "not mounted"))
		}
	}
	if c := s.main(); c != nil {
		if ok, _ := mounts(*c, priv.Name); !ok {
			out = append(out, manifestaudit.At(s.depU, podPath+".containers[0].volumeMounts", "the private emptyDir "+manifestaudit.Quote(priv.Name), "not mounted"))
		}
		if ok, _ := mounts(*c, proj); proj != "" && ok {
			out = append(out, manifestaudit.At(s.depU, podPath+".containers[0].volumeMounts", "no mount of the projected volume (the worker reads its private copy)", manifestaudit.Quote(proj)))
		}
	}
	return out
}

func checkIdentityGeneration(s *subject) []Finding {
	if s.dep == nil {
		return nil
	}
	v, ok := s.dep.Spec.Template.Annotations[delivery.AnnotationIdentityGeneration]
	path := "spec.template.metadata.annotations." + delivery.AnnotationIdentityGeneration
	switch {
	case !ok || v == "":
		return s.at(path, "an identity generation", "<unset>")
	case s.mode != Base && v == delivery.IdentityPlaceholder:
		return s.at(path, "the generation the private overlay sets", manifestaudit.Quote(v))
	}
	return nil
}

func checkAutomount(s *subject) []Finding {
	p := s.pod()
	if p == nil {
		return nil
	}
	if a := p.AutomountServiceAccountToken; a == nil || *a {
		found := "<unset>"
		if a != nil {
			found = "true"
		}
		return s.at(podPath+".automountServiceAccountToken", "false", found)
	}
	return nil
}

func checkTokenProjection(s *subject) []Finding {
	p := s.pod()
	if p == nil {
		return nil
	}
	var out []Finding
	for i, v := range p.Volumes {
		if v.Projected == nil {
			continue
		}
		for j, src := range v.Projected.Sources {
			if src.ServiceAccountToken != nil {
				out = append(out, manifestaudit.At(s.depU, fmt.Sprintf("%s.volumes[%d].projected.sources[%d].serviceAccountToken", podPath, i, j), "none", "a ServiceAccount token"))
			}
		}
	}
	return out
}

func checkPorts(s *subject) []Finding {
	p := s.pod()
	if p == nil {
		return nil
	}
	var out []Finding
	for _, g := range []struct {
		f  string
		cs []corev1.Container
	}{{"initContainers", p.InitContainers}, {"containers", p.Containers}} {
		for i, c := range g.cs {
			if len(c.Ports) > 0 {
				out = append(out, manifestaudit.At(s.depU, fmt.Sprintf("%s.%s[%d].ports", podPath, g.f, i), "no port", fmt.Sprint(len(c.Ports))))
			}
		}
	}
	return out
}

func checkSidecars(s *subject) []Finding {
	p := s.pod()
	if p == nil {
		return nil
	}
	var out []Finding
	if len(p.Containers) != 1 {
		out = append(out, manifestaudit.At(s.depU, podPath+".containers", "exactly one container", fmt.Sprint(len(p.Containers))))
	}
	for i, c := range p.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			out = append(out, manifestaudit.At(s.depU, fmt.Sprintf("%s.initContainers[%d].restartPolicy", podPath, i), "unset (a run-to-completion copy)", "Always (a sidecar)"))
		}
	}
	if len(p.EphemeralContainers) > 0 {
		out = append(out, manifestaudit.At(s.depU, podPath+".ephemeralContainers", "none", fmt.Sprint(len(p.EphemeralContainers))))
	}
	return out
}

func checkProbes(s *subject) []Finding {
	p := s.pod()
	if p == nil {
		return nil
	}
	var out []Finding
	for i, c := range p.Containers {
		for _, pr := range []struct {
			f string
			p *corev1.Probe
		}{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}, {"startupProbe", c.StartupProbe}} {
			if pr.p != nil {
				out = append(out, manifestaudit.At(s.depU, fmt.Sprintf("%s.containers[%d].%s", podPath, i, pr.f), "none (Ready is not domain recovery)", "set"))
			}
		}
	}
	return out
}

func checkCredentialAnnotations(s *subject) []Finding {
	if s.dep == nil {
		return nil
	}
	var out []Finding
	for _, where := range []struct {
		path string
		ann  map[string]string
	}{{"metadata.annotations", s.dep.Annotations}, {"spec.template.metadata.annotations", s.dep.Spec.Template.Annotations}} {
		var set []string
		for _, k := range delivery.Annotations {
			if _, ok := where.ann[k]; ok {
				set = append(set, k)
			}
		}
		live := s.mode == Live && where.path == "spec.template.metadata.annotations"
		switch {
		case live && (len(set) == 0 || len(set) == len(delivery.Annotations)):
		case live:
			out = append(out, manifestaudit.At(s.depU, where.path, "all five credential annotations or none", strings.Join(set, ", ")))
		case len(set) > 0:
			out = append(out, manifestaudit.At(s.depU, where.path, "none of the credential annotations (kubectl ql3 worker publish sets them)", strings.Join(set, ", ")))
		}
	}
	return out
}
