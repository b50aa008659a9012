package plugin

import (
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// restConfig resolves the kubeconfig flags into a client configuration.
func restConfig(flags *genericclioptions.ConfigFlags) (*rest.Config, error) {
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "kubeconfig: %w", err)
	}
	return cfg, nil
}

// namespace is the target namespace: -n, or the kubeconfig context's.
// A kubeconfig that cannot be read or has no such context is invalid
// input.
func namespace(flags *genericclioptions.ConfigFlags) (string, error) {
	ns, _, err := flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fail.Errorf(fail.Invalid, "kubeconfig: %w", err)
	}
	return ns, nil
}

// clientset is the typed client of the kubeconfig flags.
func clientset(flags *genericclioptions.ConfigFlags) (*kubernetes.Clientset, error) {
	cfg, err := restConfig(flags)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "kubeconfig: %w", err)
	}
	return cs, nil
}

// readSecretKey reads the key for the keyed digest of Secret values
// (readKeyFile). The key is used in memory only and never written anywhere.
func readSecretKey(path string) ([]byte, error) {
	return readKeyFile("--secret-digest-key-file", path, inventory.MinSecretDigestKeyLen)
}
