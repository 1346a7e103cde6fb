package bench

import (
	"fmt"
	"net/http"
	"time"

	"github.com/meterline/meter-consumer/internal/simengine"
)

// rateEngine is the storm and steady scenarios' loopback rate engine:
// simengine's, of unlimited capacity, answering 503 to the first call of a
// key fail selects and 200 to the rest. It keeps the calls of the keys fail
// selects, and of no other key.
type rateEngine struct {
	*simengine.Server
	URL string // where the reads are posted
}

// keyCalls is what the rate engine saw of one kept key.
type keyCalls struct {
	n             int
	first, second time.Time
}

// startRateEngine serves on loopback until close.
func startRateEngine(fail func(key string) bool) (*rateEngine, error) {
	eng, err := simengine.New(simengine.Options{Keep: fail, Answer: func(key string, n int) (int, http.Header) {
		if n == 1 && fail(key) {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("rate engine: %w", err)
	}
	srv := simengine.NewServer(eng)
	return &rateEngine{Server: srv, URL: srv.URL + "/reads"}, nil
}

// keys returns when each kept key was called first and second.
func (d *rateEngine) keys() map[string]keyCalls {
	ledger := d.Ledger()
	out := make(map[string]keyCalls, len(ledger))
	for key, calls := range ledger {
		kc := keyCalls{n: len(calls)}
		if len(calls) > 0 {
			kc.first = calls[0].At
		}
		if len(calls) > 1 {
			kc.second = calls[1].At
		}
		out[key] = kc
	}
	return out
}

// close stops serving and waits for the calls in flight.
func (d *rateEngine) close() { d.Close() }
