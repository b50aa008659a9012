package operation

// The image rules: every image pinned by digest, and the admin image
// placeholder.

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qinglong/kubectl-ql3/internal/manifestaudit"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// imageRef is a container image of the render and where it is.
type imageRef struct {
	u     *unstructured.Unstructured
	path  string
	image string
}

// images are the container images of every workload of the render.
func (s *subject) images() []imageRef {
	var out []imageRef
	for _, o := range slices.Concat(s.deployments, s.workloads) {
		base := []string{"spec", "template", "spec"}
		switch o.GetKind() {
		case "Pod":
			base = []string{"spec"}
		case "CronJob":
			base = []string{"spec", "jobTemplate", "spec", "template", "spec"}
		}
		for _, field := range []string{"initContainers", "containers", "ephemeralContainers"} {
			list, _, _ := unstructured.NestedSlice(o.Object, append(slices.Clone(base), field)...)
			for i, c := range list {
				m, _ := c.(map[string]any)
				img, _ := m["image"].(string)
				out = append(out, imageRef{o, fmt.Sprintf("%s.%s[%d].image", strings.Join(base, "."), field, i), img})
			}
		}
		out = append(out, volumeImages(o, base)...)
	}
	return out
}

// volumeImages are o's image volumes (volumes[].image.reference under
// the pod spec at base): OCI images mounted into the pod, pinned like a
// container's.
func volumeImages(o *unstructured.Unstructured, base []string) []imageRef {
	var out []imageRef
	list, _, _ := unstructured.NestedSlice(o.Object, append(slices.Clone(base), "volumes")...)
	for i, v := range list {
		m, _ := v.(map[string]any)
		img, ok := m["image"].(map[string]any)
		if !ok {
			continue
		}
		ref, _ := img["reference"].(string)
		out = append(out, imageRef{o, fmt.Sprintf("%s.volumes[%d].image.reference", strings.Join(base, "."), i), ref})
	}
	return out
}

func checkImageDigest(s *subject) []Finding {
	var out []Finding
	for _, r := range s.images() {
		if !inventory.IsPinnedImage(r.image) {
			out = append(out, manifestaudit.At(r.u, r.path, "name[:tag]@sha256:<64 lowercase hex>", manifestaudit.Quote(r.image)))
		}
	}
	return out
}

func isPlaceholder(image string) bool { return strings.HasSuffix(image, "@"+PlaceholderDigest) }

func checkPlaceholder(s *subject) []Finding {
	var out []Finding
	if s.mode == Deployable {
		for _, r := range s.images() {
			if isPlaceholder(r.image) {
				out = append(out, manifestaudit.At(r.u, r.path, "a released image digest (not the all-zero placeholder)", manifestaudit.Quote(r.image)))
			}
		}
		return out
	}
	c, cp := s.container()
	if c == nil || !inventory.IsPinnedImage(c.Image) {
		return nil // image-digest reports an unpinned image
	}
	if !isPlaceholder(c.Image) {
		out = append(out, manifestaudit.At(s.depU, cp+".image", "the admin image with the all-zero placeholder digest "+PlaceholderDigest, manifestaudit.Quote(c.Image)))
	}
	return out
}
