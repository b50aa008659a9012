#!/usr/bin/env bash
# make demo: start a local control plane, then run the whole ceremony on the
# bundled example release through the built plugin, exactly as an operator
# would: lock -> head -> preflight -> apply (install), an upgrade (shown
# first with diff), a second upgrade and a rollback, then an offline receipt
# audit, the status and the history. Stops the control plane on every exit
# path.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$root/bin:$PATH"
kubectl="$root/bin/controlplane/kubectl"
work=$(mktemp -d "${TMPDIR:-/tmp}/ql3-demo.XXXXXX")
export KUBECONFIG="$work/kubeconfig"
ns=ql3-demo

pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
run() { say "$*"; "$@"; }
# head_token sets $token to the expected-Head token for the next preflight,
# read as a script reads it: with kubectl's jsonpath output.
head_token() {
  say "token=\$(kubectl-ql3 head -n $ns -o jsonpath='{.expectedHead}')"
  token=$(kubectl-ql3 head -n "$ns" -o jsonpath='{.expectedHead}')
  echo "$token"
}

echo "starting a local control plane (etcd, kube-apiserver, kube-controller-manager v1.37.2)..."
(cd "$root" && go build -o "$work/devcluster" ./hack/devcluster)
"$work/devcluster" --kubeconfig "$KUBECONFIG" --ready-file "$work/ready" 2>"$work/devcluster.log" &
pid=$!
for _ in $(seq 1 600); do
  [ -f "$work/ready" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/devcluster.log"; exit 1; }
  sleep 0.2
done
[ -f "$work/ready" ] || { echo "control plane not ready"; cat "$work/devcluster.log"; exit 1; }

# The releases as an operator's repository would hold them: one directory
# per version; receipts go to one directory so they form one chain.
for v in v3.0.0 v3.1.0 v3.1.1; do cp -r "$root/testdata/releases/$v" "$work/$v"; done
receipts="$work/receipts"

run kubectl-ql3 version
# The Head lives in the control namespace: it exists before the first deployment.
run "$kubectl" create namespace "$ns"

run kubectl-ql3 lock "$work/v3.0.0" --version 3.0.0
run kubectl-ql3 render "$work/v3.0.0"
run kubectl-ql3 head -n "$ns"
head_token
run kubectl-ql3 preflight "$work/v3.0.0" --transition install --expected-head "$token" --out "$work/install.json"
run kubectl-ql3 apply --preflight "$work/install.json" --receipts-dir "$receipts"
run kubectl-ql3 head -n "$ns"

for step in "v3.1.0 3.1.0" "v3.1.1 3.1.1"; do
  set -- $step
  run kubectl-ql3 lock "$work/$1" --version "$2"
  # What the upgrade will change, before it is prepared.
  run kubectl-ql3 diff "$work/$1"
  head_token
  run kubectl-ql3 preflight "$work/$1" --transition upgrade --expected-head "$token" --out "$work/upgrade-$2.json"
  run kubectl-ql3 apply --preflight "$work/upgrade-$2.json" --receipts-dir "$receipts"
done

# Roll back to the exact previous deployment, from its release directory.
head_token
run kubectl-ql3 rollback "$work/v3.1.0" --expected-head "$token" --out "$work/rollback.json" --receipts-dir "$receipts"
run kubectl-ql3 head -n "$ns"

# Offline: no cluster is needed to check what was deployed.
run ls "$receipts"
run kubectl-ql3 receipt audit "$receipts" --release "$work/v3.1.0"
# The operator's daily views: what the cluster holds against the Head, and
# what happened over time.
run kubectl-ql3 status -n "$ns" --release "$work/v3.1.0"
run kubectl-ql3 history "$receipts" -n "$ns"
echo
echo "demo done: 4 deployments, 4 receipts in one verified chain; stopping the control plane"
