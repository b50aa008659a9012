#!/usr/bin/env bash
# Prints the replace block for testdata/controlplane/kube/go.mod: every staging
# module that k8s.io/kubernetes replaces with ./staging/... is pointed at its
# published version instead. Usage: hack/controlplane-replaces.sh v1.37.2
set -euo pipefail
v=${1:?kubernetes version, e.g. v1.37.2}
staging=v0.${v#v1.}
mod=$(go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
echo "replace ("
grep -E '=> \./staging/' "$mod" | awk -v s="$staging" '{print "\t" $1 " => " $1 " " s}'
echo ")"
