package inventory

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// builtinScopes is whether each built-in Kubernetes kind is namespaced: the
// offline answer when no RESTMapper is at hand.
var builtinScopes = map[schema.GroupKind]bool{
	// Cluster-scoped.
	{Group: "", Kind: "Namespace"}:                                                    false,
	{Group: "", Kind: "Node"}:                                                         false,
	{Group: "", Kind: "PersistentVolume"}:                                             false,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 false,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             false,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         false,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  false,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               false,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                   false,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                      false,
	{Group: "storage.k8s.io", Kind: "CSINode"}:                                        false,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:                               false,
	{Group: "storage.k8s.io", Kind: "VolumeAttributesClass"}:                          false,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   false,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     false,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        false,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: false,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}:          false,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"}:   false,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                false,
	{Group: "networking.k8s.io", Kind: "IPAddress"}:                                   false,
	{Group: "networking.k8s.io", Kind: "ServiceCIDR"}:                                 false,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                      false,
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}:                 false,
	{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle"}:                        false,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                       false,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}:       false,
	{Group: "resource.k8s.io", Kind: "DeviceClass"}:                                   false,
	{Group: "resource.k8s.io", Kind: "ResourceSlice"}:                                 false,
	{Group: "", Kind: "ConfigMap"}:                                                    true,
	{Group: "", Kind: "Secret"}:                                                       true,
	{Group: "", Kind: "Service"}:                                                      true,
	{Group: "", Kind: "ServiceAccount"}:                                               true,
	{Group: "", Kind: "Pod"}:                                                          true,
	{Group: "", Kind: "PodTemplate"}:                                                  true,
	{Group: "", Kind: "ReplicationController"}:                                        true,
	{Group: "", Kind: "PersistentVolumeClaim"}:                                        true,
	{Group: "", Kind: "Endpoints"}:                                                    true,
	{Group: "", Kind: "LimitRange"}:                                                   true,
	{Group: "", Kind: "ResourceQuota"}:                                                true,
	{Group: "apps", Kind: "Deployment"}:                                               true,
	{Group: "apps", Kind: "StatefulSet"}:                                              true,
	{Group: "apps", Kind: "DaemonSet"}:                                                true,
	{Group: "apps", Kind: "ReplicaSet"}:                                               true,
	{Group: "apps", Kind: "ControllerRevision"}:                                       true,
	{Group: "batch", Kind: "Job"}:                                                     true,
	{Group: "batch", Kind: "CronJob"}:                                                 true,
	{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}:                           true,
	{Group: "policy", Kind: "PodDisruptionBudget"}:                                    true,
	{Group: "networking.k8s.io", Kind: "NetworkPolicy"}:                               true,
	{Group: "networking.k8s.io", Kind: "Ingress"}:                                     true,
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}:                                true,
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}:                         true,
	{Group: "coordination.k8s.io", Kind: "Lease"}:                                     true,
	{Group: "discovery.k8s.io", Kind: "EndpointSlice"}:                                true,
	{Group: "storage.k8s.io", Kind: "CSIStorageCapacity"}:                             true,
	{Group: "resource.k8s.io", Kind: "ResourceClaim"}:                                 true,
	{Group: "resource.k8s.io", Kind: "ResourceClaimTemplate"}:                         true,
}

var crdGroupKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// scoper answers whether a kind is namespaced: from the RESTMapper when
// there is one, else from the built-in table; kinds neither knows fall back
// to the CustomResourceDefinitions of the render.
type scoper struct {
	mapper meta.RESTMapper
	crds   map[schema.GroupKind]bool
}

func newScoper(m meta.RESTMapper) *scoper {
	return &scoper{mapper: m, crds: map[schema.GroupKind]bool{}}
}

// addCRD records the scope a CustomResourceDefinition declares.
func (s *scoper) addCRD(id Identity, u *unstructured.Unstructured) error {
	if id.GroupKind() != crdGroupKind {
		return nil
	}
	group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
	scope, _, _ := unstructured.NestedString(u.Object, "spec", "scope")
	if group == "" || kind == "" {
		return fmt.Errorf("object %q: spec.group and spec.names.kind are required", id.String())
	}
	switch scope {
	case "Namespaced":
		s.crds[schema.GroupKind{Group: group, Kind: kind}] = true
	case "Cluster":
		s.crds[schema.GroupKind{Group: group, Kind: kind}] = false
	default:
		return fmt.Errorf("object %q: spec.scope %q is neither \"Namespaced\" nor \"Cluster\"", id.String(), scope)
	}
	return nil
}

// namespaced reports whether id's kind is namespaced. An unknown kind is
// fail.Invalid; a mapper that could not answer is fail.Unavailable.
func (s *scoper) namespaced(id Identity) (bool, error) {
	gvk := schema.FromAPIVersionAndKind(id.APIVersion, id.Kind)
	gk := gvk.GroupKind()
	if s.mapper != nil {
		m, err := s.mapper.RESTMapping(gk, gvk.Version)
		switch {
		case err == nil:
			return m.Scope.Name() == meta.RESTScopeNameNamespace, nil
		case !meta.IsNoMatchError(err):
			return false, fail.Errorf(fail.Unavailable, "scope of %q: %w", id.String(), err)
		}
		if ns, ok := s.crds[gk]; ok {
			return ns, nil
		}
		return false, fail.Errorf(fail.Invalid, "object %q: kind %q of %q is not served by the cluster and no CustomResourceDefinition in the release defines it", id.String(), id.Kind, id.APIVersion)
	}
	if ns, ok := builtinScopes[gk]; ok {
		return ns, nil
	}
	if ns, ok := s.crds[gk]; ok {
		return ns, nil
	}
	return false, fail.Errorf(fail.Invalid, "object %q: kind %q of %q is unknown offline and no CustomResourceDefinition in the release defines it; pass --context to resolve its scope from the cluster", id.String(), id.Kind, id.APIVersion)
}
