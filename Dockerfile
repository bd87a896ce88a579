# For Docker users' habits only: `make image-build` / `make image-push` build the
# same layout (manager, watches.yaml, helm-charts/, USER 65532) for four platforms
# without any container engine or base image (hack/ship; README "Ship it").
# Build the manager binary
FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH

WORKDIR /workspace
# Copy the Go Modules manifests
COPY go.mod go.mod
COPY go.sum go.sum
# cache deps before building and copying source so that we don't need to re-download as much
# and so that source changes don't invalidate our downloaded layer
RUN go mod download

# Copy the go source
COPY . .

# Build
# the GOARCH has no default value so that the binary is built for the platform of the host
# where the command was called (docker build) or for the platform given with --platform
# (docker buildx build --platform=linux/arm64).
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} go build -trimpath -o manager .

# Use distroless as minimal base image to package the manager binary
# Refer to https://github.com/GoogleContainerTools/distroless for more details
FROM gcr.io/distroless/static:nonroot

# The manager resolves --watches-file (default watches.yaml) and the chart paths
# listed in it (helm-charts/nginx, helm-charts/echo) relative to its working directory.
WORKDIR /opt/helm
COPY watches.yaml /opt/helm/watches.yaml
COPY helm-charts/ /opt/helm/helm-charts/
COPY --from=builder /workspace/manager /manager

USER 65532:65532

ENTRYPOINT ["/manager"]
