#!/usr/bin/env bash
# Installs what the test node (internal/testcluster, Options.Node) runs
# besides the kubelet and kube-scheduler that hack/controlplane.sh builds:
# Debian's containerd, runc and CNI plugins, each only if missing. Needs
# root when one is missing (CI runs a clean clone as root).
# Usage: hack/node-packages.sh
set -euo pipefail
pkgs="containerd runc containernetworking-plugins"
missing=
for p in $pkgs; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing="$missing $p"
  fi
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "the test node needs the Debian packages:$missing (apt-get install as root)" >&2
  exit 1
fi
echo "installing the test node's packages:$missing" >&2
# shellcheck disable=SC2086 # one package per word
if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing; then
  apt-get update
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
fi
