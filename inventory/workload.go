package inventory

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// RoleLabel marks a workload with its role in the release.
const RoleLabel = "qinglong.io/role"

// The production role surface.
const (
	RoleAdmin     = "admin"
	RoleControl   = "control"
	RoleControlAI = "control-ai"
	RoleWorker    = "worker"
)

// ProductionRoles is the role surface every lock binds, sorted bytewise.
func ProductionRoles() []string { return []string{RoleAdmin, RoleControl, RoleControlAI, RoleWorker} }

// workloadKinds are the pod-bearing kinds a role label may name.
var workloadKinds = map[schema.GroupKind]bool{
	{Group: "", Kind: "Pod"}:                   true,
	{Group: "", Kind: "ReplicationController"}: true,
	{Group: "apps", Kind: "Deployment"}:        true,
	{Group: "apps", Kind: "StatefulSet"}:       true,
	{Group: "apps", Kind: "DaemonSet"}:         true,
	{Group: "apps", Kind: "ReplicaSet"}:        true,
	{Group: "batch", Kind: "Job"}:              true,
	{Group: "batch", Kind: "CronJob"}:          true,
}

func isWorkload(gk schema.GroupKind) bool { return workloadKinds[gk] }

// CheckRoles checks the release's role surface against roles: each role
// matches at least one workload, and no workload carries a role outside it.
func (r *Release) CheckRoles(roles []string) error {
	var missing, extra []string
	for _, role := range roles {
		if len(r.Roles[role]) == 0 {
			missing = append(missing, role)
		}
	}
	for role, ids := range r.Roles {
		if !slices.Contains(roles, role) {
			for _, id := range ids {
				extra = append(extra, fmt.Sprintf("%s (%s=%s)", id, RoleLabel, role))
			}
		}
	}
	slices.Sort(extra)
	switch {
	case len(missing) > 0 && len(extra) > 0:
		return fmt.Errorf("no workload is labelled %s=<role> for roles %q, and workloads %q carry roles outside %q", RoleLabel, missing, extra, roles)
	case len(missing) > 0:
		return fmt.Errorf("no workload is labelled %s=<role> for roles %q", RoleLabel, missing)
	case len(extra) > 0:
		return fmt.Errorf("workloads %q carry roles outside %q", extra, roles)
	}
	return nil
}

// pinnedImageRE is an image reference pinned by digest: the distribution
// reference grammar's name (optional registry host and port, lowercase path
// components), an optional tag, and "@sha256:" with 64 lowercase hex digits.
var pinnedImageRE = regexp.MustCompile(`^` +
	`(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?/)?` +
	`[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*` +
	`(?::[\w][\w.-]{0,127})?` +
	`@sha256:[0-9a-f]{64}$`)

// IsPinnedImage reports whether image names its content by a sha256 digest.
func IsPinnedImage(image string) bool { return pinnedImageRE.MatchString(image) }

// podSpecPath is where an object of a given kind keeps its pod spec; any
// other object's pod template is looked for at spec.template.spec.
func podSpecPath(gk schema.GroupKind) []string {
	switch gk {
	case schema.GroupKind{Kind: "Pod"}:
		return []string{"spec"}
	case schema.GroupKind{Kind: "PodTemplate"}:
		return []string{"template", "spec"}
	case schema.GroupKind{Group: "batch", Kind: "CronJob"}:
		return []string{"spec", "jobTemplate", "spec", "template", "spec"}
	}
	return []string{"spec", "template", "spec"}
}

// podImages returns the pinned images of every container, init container
// and ephemeral container in u's pod spec, and an error for each that is
// missing or (unless unpinnedOK) not pinned by digest; where(image) names
// the files holding an unpinned image.
func podImages(id Identity, u *unstructured.Unstructured, unpinnedOK bool, where func(string) string) ([]string, []error) {
	path := podSpecPath(id.GroupKind())
	spec, found, err := unstructured.NestedMap(u.Object, path...)
	if err != nil || !found {
		if isWorkload(id.GroupKind()) {
			return nil, []error{fmt.Errorf("object %q has no pod spec at %s", id.String(), dotted(path))}
		}
		return nil, nil
	}
	var images []string
	var errs []error
	for _, field := range []string{"initContainers", "containers", "ephemeralContainers"} {
		raw, ok := spec[field]
		if !ok || raw == nil {
			continue
		}
		list, ok := raw.([]any)
		if !ok {
			errs = append(errs, fmt.Errorf("object %q: %s.%s must be a list", id.String(), dotted(path), field))
			continue
		}
		for i, item := range list {
			c, ok := item.(map[string]any)
			if !ok {
				errs = append(errs, fmt.Errorf("object %q: %s.%s[%d] must be a map", id.String(), dotted(path), field, i))
				continue
			}
			name, _ := c["name"].(string)
			image, ok := c["image"].(string)
			switch {
			case !ok || image == "":
				errs = append(errs, fmt.Errorf("object %q: %s %q has no image", id.String(), containerWord(field), name))
			case !IsPinnedImage(image):
				if unpinnedOK {
					continue
				}
				errs = append(errs, fmt.Errorf("object %q: %s %q: image %q is not pinned by digest; use name[:tag]@sha256:<64 lowercase hex>%s", id.String(), containerWord(field), name, image, where(image)))
			default:
				images = append(images, image)
			}
		}
	}
	vi, verrs := volumeImages(id, spec, path, unpinnedOK, where)
	return append(images, vi...), append(errs, verrs...)
}

// volumeImages is podImages for the pod spec's image volumes
// (volumes[].image.reference): an OCI image mounted into the pod is
// content the lock must bind like a container's image.
func volumeImages(id Identity, spec map[string]any, path []string, unpinnedOK bool, where func(string) string) ([]string, []error) {
	list, _ := spec["volumes"].([]any)
	var images []string
	var errs []error
	for _, item := range list {
		v, _ := item.(map[string]any)
		img, ok := v["image"].(map[string]any)
		if !ok {
			continue
		}
		name, _ := v["name"].(string)
		ref, _ := img["reference"].(string)
		switch {
		case ref == "":
			errs = append(errs, fmt.Errorf("object %q: %s.volumes: image volume %q has no reference", id.String(), dotted(path), name))
		case !IsPinnedImage(ref):
			if !unpinnedOK {
				errs = append(errs, fmt.Errorf("object %q: image volume %q: image %q is not pinned by digest; use name[:tag]@sha256:<64 lowercase hex>%s", id.String(), name, ref, where(ref)))
			}
		default:
			images = append(images, ref)
		}
	}
	return images, errs
}

func containerWord(field string) string {
	switch field {
	case "initContainers":
		return "init container"
	case "ephemeralContainers":
		return "ephemeral container"
	}
	return "container"
}

func dotted(path []string) string { return strings.Join(path, ".") }
