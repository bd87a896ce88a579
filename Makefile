# helm-app-operator — the targets a user and a developer need.
# `make demo` and `make test` are the two commands the README starts with.

IMG ?= quay.io/helmapp/helm-app-operator:0.1.0
VERSION ?= 0.1.0
GO ?= go
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

# The local control plane (kube-apiserver, etcd, kubectl, ...) is built from
# pinned Go modules by hack/controlplane-bins.sh and cached outside the checkout
# (~/.cache/helm-app-operator). The first build takes minutes; later runs reuse it.
ASSETS = $(shell hack/controlplane-bins.sh | tail -n 1)
KUBECTL ?= $(ASSETS)/kubectl

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  %-16s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: fmt
fmt: ## Run gofmt on the code.
	gofmt -l -w $$(git ls-files '*.go' | grep -v '^tools/')

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet ./...

.PHONY: manifests
manifests: ## Generate the CRDs in config/crd/bases from watches.yaml and the charts' values.schema.json.
	$(GO) run ./hack/gencrd --watches watches.yaml --out config/crd/bases

# `make chart CHART=oci://ghcr.io/org/charts/app CHART_VERSION=1.2.3 KIND=App`:
# CHART is a chart directory, a .tgz, oci://HOST/REPO/NAME or a chart
# repository URL (then CHART_NAME too); PLAIN_HTTP=1 for an OCI registry
# without TLS. See docs/your-chart.md.
CHART ?=
CHART_NAME ?=
CHART_VERSION ?=
KIND ?=
GROUP ?=
API_VERSION ?=

.PHONY: chart
chart: ## Add a Helm chart as a kind, or update a kind's chart: CHART=dir|file.tgz|oci://...|URL KIND=K [GROUP=g] [API_VERSION=v1alpha1] [CHART_NAME=n] [CHART_VERSION=v] [CRDS=operator|bundle].
	$(GO) run ./hack/chart add --chart "$(CHART)" --kind "$(KIND)" \
		$(if $(GROUP),--group "$(GROUP)") $(if $(API_VERSION),--api-version "$(API_VERSION)") $(if $(CHART_NAME),--name "$(CHART_NAME)") $(if $(CHART_VERSION),--chart-version "$(CHART_VERSION)") \
		$(if $(PLAIN_HTTP),--plain-http) $(if $(CRDS),--crds "$(CRDS)")

.PHONY: chart-remove
chart-remove: ## Remove a kind added with make chart, its chart and every file made for it: KIND=K.
	$(GO) run ./hack/chart remove --kind "$(KIND)"

.PHONY: controlplane
controlplane: ## Build (once) and cache the local control plane binaries; prints their directory.
	hack/controlplane-bins.sh --full

.PHONY: test
test: ## Run go vet, check generated files and tracked files, and run every test against a real local control plane.
	hack/check-tracked.sh
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '^tools/'))" || { echo "gofmt needed on:"; gofmt -l $$(git ls-files '*.go' | grep -v '^tools/'); exit 1; }
	$(GO) vet ./...
	$(GO) run ./hack/gencrd --watches watches.yaml --out config/crd/bases --check
	assets="$$(hack/controlplane-bins.sh --full | tail -n 1)"; \
	KUBEBUILDER_ASSETS="$$assets" $(GO) test ./... -count=1 -timeout 30m

.PHONY: test-e2e
test-e2e: ## Run the end-to-end suite on the full local cluster (kube-controller-manager, kube-scheduler, kwok), with OLM v1 and OLM v0 for the installs through OLM.
	assets="$$(hack/controlplane-bins.sh --full | tail -n 1)"; \
	hack/olm-bins.sh >/dev/null; \
	hack/olmv0-bins.sh >/dev/null; \
	KUBEBUILDER_ASSETS="$$assets" RANDOM_SEED="$(RANDOM_SEED)" RANDOM_STEPS="$(RANDOM_STEPS)" \
		RANDOM_KEEP="$(RANDOM_KEEP)" RANDOM_SHRINK="$(RANDOM_SHRINK)" \
		$(GO) test -tags e2e ./test/e2e/ $(if $(RANDOM_SEED),-run '^TestRandomHistories$$') -count=1 -v -timeout 30m

# `make soak SOAK_MINUTES=60`: seeded random histories (TestRandomHistories) of
# new seeds until the time is up; prints the steps, perturbations and oracle
# checks that held, and the replay line of a seed that fails, then of its
# shortest failing history found (RANDOM_SHRINK replays at most, default 8).
SOAK_MINUTES ?= 10
.PHONY: soak
soak: ## Run random histories checked by the oracle for SOAK_MINUTES (default 10), RANDOM_STEPS each.
	assets="$$(hack/controlplane-bins.sh --full | tail -n 1)"; \
	KUBEBUILDER_ASSETS="$$assets" SOAK_MINUTES="$(SOAK_MINUTES)" RANDOM_STEPS="$(RANDOM_STEPS)" RANDOM_SHRINK="$(RANDOM_SHRINK)" \
		$(GO) test -tags e2e ./test/e2e/ -run '^TestRandomHistories$$' -count=1 -v -timeout $$(( $(SOAK_MINUTES) + 30 ))m

# `make bench`: our operator and the baseline (helm-operator-plugins v0.9.1's
# reconciler, hack/bench/baseline, never part of bin/manager) in turn, each on a
# fresh local control plane. BENCH_SMOKE=1 is N=5, one round: CI checks that
# every figure is produced, not what it is.
BENCH_N ?=
BENCH_ROUNDS ?=
BENCH_SMOKE ?=

.PHONY: bench
bench: ## Benchmark against helm-operator-plugins' reconciler (BENCH_N=100,500 BENCH_ROUNDS=1; BENCH_SMOKE=1: N=5): table on stdout, JSON in bin/bench/.
	$(GO) build -o bin/manager .
	$(GO) build -o bin/bench-baseline ./hack/bench/baseline
	$(GO) build -o bin/benchmark ./hack/bench
	assets="$$(hack/controlplane-bins.sh | tail -n 1)"; \
	KUBEBUILDER_ASSETS="$$assets" BENCH_N="$(BENCH_N)" BENCH_ROUNDS="$(BENCH_ROUNDS)" BENCH_SMOKE="$(BENCH_SMOKE)" \
	bin/benchmark --ours bin/manager --baseline bin/bench-baseline --out bin/bench/results.json

##@ Demo

.PHONY: demo
demo: ## Start a local control plane, run the operator on the sample CRs, show their status, stop. KEEP=1 leaves it running.
	$(GO) build -o bin/manager .
	$(GO) build -o bin/demo ./hack/demo
	bin/demo $(if $(KEEP),--keep)

# OLM=v0: OLM v0 (olm and catalog: CatalogSource, OperatorGroup, Subscription,
# InstallPlan, CSV; what OperatorHub runs) instead of OLM v1.
OLM ?= v1

.PHONY: olm-demo
olm-demo: ## Install the operator through a real OLM v1 (catalogd, operator-controller; OLM=v0: OLM v0's olm and catalog) on the local cluster from our catalog image, upgrade it, leave it all running until Ctrl-C.
	@case "$(OLM)" in v0|v1) ;; *) echo "OLM=$(OLM): say v1 (the default) or v0"; exit 1;; esac
	assets="$$(hack/controlplane-bins.sh --full | tail -n 1)"; \
	$(if $(filter v0,$(OLM)),hack/olmv0-bins.sh,hack/olm-bins.sh) >/dev/null; \
	OLM_DEMO=1 KUBEBUILDER_ASSETS="$$assets" $(GO) test -tags e2e ./test/e2e/ -run '^TestInstalledByOLM$(if $(filter v0,$(OLM)),v0)$$' -count=1 -v -timeout 0

##@ Build

.PHONY: build
build: ## Build the manager binary into bin/.
	$(GO) build -o bin/manager .

.PHONY: run
run: ## Run the operator on this machine against the cluster of the current kubeconfig.
	$(GO) run . --watches-file=watches.yaml

# Images are built in pure Go (hack/ship, go-containerregistry): no Docker,
# Podman or base image is needed, only Go. Pushes authenticate with
# ~/.docker/config.json. `go run ./hack/registry` serves a registry on
# 127.0.0.1:5000 to try them.
PLATFORMS ?= linux/amd64,linux/arm64,linux/ppc64le,linux/s390x
SOURCE_URL ?= https://github.com/helmapp/helm-app-operator
LICENSES ?= Apache-2.0
CATALOG_IMG ?= quay.io/helmapp/helm-app-operator-catalog:v$(VERSION)
# 1: an operand image (RELATED_IMAGE_*) that resolves to no digest fails
# bundle-push instead of staying a tag.
STRICT_DIGESTS ?=
SHIP = $(GO) run ./hack/ship
SHIP_COMMON = --platforms "$(PLATFORMS)" --version $(VERSION) --source "$(SOURCE_URL)" --licenses "$(LICENSES)"
# RELATED_IMAGE_<NAME>=<image> on the command line (or in the environment)
# overrides an operand image of config/manager in the pushed bundle.
SHIP_RELATED_IMAGES = $(foreach v,$(sort $(filter RELATED_IMAGE_%,$(.VARIABLES))),--related-image "$(v)=$($(v))")

.PHONY: image-build
image-build: ## Build the operator image (an OCI index of PLATFORMS) into the OCI layout bin/image/operator.
	$(SHIP) operator --image $(IMG) $(SHIP_COMMON) --layout bin/image/operator

.PHONY: image-push
image-push: ## Build the operator image and push it to IMG; prints its digest.
	$(SHIP) operator --image $(IMG) $(SHIP_COMMON) --layout bin/image/operator --push

.PHONY: docker-build
docker-build: image-build ## Alias of image-build (no container engine needed).

.PHONY: docker-push
docker-push: image-push ## Alias of image-push (no container engine needed).

##@ Deployment (against the current kubeconfig)

.PHONY: install
install: ## Install the CRDs.
	$(KUBECTL) apply --server-side -k config/crd

.PHONY: uninstall
uninstall: ## Uninstall the CRDs (deletes every resource of their kinds).
	$(KUBECTL) delete --ignore-not-found -k config/crd

.PHONY: deploy
deploy: ## Deploy the operator with image IMG.
	$(KUBECTL) kustomize config/default | sed 's#quay.io/helmapp/helm-app-operator:0.1.0#$(IMG)#' | $(KUBECTL) apply --server-side -f -

.PHONY: undeploy
undeploy: ## Remove the operator.
	$(KUBECTL) kustomize config/default | $(KUBECTL) delete --ignore-not-found -f -

##@ Bundle

# The OLM bundle: bundle/ and bundle.Dockerfile, generated from config/ by
# hack/genbundle (kustomize in-process plus what operator-sdk's `generate
# bundle` does) and validated with operator-framework/api's validators (the
# defaults and the operatorframework suite). Commit the result; `make test`
# fails when it is stale or does not validate with 0 errors and 0 warnings.
CHANNELS ?= candidate
# Empty: the first of CHANNELS.
DEFAULT_CHANNEL ?=
OPENSHIFT_VERSIONS ?= v4.17
BUNDLE_K8S_VERSION ?= 1.36
BUNDLE_IMG ?= quay.io/helmapp/helm-app-operator-bundle:v$(VERSION)
# The upgrade graph: the CSV this version replaces (helm-app-operator.v<old>)
# and an olm.skipRange (e.g. '>=0.1.0 <0.2.0'); both empty for the first release.
REPLACES ?=
SKIP_RANGE ?=
# A YAML file mapping each image (as config/ names it, with its tag) to its
# digest (sha256:...): the bundle then refers to every image by digest and
# declares the disconnected feature. Empty: images stay tags.
IMAGE_DIGESTS ?=

.PHONY: bundle
bundle: ## Generate bundle/ and bundle.Dockerfile for VERSION and IMG from config/, then validate it.
	$(GO) run ./hack/genbundle --version $(VERSION) --image $(IMG) --channels $(CHANNELS) --default-channel "$(DEFAULT_CHANNEL)" --openshift-versions "$(OPENSHIFT_VERSIONS)" --k8s-version $(BUNDLE_K8S_VERSION) \
		--replaces "$(REPLACES)" --skip-range "$(SKIP_RANGE)" --image-digests "$(IMAGE_DIGESTS)"

.PHONY: bundle-validate
bundle-validate: ## Validate bundle/ as `operator-sdk bundle validate --select-optional suite=operatorframework` would.
	$(GO) run ./hack/genbundle --validate-only --k8s-version $(BUNDLE_K8S_VERSION)

# The file-based catalog: CATALOG_BUNDLES are bundle directories, one per
# version (e.g. an older release's bundle/ checked out elsewhere, then bundle);
# their replaces / olm.skipRange make the channel graph.
CATALOG_BUNDLES ?= bundle
CATALOG_DIR ?= catalog
# Each bundle's image in the catalog, from its version (as bundle-build tags it).
BUNDLE_IMG_TEMPLATE ?= quay.io/helmapp/helm-app-operator-bundle:v{{.Version}}

.PHONY: catalog
catalog: ## Render a file-based catalog (package, channels, bundles) of CATALOG_BUNDLES into CATALOG_DIR and validate it with opm's library.
	$(GO) run ./hack/gencatalog --bundles "$(CATALOG_BUNDLES)" --out $(CATALOG_DIR) --image-template '$(BUNDLE_IMG_TEMPLATE)'

.PHONY: bundle-build
bundle-build: bundle-push ## Alias of bundle-push (no container engine needed).

.PHONY: bundle-push
bundle-push: image-push ## Push IMG, then the bundle image BUNDLE_IMG with every image pinned to a digest (RELATED_IMAGE_*, IMAGE_DIGESTS, STRICT_DIGESTS=1); prints its digest.
	$(SHIP) bundle --image $(IMG) --bundle-image $(BUNDLE_IMG) --version $(VERSION) --channels $(CHANNELS) --default-channel "$(DEFAULT_CHANNEL)" \
		--openshift-versions "$(OPENSHIFT_VERSIONS)" --k8s-version $(BUNDLE_K8S_VERSION) --replaces "$(REPLACES)" --skip-range "$(SKIP_RANGE)" \
		--image-digests "$(IMAGE_DIGESTS)" $(SHIP_RELATED_IMAGES) $(if $(filter 1 true,$(STRICT_DIGESTS)),--strict)

.PHONY: catalog-push
catalog-push: ## Render the catalog from the pushed BUNDLE_IMG and push the catalog image CATALOG_IMG (opm serve, PLATFORMS); prints its digest.
	$(SHIP) catalog --bundle-image $(BUNDLE_IMG) --catalog-image $(CATALOG_IMG) $(SHIP_COMMON)
