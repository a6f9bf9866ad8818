# Everything a developer and CI run goes through this file. Tools are built from
# source through the Go module proxy and cached under bin/, keyed by version.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

KUBE_VERSION        ?= v1.36.3
CONTROLLER_TOOLS    ?= v0.21.0
GOLANGCI_LINT       ?= v2.15.0
KUSTOMIZE_VERSION   ?= v5.8.0
# The Cluster API core manager the extension's end-to-end tests run; pinned by hack/capi/go.mod.
CAPI_VERSION        := $(shell awk '$$1 == "sigs.k8s.io/cluster-api" {print $$2}' hack/capi/go.mod)

BIN       := $(CURDIR)/bin
# The Go modules of this repository: the product, the local management cluster
# (tools/localcluster) and the end-to-end tests that use both (test/e2e).
MODULES   := . tools/localcluster tools/metricscheck test/e2e
KUBE_BIN  := $(BIN)/kube/$(KUBE_VERSION)
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_TOOLS)
GOLANGCI       := $(BIN)/golangci-lint-$(GOLANGCI_LINT)
KUSTOMIZE      := $(BIN)/kustomize-$(KUSTOMIZE_VERSION)
CAPI_MANAGER   := $(BIN)/capi/$(CAPI_VERSION)/manager
LOCALCLUSTER   := $(BIN)/localcluster
# Where the local management cluster keeps its state and logs (outside the
# repository: it holds container filesystems).
E2E_DIR        ?= /var/lib/hostedcp-e2e
# What the local management cluster needs from Debian.
HOST_PACKAGES  := containerd runc containernetworking-plugins iptables conntrack ipset iproute2 xfsprogs
# What the conformance suite's test images carry from Debian, and what
# unpacks BusyBox's source (built from Debian's source archive into bin/);
# nginx is downloaded, not installed.
CONFORMANCE_PACKAGES := bzip2 xz-utils bind9-dnsutils curl netcat-openbsd
# Which conformance tests make conformance runs: full (all but serial and
# disruptive), long (serial too) or ci (a subset); CONFORMANCE_SIGS narrows
# them to some SIGs (e.g. network,storage) to split a run into parts.
CONFORMANCE ?= full
CONFORMANCE_SIGS ?=
# A regular expression that narrows a full or long run to the tests whose
# names match it (e.g. to run the failures of the last run again).
CONFORMANCE_FOCUS ?=
# Which conformance tests make test-e2e (and so make test) runs beside the other
# end-to-end tests: the ci subset by default, none when empty. The suite is
# built before them, after the images, whose Kubernetes packages it shares.
E2E_CONFORMANCE ?= ci

KUBE_MINOR := $(word 2,$(subst ., ,$(KUBE_VERSION)))
KUBE_LDFLAGS := -s -w \
	-X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=$(KUBE_MINOR)

# envtest reads its binaries from here (kube-apiserver, etcd); the extension's
# end-to-end tests also run the Cluster API manager.
export KUBEBUILDER_ASSETS := $(KUBE_BIN)
export CAPI_MANAGER
export VERSITYGW

.PHONY: help
help: ## Show the targets.
	@grep -hE '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-16s %s\n", $$1, $$2}'

##@ Build

.PHONY: build
build: ## Build the controller, extension, tunnel and etcd-restore binaries into bin/.
	go build -o $(BIN)/ ./cmd/controller ./cmd/extension ./cmd/tunnel ./cmd/etcd-restore

.PHONY: images
images: ## Build every binary and image of the local management cluster into bin/ (what is missing; ours always).
	cd tools/localcluster && go run ./cmd/images

.PHONY: manifests
manifests: $(KUSTOMIZE) ## Render the install bundle into dist/control-plane-components.yaml.
	mkdir -p dist
	$(KUSTOMIZE) build config/default > dist/control-plane-components.yaml
	@echo "wrote dist/control-plane-components.yaml"

.PHONY: release
release: $(KUSTOMIZE) ## Write release VERSION (such as v0.2.0) into dist/control-plane-hosted-control-plane/VERSION: clusterctl's bundle and metadata, the images as OCI archives, pinned by digest.
	@[ -n "$(VERSION)" ] || { echo "usage: make release VERSION=v0.2.0"; exit 2; }
	cd tools/localcluster && go run ./cmd/release -version $(VERSION) -out $(CURDIR)/dist -kustomize $(KUSTOMIZE)

# CLUSTERCTL_BASE is main as it was before upgrades of the controller held
# rendering changes back (the parent of 161f1f0), which make test-clusterctl
# releases as its first release. That tree had no make release: release-base
# gives it this repository's metadata.yaml and hack/release-base as its
# config/release, and releases it with this repository's tool; everything else
# (binaries, CRDs, RBAC, webhooks, config/default) is that tree's own.
CLUSTERCTL_BASE ?= ce7577d
BASE_SRC := $(CURDIR)/dist/.base-$(CLUSTERCTL_BASE)

.PHONY: release-base
release-base: $(KUSTOMIZE) ## Write release VERSION of the tree at CLUSTERCTL_BASE (git archive) into dist/control-plane-hosted-control-plane/VERSION, as make release does.
	@[ -n "$(VERSION)" ] || { echo "usage: make release-base VERSION=v0.1.0"; exit 2; }
	rm -rf $(BASE_SRC) && mkdir -p $(BASE_SRC)/config/release
	git archive $(CLUSTERCTL_BASE) | tar -x -C $(BASE_SRC)
	cp hack/release-base/kustomization.yaml $(BASE_SRC)/config/release/ && cp metadata.yaml $(BASE_SRC)/
	cd tools/localcluster && go run ./cmd/release -version $(VERSION) -source $(BASE_SRC) -out $(CURDIR)/dist -kustomize $(KUSTOMIZE)

.PHONY: up
up: host-packages $(KUSTOMIZE) manifests ## Quickstart: build what is missing, start the local management cluster, install the provider, create a hosted cluster (GATEWAY=1: served through the Gateway).
	cd tools/localcluster && go build -o $(LOCALCLUSTER) ./cmd/localcluster
	KUSTOMIZE=$(KUSTOMIZE) $(LOCALCLUSTER) up -dir $(E2E_DIR) $(if $(filter-out 0,$(GATEWAY)),-gateway)

.PHONY: down
down: ## Tear down what make up started.
	cd tools/localcluster && go build -o $(LOCALCLUSTER) ./cmd/localcluster
	$(LOCALCLUSTER) down -dir $(E2E_DIR)

.PHONY: dev
dev: kube-binaries ## Start a local API server with the CRDs, the controller and the samples (Ctrl-C stops).
	go run ./test/envtest/devenv

##@ Generate and check

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate deepcopy code, CRDs, RBAC and webhook manifests.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=manager-role webhook paths=./internal/... paths=./cmd/... \
		output:rbac:artifacts:config=config/rbac output:webhook:artifacts:config=config/webhook

.PHONY: verify-generate
verify-generate: generate ## Fail when generated files are stale.
	@if [ -n "$$(git status --porcelain -- api config)" ]; then \
		echo "generated files are stale; run 'make generate' and commit:"; git status --porcelain -- api config; git diff -- api config | head -50; exit 1; fi

.PHONY: lint
lint: $(GOLANGCI) ## Run go vet and golangci-lint (gofumpt included) over every module.
	for m in $(MODULES); do (cd $$m && go vet ./... && $(GOLANGCI) run ./...); done

##@ Test

.PHONY: test
test: verify-generate lint manifests unit envtest test-e2e ## Everything CI runs, then the time of each test and package.
	@hack/test-times.sh $(BIN)/unit.log $(BIN)/unit-localcluster.log $(BIN)/unit-metricscheck.log $(BIN)/envtest.log $(BIN)/envtest-serial.log $(BIN)/e2e-harness.log $(BIN)/e2e.log

.PHONY: unit
unit: clusterctl conformance-packages $(KUSTOMIZE) ## Unit tests (no API server), the local management cluster's and the release's (with clusterctl) included.
	go test -v ./api/... ./internal/... ./cmd/... ./test/slots/... 2>&1 | tee $(BIN)/unit.log | grep -E '^(--- FAIL|ok|FAIL|panic)' || (grep -E -B25 -- '--- FAIL|^panic:' $(BIN)/unit.log | head -200; exit 1)
	cd tools/localcluster && CLUSTERCTL=$(CLUSTERCTL) KUSTOMIZE=$(KUSTOMIZE) go test -v ./... 2>&1 | tee $(BIN)/unit-localcluster.log | grep -E '^(--- FAIL|ok|FAIL|panic)' || (grep -E -B25 -- '--- FAIL|^panic:' $(BIN)/unit-localcluster.log | head -200; exit 1)
	cd tools/metricscheck && go test -v ./... 2>&1 | tee $(BIN)/unit-metricscheck.log | grep -E '^(--- FAIL|ok|FAIL|panic)' || (grep -E -B25 -- '--- FAIL|^panic:' $(BIN)/unit-metricscheck.log | head -200; exit 1)

.PHONY: envtest
envtest: kube-binaries capi-manager versitygw manifests ## Tests against a real kube-apiserver and etcd built from source.
	hack/envtest.sh $(BIN)

.PHONY: test-e2e
test-e2e: host-packages $(KUSTOMIZE) versitygw manifests images $(if $(E2E_CONFORMANCE),conformance-images) ## End-to-end tests in a local management cluster (root; builds every image from source).
	cd tools/localcluster && E2E=1 go test -count=1 ./cluster/ ./images/ -v -timeout 30m 2>&1 | tee $(BIN)/e2e-harness.log | grep -E '^(--- |ok|FAIL|panic)' || (tail -100 $(BIN)/e2e-harness.log; exit 1)
	cd test/e2e && E2E=1 CONFORMANCE=$(E2E_CONFORMANCE) E2E_DIR=$(E2E_DIR) KUSTOMIZE=$(KUSTOMIZE) go test -count=1 . -v -parallel 64 -timeout 80m 2>&1 | tee $(BIN)/e2e.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic|e2e:|local cluster:|images:|[0-9]+ passed)|_test.go' || ($(CURDIR)/hack/failures.sh $(BIN)/e2e.log 100; exit 1)

# Releases TestClusterctl installs and upgrades between (the oldest and the newest).
CLUSTERCTL_RELEASES ?= v0.1.0 v0.2.0

.PHONY: test-clusterctl
test-clusterctl: host-packages $(KUSTOMIZE) versitygw manifests images clusterctl ## Install, upgrade and delete the provider with a real clusterctl in a local management cluster, from a local repository of CLUSTERCTL_RELEASES (root; not run by CI).
	$(MAKE) release-base VERSION=$(firstword $(CLUSTERCTL_RELEASES))
	for v in $(wordlist 2,$(words $(CLUSTERCTL_RELEASES)),$(CLUSTERCTL_RELEASES)); do $(MAKE) release VERSION=$$v || exit 1; done
	cd test/e2e && E2E=1 E2E_DIR=$(E2E_DIR) KUSTOMIZE=$(KUSTOMIZE) VERSITYGW=$(VERSITYGW) E2E_CLUSTERCTL=$(CLUSTERCTL) E2E_CLUSTERCTL_REPOSITORY=$(CURDIR)/dist \
		go test -count=1 . -run '^TestClusterctl$$' -v -timeout 60m 2>&1 | tee $(BIN)/e2e-clusterctl.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic|e2e:)|_test.go' || (tail -150 $(BIN)/e2e-clusterctl.log; exit 1)

# install-missing installs the Debian packages $(1) that are not installed.
define install-missing
	@missing=$$(for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then echo "installing $$missing"; apt-get update -qq; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi
endef

.PHONY: host-packages
host-packages: ## Install what the local management cluster needs from Debian, when missing.
	$(call install-missing,$(HOST_PACKAGES))

.PHONY: conformance-packages
conformance-packages: ## Install what the conformance suite's test images carry from Debian, when missing.
	$(call install-missing,$(CONFORMANCE_PACKAGES))

.PHONY: conformance-images
conformance-images: conformance-packages ## Build the Kubernetes conformance suite (e2e.test) and its test images into bin/; list the images it names that none provides.
	cd tools/localcluster && go run ./cmd/images -conformance

.PHONY: conformance
conformance: host-packages conformance-packages $(KUSTOMIZE) versitygw manifests images ## Run the Kubernetes conformance suite against a hosted cluster with two workers (CONFORMANCE=full|long|ci; hours for full; not run by CI).
	cd test/e2e && E2E=1 CONFORMANCE=$(CONFORMANCE) CONFORMANCE_SIGS=$(CONFORMANCE_SIGS) CONFORMANCE_FOCUS='$(CONFORMANCE_FOCUS)' E2E_DIR=$(E2E_DIR) KUSTOMIZE=$(KUSTOMIZE) go test -count=1 . -run '^TestConformance$$' -v -timeout 8h 2>&1 | tee $(BIN)/conformance.log | grep -E '^(--- |PASS|FAIL|ok|panic|e2e:|[0-9]+ passed)|conformance_test.go' || (tail -150 $(BIN)/conformance.log; exit 1)

.PHONY: bench
bench: kube-binaries versitygw host-packages $(KUSTOMIZE) manifests ## Print performance figures as BENCH lines (not run by CI): controller, extension hooks, hosted control planes end to end.
	go test ./test/envtest/bench -run '^$$' -bench . -benchtime 1x -timeout 120m 2>&1 | tee $(BIN)/bench.log | grep -E '^(BENCH|ok|FAIL|---)'
	go test -count=1 ./test/envtest/extension -run '^$$' -bench 'GeneratePatches|EtcdGate' -benchtime 300x 2>&1 | tee $(BIN)/bench-extension.log | grep -E '^(BENCH|ok|FAIL|---)'
	go test -count=1 ./test/envtest/extension -run '^$$' -bench Backup -benchtime 1x 2>&1 | tee $(BIN)/bench-backup.log | grep -E '^(BENCH|ok|FAIL|---)'
	go test -count=1 ./test/envtest -run '^$$' -bench Idle -benchtime 1x -timeout 30m 2>&1 | tee $(BIN)/bench-idle.log | grep -E '^(BENCH|ok|FAIL|---)'
	cd test/e2e && E2E=1 E2E_DIR=$(E2E_DIR) KUSTOMIZE=$(KUSTOMIZE) go test -count=1 . -run '^$$' -bench . -benchtime 1x -timeout 120m 2>&1 | tee $(BIN)/bench-e2e.log | grep -E '^(BENCH|ok|FAIL|---|timeline of)|^  [a-z]'

##@ Tools (built from source, cached in bin/)

.PHONY: kube-binaries
kube-binaries: $(KUBE_BIN)/kube-apiserver $(KUBE_BIN)/etcd $(KUBE_BIN)/kubectl ## Build kube-apiserver, etcd and kubectl.

$(KUBE_BIN)/kube-apiserver $(KUBE_BIN)/etcd $(KUBE_BIN)/kubectl &:
	mkdir -p $(KUBE_BIN)
	cd hack/kube && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags '$(KUBE_LDFLAGS)' -o $(KUBE_BIN)/ \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl ./etcd

TRAEFIK_VERSION := $(shell awk '$$1 == "github.com/traefik/traefik/v3" {print $$2}' hack/traefik/go.mod)
TRAEFIK         := $(BIN)/traefik/$(TRAEFIK_VERSION)/traefik

.PHONY: traefik
traefik: $(TRAEFIK) ## Build Traefik, the Gateway API implementation pinned for gateway mode (hack/traefik; no test runs it yet).

$(TRAEFIK):
	mkdir -p $(dir $@)
	cd hack/traefik && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w -X github.com/traefik/traefik/v3/pkg/version.Version=$(TRAEFIK_VERSION)' \
		-o $@ github.com/traefik/traefik/v3/cmd/traefik

.PHONY: capi-manager
capi-manager: $(CAPI_MANAGER) ## Build the Cluster API core manager (sigs.k8s.io/cluster-api/core).

$(CAPI_MANAGER):
	mkdir -p $(dir $@)
	cd hack/capi && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w -X sigs.k8s.io/cluster-api/version.gitVersion=$(CAPI_VERSION)' \
		-o $@ sigs.k8s.io/cluster-api/core

CLUSTERCTL := $(BIN)/capi/$(CAPI_VERSION)/clusterctl
CLUSTERCTL_LDFLAGS := -s -w -X sigs.k8s.io/cluster-api/version.gitVersion=$(CAPI_VERSION) \
	-X sigs.k8s.io/cluster-api/version.gitMajor=1 -X sigs.k8s.io/cluster-api/version.gitMinor=$(word 2,$(subst ., ,$(CAPI_VERSION)))

.PHONY: clusterctl
clusterctl: $(CLUSTERCTL) ## Build clusterctl (sigs.k8s.io/cluster-api/cmd/clusterctl) at the Cluster API version hack/capi pins.

# hack/clusterctl requires the same Cluster API release as hack/capi; the
# version is stamped as Cluster API's release builds stamp it.
$(CLUSTERCTL):
	mkdir -p $(dir $@)
	cd hack/clusterctl && grep -q 'sigs.k8s.io/cluster-api $(CAPI_VERSION)' go.mod
	cd hack/clusterctl && CGO_ENABLED=0 go build -trimpath -ldflags '$(CLUSTERCTL_LDFLAGS)' -o $@ sigs.k8s.io/cluster-api/cmd/clusterctl

VERSITYGW_VERSION := $(shell awk '$$1 == "github.com/versity/versitygw" {print $$2}' hack/versitygw/go.mod)
VERSITYGW         := $(BIN)/versitygw/$(VERSITYGW_VERSION)/versitygw

.PHONY: versitygw
versitygw: $(VERSITYGW) ## Build versitygw, the S3-compatible server the backup tests run (hack/versitygw).

$(VERSITYGW):
	mkdir -p $(dir $@)
	cd hack/versitygw && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o $@ github.com/versity/versitygw/cmd/versitygw

$(CONTROLLER_GEN):
	GOBIN=$(BIN)/.gobin go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS)
	mv $(BIN)/.gobin/controller-gen $@

$(GOLANGCI):
	GOBIN=$(BIN)/.gobin go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT)
	mv $(BIN)/.gobin/golangci-lint $@

$(KUSTOMIZE):
	GOBIN=$(BIN)/.gobin go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	mv $(BIN)/.gobin/kustomize $@
