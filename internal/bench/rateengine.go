package bench

import (
	"context"
	"net/http"

	"github.com/meterline/meter-consumer/internal/simengine"
)

// failingOnce serves the storm and steady scenarios' engine: of unlimited
// capacity, answering 503 to the first call of a key fail selects and 200
// to the rest, keeping the calls of the keys fail selects and of no other.
func failingOnce(ctx context.Context, fail func(key string) bool) (*simengine.Server, error) {
	return serveEngine(ctx, simengine.Options{Keep: fail, Answer: func(key string, n int) (int, http.Header) {
		if n == 1 && fail(key) {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	}})
}
