package bench

import (
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// workerPool runs n goroutines that each call handle for the messages given to
// dispatch; stop ends them and waits. dispatch is the Consume callback.
func workerPool(n int, handle func(jetstream.Msg)) (dispatch func(jetstream.Msg), stop func()) {
	work, quit := make(chan jetstream.Msg), make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case m := <-work:
					handle(m)
				case <-quit:
					return
				}
			}
		}()
	}
	dispatch = func(m jetstream.Msg) {
		select {
		case work <- m:
		case <-quit:
		}
	}
	return dispatch, func() {
		close(quit)
		wg.Wait()
	}
}
