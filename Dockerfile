# syntax=docker/dockerfile:1
# Build:  docker build -t redlock-proxy .
# Run:    docker run -p 6380:6380 -p 9121:9121 \
#           -v $PWD/config.yaml:/etc/redlock-proxy/config.yaml:ro redlock-proxy
# The image ships no configuration: mount one (masters are never
# 127.0.0.1 inside a container). It listens on all interfaces whatever
# arguments are given, through REDLOCK_PROXY_LISTEN and
# REDLOCK_PROXY_METRICS_LISTEN (flags still override them). On SIGTERM the
# proxy stops accepting, lets commands finish for up to 10 s and releases
# the AUTOEXTEND leases of closing connections: give it a stop grace period
# of 15 s (docker stop -t 15, compose stop_grace_period, Kubernetes
# terminationGracePeriodSeconds). deploy/ has compose and Kubernetes files.
# (No Docker engine runs on the development machines; deploy/deploy_test.go
# checks this file against go.mod, the config keys and deploy/.)

# The Go version of go.mod.
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The version INFO, --version and go_build_info show (make release passes it).
ARG VERSION=devel
RUN CGO_ENABLED=0 go build -trimpath \
    -ldflags="-s -w -X github.com/redlock-proxy/redlock-proxy/internal/buildinfo.version=${VERSION}" \
    -o /out/redlock-proxy ./cmd/redlock-proxy

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/redlock-proxy /usr/local/bin/redlock-proxy
ENV REDLOCK_PROXY_LISTEN=0.0.0.0:6380 \
    REDLOCK_PROXY_METRICS_LISTEN=0.0.0.0:9121
# Unprivileged; the proxy needs no file system access beyond its config.
USER 65532:65532
EXPOSE 6380 9121
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/redlock-proxy"]
CMD ["--config", "/etc/redlock-proxy/config.yaml"]
