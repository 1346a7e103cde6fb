# syntax=docker/dockerfile:1
# Build: docker build -t meter-consumer \
#          --build-arg VERSION=v1.4.0 --build-arg REVISION=$(git rev-parse HEAD) .
# Run:   docker run --rm -p 8080:8080 -e NATS_URL=nats://nats:4222 \
#          -e CONSUMER_DOWNSTREAM_URL=http://rate-engine/reads meter-consumer
# .ci/run runs the build stage's command (static, trimmed binary) on every change;
# cmd/consumer's TestDockerfileStampsTheVersion runs it too and keeps the two alike.
# VERSION and REVISION are stamped with -ldflags -X (consumer --version, the
# meter_consumer_build_info gauge, the log lines, the User-Agent); left empty,
# the binary falls back to what Go recorded (module version, vcs.revision).

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
ARG REVISION=""
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/meterline/meter-consumer/internal/version.version=${VERSION} -X github.com/meterline/meter-consumer/internal/version.revision=${REVISION}" -o /out/consumer ./cmd/consumer

# No shell, no package manager, non-root (uid 65532).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/consumer /consumer
USER nonroot:nonroot
# An image is a deployment: it never falls back to an embedded NATS server,
# so without NATS_URL it refuses to start (a newcomer's run: go run
# ./cmd/consumer --demo, or -e CONSUMER_NATS_EMBEDDED=true).
ENV CONSUMER_NATS_EMBEDDED=false \
    CONSUMER_DATA_DIR=/tmp/meter-consumer \
    CONSUMER_HTTP_ADDR=:8080
EXPOSE 8080
ENTRYPOINT ["/consumer"]
