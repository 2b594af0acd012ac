# syntax=docker/dockerfile:1
# Build:  docker build -t redlock-proxy .
# Run:    docker run -p 6380:6380 -p 9121:9121 -v $PWD/config.yaml:/etc/redlock-proxy/config.yaml:ro redlock-proxy
# (This file cannot be built on the development machines, which run no
# Docker engine; keep it boring.)

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/redlock-proxy ./cmd/redlock-proxy

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/redlock-proxy /usr/local/bin/redlock-proxy
COPY config.yaml /etc/redlock-proxy/config.yaml
# Unprivileged; the proxy needs no file system access beyond its config.
USER 65532:65532
EXPOSE 6380 9121
ENTRYPOINT ["/usr/local/bin/redlock-proxy"]
CMD ["--config", "/etc/redlock-proxy/config.yaml", "--listen", "0.0.0.0:6380", "--metrics-listen", "0.0.0.0:9121"]
