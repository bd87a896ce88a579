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

.PHONY: controlplane
controlplane: ## Build (once) and cache the local control plane binaries; prints their directory.
	hack/controlplane-bins.sh --full

.PHONY: test
test: ## Run go vet, check generated files, and run every test against a real local control plane.
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '^tools/'))" || { echo "gofmt needed on:"; gofmt -l $$(git ls-files '*.go' | grep -v '^tools/'); exit 1; }
	$(GO) vet ./...
	$(GO) run ./hack/gencrd --watches watches.yaml --out config/crd/bases --check
	assets="$$(hack/controlplane-bins.sh | tail -n 1)"; \
	KUBEBUILDER_ASSETS="$$assets" $(GO) test ./... -count=1 -timeout 30m

##@ Demo

.PHONY: demo
demo: ## Start a local control plane, run the operator on the sample CRs, show their status, stop. KEEP=1 leaves it running.
	$(GO) build -o bin/manager .
	$(GO) run ./hack/demo $(if $(KEEP),--keep)

##@ Build

.PHONY: build
build: ## Build the manager binary into bin/.
	$(GO) build -o bin/manager .

.PHONY: run
run: ## Run the operator on this machine against the cluster of the current kubeconfig.
	$(GO) run . --watches-file=watches.yaml

.PHONY: docker-build
docker-build: ## Build the operator image (needs a Docker engine).
	docker build -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the operator image.
	docker push $(IMG)

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
