package simengine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/meterline/meter-consumer/internal/simengine"
)

// An engine of one server and a queue of one, whose calls take an hour: two
// calls fill it, the third is shed at once.
func Example() {
	e, err := simengine.New(simengine.Options{
		Servers: 1, ServiceTime: time.Hour, Queue: 1,
		Shedding: simengine.Shedding{RetryAfterShare: 1, RetryAfter: 2 * time.Second},
		Rand:     rand.New(rand.NewPCG(1, 2)),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	s := simengine.NewServer(e)
	fmt.Printf("capacity %.4f calls/s\n", e.Capacity())

	var wg sync.WaitGroup
	for _, key := range []string{"MTR-1", "MTR-2"} {
		wg.Go(func() { postRead(context.Background(), s, key) })
	}
	_ = e.Await(context.Background(), func(st simengine.Stats) bool { return st.InSystem == 2 })
	status, retryAfter := postRead(context.Background(), s, "MTR-3")
	fmt.Println("MTR-3:", status, "Retry-After:", retryAfter)

	s.Close() // the two calls inside end unbilled
	wg.Wait()
	st := e.Stats()
	fmt.Printf("shed %d, left the queue %d, abandoned %d, billed %d\n", st.Shed, st.Left, st.Abandoned, st.Billed)
	// Output:
	// capacity 0.0003 calls/s
	// MTR-3: 503 Retry-After: 2
	// shed 1, left the queue 1, abandoned 1, billed 0
}

// A scripted answer and the ledger: the first call of a key is refused, the
// second bills it, the third is a duplicate.
func ExampleEngine_Calls() {
	e, err := simengine.New(simengine.Options{
		Answer: func(key string, n int) (int, http.Header) {
			if n == 1 {
				return http.StatusServiceUnavailable, http.Header{"Retry-After": {"1"}}
			}
			return http.StatusOK, nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	s := simengine.NewServer(e)
	defer s.Close()
	for range 3 {
		postRead(context.Background(), s, "MTR-00042@2026-11-30T06:00:00Z")
	}
	for _, c := range e.Calls("MTR-00042@2026-11-30T06:00:00Z") {
		fmt.Println(c.N, c.Status, c.Outcome)
	}
	st := e.Stats()
	fmt.Println("billed:", st.Billed, "duplicates:", st.Duplicates)
	// Output:
	// 1 503 refused
	// 2 200 billed
	// 3 200 duplicate
	// billed: 1 duplicates: 1
}

// postRead posts a read under key and returns the status and Retry-After.
func postRead(ctx context.Context, s *simengine.Server, key string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/reads", strings.NewReader(readBody))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(simengine.KeyHeader, key)
	resp, err := s.Client().Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}
