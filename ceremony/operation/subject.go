package operation

import (
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/qinglong/kubectl-ql3/internal/manifestaudit"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// podPath is where a Deployment keeps its pod spec.
const podPath = "spec.template.spec"

// ManagementContainer is the container the environment rules read when the
// pod has more than one.
const ManagementContainer = "management"

// subject is the rendered operation, decoded once for every rule.
type subject struct {
	mode Mode
	rel  *inventory.Release
	repo *repo

	// deployments and workloads are every Deployment and every other
	// pod-bearing object of the render.
	deployments []*unstructured.Unstructured
	workloads   []*unstructured.Unstructured
	// dep is the management Deployment when there is exactly one, decoded;
	// depU is it as rendered. Both nil otherwise.
	dep  *appsv1.Deployment
	depU *unstructured.Unstructured
	// mgmt is the index of the management container in dep's pod, -1 if
	// none can be told.
	mgmt int
	// decodeErr is a Deployment that could not be decoded.
	decodeErr error

	byKind map[string][]*unstructured.Unstructured // by "group/Kind"
}

func newSubject(rel *inventory.Release, mode Mode) *subject {
	s := &subject{mode: mode, rel: rel, mgmt: -1, byKind: map[string][]*unstructured.Unstructured{}}
	for _, o := range rel.Objects {
		gk := o.GroupVersionKind().GroupKind()
		key := gk.Group + "/" + gk.Kind
		s.byKind[key] = append(s.byKind[key], o)
		switch {
		case key == "apps/Deployment":
			s.deployments = append(s.deployments, o)
		case manifestaudit.Workload(o):
			s.workloads = append(s.workloads, o)
		}
	}
	if len(s.deployments) == 1 {
		d := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(s.deployments[0].Object, d); err != nil {
			s.decodeErr = err
			return s
		}
		s.dep, s.depU = d, s.deployments[0]
		cs := d.Spec.Template.Spec.Containers
		if len(cs) == 1 {
			s.mgmt = 0
		} else {
			s.mgmt = slices.IndexFunc(cs, func(c corev1.Container) bool { return c.Name == ManagementContainer })
		}
	}
	return s
}

// shape is the availability shape: development for one replica.
func (s *subject) shape() Shape {
	switch {
	case s.dep == nil:
		return Unknown
	case s.dep.Spec.Replicas == nil || *s.dep.Spec.Replicas == 1:
		return Development // unset means one replica
	}
	return Production
}

// pod is the management pod spec; nil without a single Deployment.
func (s *subject) pod() *corev1.PodSpec {
	if s.dep == nil {
		return nil
	}
	return &s.dep.Spec.Template.Spec
}

// container is the management container and its path; nil if none.
func (s *subject) container() (*corev1.Container, string) {
	if s.dep == nil || s.mgmt < 0 {
		return nil, ""
	}
	return &s.dep.Spec.Template.Spec.Containers[s.mgmt], fmt.Sprintf("%s.containers[%d]", podPath, s.mgmt)
}

// containerRef is one container of the management pod and its path.
type containerRef struct {
	c    *corev1.Container
	path string
}

// containers are the pod's init containers and containers (ephemeral
// containers are not part of a Deployment's template).
func (s *subject) containers() []containerRef {
	p := s.pod()
	if p == nil {
		return nil
	}
	var out []containerRef
	for i := range p.InitContainers {
		out = append(out, containerRef{&p.InitContainers[i], fmt.Sprintf("%s.initContainers[%d]", podPath, i)})
	}
	for i := range p.Containers {
		out = append(out, containerRef{&p.Containers[i], fmt.Sprintf("%s.containers[%d]", podPath, i)})
	}
	return out
}

// podLabels are the labels of the management pod template.
func (s *subject) podLabels() labels.Set {
	if s.dep == nil {
		return nil
	}
	return labels.Set(s.dep.Spec.Template.Labels)
}

// objects of a kind ("group/Kind") in the Deployment's namespace.
func (s *subject) sameNamespace(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range s.byKind[kind] {
		if s.depU != nil && o.GetNamespace() == s.depU.GetNamespace() {
			out = append(out, o)
		}
	}
	return out
}

// selects reports whether sel selects the management pod. A nil or invalid
// selector selects nothing; an empty one selects everything.
func (s *subject) selects(sel *metav1.LabelSelector) bool {
	if sel == nil {
		return false
	}
	ls, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	return ls.Matches(s.podLabels())
}

// decoded is an object decoded into its typed form.
type decoded[T any] struct {
	u   *unstructured.Unstructured
	obj *T
}

// decodeAll decodes objs into T, reporting undecodable ones as findings.
func decodeAll[T any](objs []*unstructured.Unstructured, bad *[]Finding) []decoded[T] {
	var out []decoded[T]
	for _, o := range objs {
		v := new(T)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, v); err != nil {
			*bad = append(*bad, manifestaudit.At(o, "", "an object the API server accepts", err.Error()))
			continue
		}
		out = append(out, decoded[T]{o, v})
	}
	return out
}

// services, pdbs and policies selecting the management pod.
func (s *subject) services(bad *[]Finding) []decoded[corev1.Service] {
	var out []decoded[corev1.Service]
	for _, d := range decodeAll[corev1.Service](s.sameNamespace("/Service"), bad) {
		if len(d.obj.Spec.Selector) > 0 && labels.SelectorFromSet(d.obj.Spec.Selector).Matches(s.podLabels()) {
			out = append(out, d)
		}
	}
	return out
}

func (s *subject) pdbs(bad *[]Finding) []decoded[policyv1.PodDisruptionBudget] {
	var out []decoded[policyv1.PodDisruptionBudget]
	for _, d := range decodeAll[policyv1.PodDisruptionBudget](s.sameNamespace("policy/PodDisruptionBudget"), bad) {
		if s.selects(d.obj.Spec.Selector) {
			out = append(out, d)
		}
	}
	return out
}

func (s *subject) policies(bad *[]Finding) []decoded[networkingv1.NetworkPolicy] {
	var out []decoded[networkingv1.NetworkPolicy]
	for _, d := range decodeAll[networkingv1.NetworkPolicy](s.sameNamespace("networking.k8s.io/NetworkPolicy"), bad) {
		if s.selects(&d.obj.Spec.PodSelector) {
			out = append(out, d)
		}
	}
	return out
}

// env is the management container's environment by name; the last entry
// of a name wins, as in the kubelet.
type envVar struct {
	v    corev1.EnvVar
	path string
}

func (s *subject) env() map[string]envVar {
	c, cp := s.container()
	if c == nil {
		return nil
	}
	m := map[string]envVar{}
	for i, e := range c.Env {
		m[e.Name] = envVar{e, fmt.Sprintf("%s.env[%d]", cp, i)}
	}
	return m
}

// secretVolume finds the pod volume projecting Secret name, its index, and
// the management container's mounts of it.
type secretMount struct {
	vol     *corev1.Volume
	volPath string
	mounts  []mountRef
}

type mountRef struct {
	m    *corev1.VolumeMount
	path string
}

func (s *subject) secretVolumes(name string) []secretMount {
	p := s.pod()
	if p == nil {
		return nil
	}
	var out []secretMount
	for i := range p.Volumes {
		v := &p.Volumes[i]
		if v.Secret == nil || v.Secret.SecretName != name {
			continue
		}
		sm := secretMount{vol: v, volPath: fmt.Sprintf("%s.volumes[%d]", podPath, i)}
		for _, cr := range s.containers() {
			for j := range cr.c.VolumeMounts {
				if cr.c.VolumeMounts[j].Name == v.Name {
					sm.mounts = append(sm.mounts, mountRef{&cr.c.VolumeMounts[j], fmt.Sprintf("%s.volumeMounts[%d]", cr.path, j)})
				}
			}
		}
		out = append(out, sm)
	}
	return out
}
