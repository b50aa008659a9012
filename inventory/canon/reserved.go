package canon

// Names reserved for the Head (docs/head.md): no release may define them,
// so no deployment can overwrite the record of what is deployed.
const (
	// HeadName is the name of the Head ConfigMap in the control namespace.
	// A release may contain no ConfigMap of this name, in any namespace.
	HeadName = "qinglong3-deployment-head"
	// HeadFieldManager is the server-side field manager of the Head's own
	// writes. A lock's tool.fieldManager may never be it.
	HeadFieldManager = "kubectl-ql3-head"
)

// IsHead reports whether id names a ConfigMap called HeadName, in any
// namespace and under any apiVersion of the core group.
func IsHead(id Identity) bool {
	k := id.Key()
	return k.Group == "" && k.Kind == "ConfigMap" && k.Name == HeadName
}
