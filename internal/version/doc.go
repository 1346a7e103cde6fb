// Package version says which build of the consumer is running: the version
// and revision stamped at link time with -ldflags -X (the Dockerfile does it
// from its VERSION and REVISION build arguments), or else what the Go
// toolchain recorded in the binary (runtime/debug.ReadBuildInfo: the module
// version and vcs.revision), and the Go version.
//
// [Get] is what `consumer --version` prints, what the start-up log line
// carries, what [Register] exports as the meter_consumer_build_info gauge and
// what the HTTP sink sends as its User-Agent ([Info.UserAgent]).
//
// Stamping, from the module root:
//
//	go build -ldflags "-X github.com/meterline/meter-consumer/internal/version.version=v1.4.0 \
//	  -X github.com/meterline/meter-consumer/internal/version.revision=$(git rev-parse HEAD)" ./cmd/consumer
//
// Nothing here fails: what is unknown reads "unknown" (revision) or "dev"
// (version). Every function is safe for concurrent use.
package version
