package bench

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// rateEngine is a loopback rate engine: it drains each body and answers at
// once, 200, or 503 to the first call of a key fail selects. It keeps the
// time of the first two calls of every key that fails or record selects.
type rateEngine struct {
	URL string

	srv   *http.Server
	done  chan struct{}
	calls atomic.Int64

	fail   func(key string) bool // nil: never fails
	record func(key string) bool // nil: records nothing

	mu   sync.Mutex
	seen map[string]*keyCalls
}

// keyCalls is what the rate engine saw of one idempotency key.
type keyCalls struct {
	n             int
	first, second time.Time
}

// startRateEngine listens on 127.0.0.1:0 and serves until close.
func startRateEngine(fail, record func(key string) bool) (*rateEngine, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("rate engine: %w", err)
	}
	d := &rateEngine{URL: "http://" + ln.Addr().String() + "/reads", done: make(chan struct{}),
		fail: fail, record: record, seen: map[string]*keyCalls{}}
	d.srv = &http.Server{Handler: http.HandlerFunc(d.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(d.done)
		_ = d.srv.Serve(ln)
	}()
	return d, nil
}

func (d *rateEngine) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	_, _ = io.Copy(io.Discard, r.Body)
	d.calls.Add(1)
	if d.fail == nil && d.record == nil {
		w.WriteHeader(http.StatusOK)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	failing := d.fail != nil && d.fail(key)
	status := http.StatusOK
	d.mu.Lock()
	kc := d.seen[key]
	if kc == nil {
		kc = &keyCalls{}
		if failing || (d.record != nil && d.record(key)) {
			d.seen[key] = kc // a failing key is remembered, to succeed next time
		}
	}
	kc.n++
	switch kc.n {
	case 1:
		kc.first = at
		if failing {
			status = http.StatusServiceUnavailable
		}
	case 2:
		kc.second = at
	}
	d.mu.Unlock()
	w.WriteHeader(status)
}

// keys returns a copy of what was recorded, by key.
func (d *rateEngine) keys() map[string]keyCalls {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]keyCalls, len(d.seen))
	for k, v := range d.seen {
		out[k] = *v
	}
	return out
}

// close stops serving and waits for the server goroutine.
func (d *rateEngine) close() error {
	err := d.srv.Close()
	<-d.done
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("rate engine: %w", err)
	}
	return nil
}
