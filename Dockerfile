# syntax=docker/dockerfile:1
# configmap-attacher image: a static binary on distroless, running as non-root.
#   make docker-build [IMAGE=...] [VERSION=...]
# or: docker build --build-arg VERSION=1.2.3 --build-arg COMMIT=abc123def456 -t configmap-attacher:1.2.3 .
# (make release prints the multi-platform command for the version in ./VERSION)

ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# Dependencies first: this layer is cached until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
# The sources (.dockerignore keeps bin/, deploy/, hack/, tests and .git out of the context).
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
ARG TARGETOS=linux
ARG TARGETARCH
# CGO off: a static binary that needs no libc; -trimpath and no VCS stamping: reproducible.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/configmap-attacher/configmap-attacher/internal/cli.Version=${VERSION} -X github.com/configmap-attacher/configmap-attacher/internal/cli.Commit=${COMMIT}" \
      -o /out/configmap-attacher ./cmd/configmap-attacher

# distroless static: CA certificates, tzdata and /etc/passwd, no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG COMMIT=unknown
LABEL org.opencontainers.image.title="configmap-attacher" \
      org.opencontainers.image.source="https://github.com/configmap-attacher/configmap-attacher" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
COPY --from=build /out/configmap-attacher /configmap-attacher
# nonroot (65532:65532), as the Helm chart's securityContext expects.
USER 65532:65532
# gRPC custom trigger, HTTP receiver (/healthz /readyz /metrics).
EXPOSE 9000 8080
ENTRYPOINT ["/configmap-attacher"]
CMD ["serve"]
