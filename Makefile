# kubectl-ql3. Every target works from a clean clone: tools and the test
# control plane are built from the Go module proxy into bin/.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c

VERSION  ?= v0.1.0-dev
LDFLAGS  := -X github.com/qinglong/kubectl-ql3/plugin.version=$(VERSION)
BIN      := $(CURDIR)/bin
CP_DIR   := $(BIN)/controlplane
TOOLS    := $(BIN)/tools
PLUGIN   := $(BIN)/kubectl-ql3
export QL3_CONTROLPLANE_DIR := $(CP_DIR)
export PATH := $(BIN):$(PATH)

# Pinned tool versions (built into bin/tools, never taken from PATH).
GORELEASER_VERSION := v2.15.1
KREW_VERSION       := v0.4.3
# cosign checks the receipts' in-toto attestations in the tests (receipts/interop).
COSIGN_VERSION     := v3.1.3
# The peers `make bench` measures the ceremony against (issue #8); helm is
# also the reference of the Helm render parity test (internal/helmchart), and
# its version is the Helm SDK's in go.mod.
HELM_VERSION       := v4.3.2
# kapp v0.64.2 is pinned in hack/bench/peers/kapp/go.mod.

FUZZTIME   ?= 60s
# Without a bound, minimising a new crasher stalls for minutes on a 2-core
# machine: cap it at 200 runs.
FUZZMINIMIZETIME ?= 200x
RELIABILITY_FLAGS ?=
TEST_FLAGS ?=
BENCH_N    ?= 100,1000,3000
BENCH_RUNS ?= 3
BENCH_SCALE_N ?= 10000
# Upgrades per contender of the node benchmark: its rollouts, paced by a
# 1-second readiness probe, vary by a second; over 60 upgrades the interval
# of the median ratio it prints was ±4-7% (docs/performance.md).
BENCH_NODE_RUNS ?= 60
# The peers of the main benchmark; empty leaves one out. A peer that cannot
# do the job (Helm's release Secret cannot hold 10,000 objects) is recorded
# as failed, with its error, and the run goes on (docs/performance.md).
BENCH_HELM ?= $(TOOLS)/helm
BENCH_KAPP ?= $(TOOLS)/kapp

.PHONY: all build test unit controlplane node demo bench bench-peers lint tools dist clean fuzz reliability

all: build

# The plugin is built as it is released (.goreleaser.yaml): no cgo, no
# symbol table or DWARF. A cgo build links the plugin package (through
# kustomize), which exports every symbol: 105 MB, not 58, and ~20 MiB more
# resident on every run, which the benchmarks would count.
build: ## build the plugin into bin/kubectl-ql3, as the release builds it
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $(PLUGIN) ./cmd/kubectl-ql3

controlplane: ## build etcd, kube-apiserver, kube-controller-manager, kubectl, kubelet and kube-scheduler for tests
	hack/controlplane.sh $(CP_DIR)

node: controlplane ## the test node's Debian packages (containerd, runc, CNI plugins), installed if missing (needs root then)
	hack/node-packages.sh

test: build controlplane node tools ## every test: unit, real-cluster (race detector on), fuzz seeds, release and krew install
	go vet ./...
	go vet -tags ql3crash ./internal/crashpoint/
	go test -race -count=1 -timeout 20m $(TEST_FLAGS) ./...
	go test -count=1 -tags ql3crash ./internal/crashpoint/

unit: ## the tests that need no cluster
	go test -count=1 ./internal/fail/ ./inventory/ ./receipts/

demo: build controlplane ## lock -> preflight -> apply -> receipt audit against a local control plane
	hack/demo.sh

bench: build controlplane node bench-peers ## the ceremony vs kubectl apply --server-side, Helm, kapp (without and with waiting until Current) and a raw SSA loop, and Go benchmarks; writes bench.json (docs/performance.md)
	go test -p 1 -run '^$$' -bench . -benchmem ./inventory/ ./internal/helmchart/ ./receipts/ ./ceremony/deploy/
	go run ./hack/bench -n $(BENCH_N) -runs $(BENCH_RUNS) -plugin $(PLUGIN) -kubectl $(CP_DIR)/kubectl \
	  -helm "$(BENCH_HELM)" -kapp "$(BENCH_KAPP)" -out bench.json -table bench.md
	go run ./hack/bench fleet -plugin $(PLUGIN) -out bench-fleet.json -table bench-fleet.md
	go run ./hack/bench node -runs $(BENCH_NODE_RUNS) -plugin $(PLUGIN) -kubectl $(CP_DIR)/kubectl -out bench-node.json
	go run ./hack/bench chart -plugin $(PLUGIN) -helm $(TOOLS)/helm -out bench-chart.json
	go run ./hack/bench scale -n $(BENCH_SCALE_N) -plugin $(PLUGIN) -kubectl $(CP_DIR)/kubectl -out bench-scale.json

bench-peers: ## helm and kapp, pinned, into bin/tools (only make bench needs them)
	GOBIN=$(TOOLS) go install helm.sh/helm/v4/cmd/helm@$(HELM_VERSION)
	cd hack/bench/peers/kapp && go build -trimpath -o $(TOOLS)/kapp .

# The campaign's binary carries the crash hook (build tag ql3crash,
# internal/crashpoint); the plugin users get never does.
CRASH_PLUGIN := $(BIN)/kubectl-ql3-crashpoints

reliability: controlplane ## the fault campaign (docs/reliability.md): prints the table, writes reliability.json
	go build -trimpath -tags ql3crash -ldflags "$(LDFLAGS)" -o $(CRASH_PLUGIN) ./cmd/kubectl-ql3
	go run ./hack/reliability -bin $(CRASH_PLUGIN) -json reliability.json $(RELIABILITY_FLAGS)

fuzz: ## every Fuzz target for FUZZTIME each; a crasher is kept in <pkg>/testdata/fuzz/<Fuzz>/: commit it, `go test` replays it
	@failed=0; for pkg in $$(go list ./...); do \
	  for f in $$(go test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; \
	    go test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $$pkg || failed=1; \
	  done; \
	done; \
	new=$$(git status --porcelain --untracked-files=all -- '*testdata/fuzz/*' 2>/dev/null || true); \
	if [ -n "$$new" ]; then echo "new fuzz crashers (commit them: go test replays each as a regression test):"; echo "$$new"; fi; \
	exit $$failed

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...

tools: ## pinned tools into bin/tools: goreleaser, krew, validate-krew-manifest, cosign, helm (the Helm render parity test's reference)
	GOBIN=$(TOOLS) go install github.com/goreleaser/goreleaser/v2@$(GORELEASER_VERSION)
	GOBIN=$(TOOLS) go install sigs.k8s.io/krew/cmd/krew@$(KREW_VERSION) sigs.k8s.io/krew/cmd/validate-krew-manifest@$(KREW_VERSION)
	GOBIN=$(TOOLS) go install github.com/sigstore/cosign/v3/cmd/cosign@$(COSIGN_VERSION)
	GOBIN=$(TOOLS) go install helm.sh/helm/v4/cmd/helm@$(HELM_VERSION)

dist: tools ## snapshot release into dist/: every archive, checksums.txt, the Krew manifest
	$(TOOLS)/goreleaser release --snapshot --clean

clean:
	rm -rf $(BIN) dist
