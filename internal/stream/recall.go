package stream

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// recall fetches a due retry back at once. A held retry is NAKed when its
// delay is over (see retries), and the server hands it out with the next
// pull that asks for reads: under a backlog, the one Consume sends when
// the client buffer is down to RefillAt, so the retry waited for that pull
// and then behind every read still buffered (two workers, a pull of 32
// and 5ms calls: 7-30 calls between a read's failed call and its retry,
// against 3-4 with recall; TestADueRetryIsPulledBackAtOnce).
// A millisecond after each due retry's NAK, recall sends a pull of its own
// (FetchNoWait) for as many reads as retries were NAKed since its last
// one, its workers at most (the rest come with Consume's pulls): the
// server hands out redeliveries first, so the retry comes back at once,
// and is dispatched as a pulled read is. When this design was first built,
// a pull sent at once overtook the NAK it followed in 2 of 6 test runs
// (the server handles acks apart from pull requests); a millisecond
// later, in none of 8.
//
// A read the pull brings that is not the retry (another replica's pull
// took it first) is an ordinary read pulled a little early.
type recall struct {
	due      chan struct{} // a retry was NAKed (coalesced)
	naked    atomic.Int64  // retries NAKed since the last pull
	most     int           // the most one pull asks for
	recalled prometheus.Counter
}

func newRecall(most int, recalled prometheus.Counter) *recall {
	return &recall{due: make(chan struct{}, 1), most: max(most, 1), recalled: recalled}
}

// nudge tells recall a due retry was NAKed.
func (r *recall) nudge() {
	r.naked.Add(1)
	select {
	case r.due <- struct{}{}:
	default:
	}
}

// recallDelay is how long after a NAK recall pulls: long enough for the
// server to have handled the NAK.
const recallDelay = time.Millisecond

// run pulls the NAKed retries back until ctx ends, while pulling says the
// replica pulls (not while its breaker holds the pull, nor once its stop
// has begun), handing each read to dispatch.
func (r *recall) run(ctx context.Context, cons jetstream.Consumer, dispatch jetstream.MessageHandler, pulling func() bool) {
	wait := time.NewTimer(time.Hour)
	wait.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.due:
		}
		wait.Reset(recallDelay)
		select {
		case <-ctx.Done():
			wait.Stop()
			return
		case <-wait.C:
		}
		n := int(min(r.naked.Swap(0), int64(r.most)))
		if n <= 0 || !pulling() {
			continue
		}
		batch, err := cons.FetchNoWait(n)
		if err != nil {
			continue // the next NAK tries again; Consume brings the retry meanwhile
		}
		for msg := range batch.Messages() {
			r.recalled.Inc()
			dispatch(msg)
		}
	}
}
