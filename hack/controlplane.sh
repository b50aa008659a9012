#!/usr/bin/env bash
# Builds the test control plane (etcd, kube-apiserver, kube-controller-manager,
# kubectl) from the Go module proxy into bin/controlplane, unless the binaries
# there were built from the same pinned modules and Go version.
# Usage: hack/controlplane.sh [OUTDIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/bin/controlplane}
src=$root/testdata/controlplane
kube_version=v1.37.2

stamp=$( { go version; cat "$src/kube/go.mod" "$src/kube/go.sum" "$src/etcd/go.mod" "$src/etcd/go.sum" "$src/etcd/main.go"; } | sha256sum | cut -c1-64)
if [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ] &&
   [ -x "$out/etcd" ] && [ -x "$out/kube-apiserver" ] && [ -x "$out/kube-controller-manager" ] && [ -x "$out/kubectl" ]; then
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
(cd "$src/kube" && go build -trimpath -ldflags "$ld" -o "$out/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl)
(cd "$src/etcd" && go build -trimpath -ldflags "-s -w" -o "$out/etcd" .)
echo "$stamp" > "$out/.stamp"
"$out/kube-apiserver" --version >&2
