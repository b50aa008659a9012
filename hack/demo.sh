#!/usr/bin/env bash
# make demo: start a local control plane, then run the whole ceremony on the
# bundled example release through the built plugin, exactly as an operator
# would: lock -> head -> preflight -> apply (install), an upgrade (shown
# first with diff), a second upgrade and a rollback, an upgrade under the
# two-person rule (policy, roles, propose, approve), then an offline receipt
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

# The two-person rule: a cluster admin installs the admission policy once and
# grants the printed roles; alice deploys and proposes, bob approves (here the
# admin impersonates them with --as; the API server authenticates them as
# "alice" and "bob" either way, and the policy checks those names).
grant() { say "kubectl-ql3 $* | kubectl apply -f -"; kubectl-ql3 "$@" | "$kubectl" apply -f -; }
grant approval policy
policies_at=$(date +%s)
grant rbac "$work/v3.1.1" -n "$ns" --bind-user alice
grant rbac --role executor-approval -n "$ns" --bind-user alice
grant rbac --role proposer -n "$ns" --bind-user alice
grant rbac --role approver -n "$ns" --bind-user bob
# Until the API server enforces the policy, a forged approval (proposed in
# another user's name) would be admitted: wait until a dry-run of one is denied.
cat >"$work/forged.yaml" <<YAML
apiVersion: v1
kind: ConfigMap
metadata:
  name: qinglong3-deployment-approval
  namespace: $ns
  labels: {app.kubernetes.io/managed-by: kubectl-ql3, qinglong.io/approval-schema: deployment-approval-v1}
data: {schema: qinglong/deployment-approval@v1, preflightDigest: "sha256:$(printf '0%.0s' $(seq 64))", commandDigest: "sha256:$(printf '0%.0s' $(seq 64))", expectedHead: ql3h1-0-none, proposer: mallory, decision: pending, approver: "", reason: ""}
YAML
say "kubectl --as alice create -f forged.yaml --dry-run=server   # until the policy denies it"
for i in $(seq 1 150); do
  if ! out=$("$kubectl" --as alice create -f "$work/forged.yaml" --dry-run=server 2>&1) && grep -q "denied request" <<<"$out"; then
    echo "$out"; break
  fi
  [ "$i" = 150 ] && { echo "the approval policy is not enforced after 30s: $out"; exit 1; }
  sleep 0.2
done
# An approval counts only if created at least 5 s after the policies last
# changed (docs/approval.md §4): let the clock pass that mark (this host's
# clock is the API server's).
while [ "$(date +%s)" -le $((policies_at + 6)) ]; do sleep 0.2; done
head_token
run kubectl-ql3 --as alice preflight "$work/v3.1.1" --transition upgrade --expected-head "$token" --approval two-person --out "$work/approved-3.1.1.json"
say "kubectl-ql3 --as alice apply --preflight $work/approved-3.1.1.json --receipts-dir $receipts   # refused: not approved yet"
code=0
kubectl-ql3 --as alice apply --preflight "$work/approved-3.1.1.json" --receipts-dir "$receipts" 2>"$work/refused" || code=$?
cat "$work/refused"
if [ "$code" != 2 ] || ! grep -q "needs a second person's approval" "$work/refused"; then
  echo "apply without an approval: exit $code, want 2 (refused, not approved)"; exit 1
fi
run kubectl-ql3 --as alice propose --preflight "$work/approved-3.1.1.json"
# bob checks that the release he reviewed is the one proposed, and sees what
# it changes against the deployed 3.1.0, before approving.
run kubectl-ql3 --as bob approve --preflight "$work/approved-3.1.1.json" --release "$work/v3.1.1" --deployed "$work/v3.1.0" --reason "reviewed the diff"
run kubectl-ql3 --as alice apply --preflight "$work/approved-3.1.1.json" --receipts-dir "$receipts"

# Offline: no cluster is needed to check what was deployed.
run ls "$receipts"
run kubectl-ql3 receipt audit "$receipts" --release "$work/v3.1.1"
# The operator's daily views: what the cluster holds against the Head, and
# what happened over time.
run kubectl-ql3 status -n "$ns" --release "$work/v3.1.1"
run kubectl-ql3 history "$receipts" -n "$ns"
echo
echo "demo done: 5 deployments (the last one proposed by alice, approved by bob), 5 receipts in one verified chain; stopping the control plane"
