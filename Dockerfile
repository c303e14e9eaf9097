# ehsink container image: a static binary on distroless/static, as a non-root
# user, with no shell. Build with `make image` (or docker/podman build .).
#
# The build stage runs `make build-static`, the same target `make test` (and
# so CI) runs on every change: the image's build is tested even where no
# container engine exists. deploy/ checks this file against the Makefile and
# go.mod.

FROM golang:1.26.8-bookworm AS build
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# COMMIT comes from `make image`: the build context has no .git to read it from.
ARG COMMIT=
RUN make build-static VERSION=${VERSION} COMMIT=${COMMIT} STATIC_BIN=/out/ehsink
# The working directory of the final image, owned by the non-root user:
# default local state (.ehsink/, dead letters of sinks without their own)
# lands there, or on a volume mounted there.
RUN mkdir -p /out/work

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ehsink /usr/local/bin/ehsink
COPY --from=build --chown=65532:65532 /out/work /var/lib/ehsink
WORKDIR /var/lib/ehsink
# distroless's "nonroot" user, by number so that Kubernetes' runAsNonRoot
# can verify it without reading /etc/passwd.
USER 65532:65532
# 9464: the operations HTTP listener (metrics, health, status API). On
# 0.0.0.0, pause, resume and restart need http.token or http.token_file in
# the config; without one they answer 403.
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/ehsink"]
CMD ["run", "-c", "/etc/ehsink/connectors.yaml", "--http", "0.0.0.0:9464"]
