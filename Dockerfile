# syntax=docker/dockerfile:1
# Build: docker build -t meter-consumer .
# Run:   docker run --rm -p 8080:8080 -e NATS_URL=nats://nats:4222 \
#          -e CONSUMER_DOWNSTREAM_URL=http://rate-engine/reads meter-consumer
# .ci/run runs the build stage's command (static, trimmed binary) on every change.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/consumer ./cmd/consumer

# No shell, no package manager, non-root (uid 65532).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/consumer /consumer
USER nonroot:nonroot
# The embedded server (no NATS_URL) stores here; mount a volume for it.
ENV CONSUMER_DATA_DIR=/tmp/meter-consumer \
    CONSUMER_HTTP_ADDR=:8080
EXPOSE 8080
ENTRYPOINT ["/consumer"]
