package stagelayout

import (
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// FuzzParseManifest: an intact manifest blob is either refused as a
// conflict or yields a package stage of one config, one lock layer and
// one bundle layer of the documented media types.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.qinglong.plugin-package.stage.v1+json","digest":"sha256:5edd4ac0693b9bf5f1afeac5e6f69781ddffc2a7036bf6e3bd6f0d14b548bc3d","size":50},"layers":[{"mediaType":"application/vnd.qinglong.plugin-package.lock.v1+json","digest":"sha256:6650db96bdd49dee69dc01e00a9f82cc3ed2b901c44b0db0ccef3163836dd80f","size":45},{"mediaType":"application/vnd.qinglong.plugin-package.bundle.v1.tar+gzip","digest":"sha256:ecc34bbd567f452938f79ec1460492b0d29f3335223fb54b0e1f60d2502ce59a","size":42}]}`))
	f.Add([]byte(`{"schemaVersion":2}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseManifest("sha256:x", data)
		if err == nil {
			var config, lock, bundle Descriptor
			config, lock, bundle, err = packageParts("sha256:x", m)
			if err == nil {
				if config.MediaType != MediaTypeStageConfig || lock.MediaType != MediaTypeLock || bundle.MediaType != MediaTypeBundle || len(m.Layers) != 2 {
					t.Fatalf("accepted %s", data)
				}
				return
			}
		}
		if !fail.Is(err, fail.Conflict) {
			t.Fatalf("class %v: %v", fail.ClassOf(err), err)
		}
	})
}
