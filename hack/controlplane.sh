#!/usr/bin/env bash
# Builds the test control plane (etcd, kube-apiserver, kube-controller-manager,
# kubectl) and the test node's kubelet and kube-scheduler from the Go module
# proxy into bin/controlplane, unless the binaries there were built from the
# same pinned modules and Go version. The node's Debian packages (containerd,
# runc, CNI plugins) are hack/node-packages.sh's.
# Usage: hack/controlplane.sh [OUTDIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/bin/controlplane}
src=$root/testdata/controlplane
kube_version=v1.37.2

# kubectl is the benchmarks' peer: built as Kubernetes releases it (static,
# no cgo), as kubectl-ql3 is built as it is released (Makefile: build).
kubectl_env="CGO_ENABLED=0"
stamp=$( { go version; echo "$kubectl_env"; cat "$src/kube/go.mod" "$src/kube/go.sum" "$src/etcd/go.mod" "$src/etcd/go.sum" "$src/etcd/main.go"; } | sha256sum | cut -c1-64)
kube_cmds="kube-apiserver kube-controller-manager kubectl kubelet kube-scheduler"
built=yes
for b in etcd $kube_cmds; do [ -x "$out/$b" ] || built=no; done
if [ "$built" = yes ] && [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ]; then
  exit 0
fi

echo "building the test control plane ($kube_version) into $out; a cold build takes ~4-8 minutes" >&2
mkdir -p "$out"
rm -f "$out/.stamp"
minor=${kube_version#v1.}; minor=${minor%%.*}
ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld="$ld -X $p.gitVersion=$kube_version -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done
export GOFLAGS=-mod=readonly
pkgs=; for b in $kube_cmds; do [ "$b" = kubectl ] || pkgs="$pkgs k8s.io/kubernetes/cmd/$b"; done
# shellcheck disable=SC2086 # one package path per word
(cd "$src/kube" && go build -trimpath -ldflags "$ld" -o "$out/" $pkgs)
(cd "$src/kube" && env $kubectl_env go build -trimpath -ldflags "$ld" -o "$out/kubectl" k8s.io/kubernetes/cmd/kubectl)
(cd "$src/etcd" && go build -trimpath -ldflags "-s -w" -o "$out/etcd" .)
echo "$stamp" > "$out/.stamp"
"$out/kube-apiserver" --version >&2
