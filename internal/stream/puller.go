package stream

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// puller starts and stops pulling: it is paused while the breaker is open
// or the park is full, and at a stop.
//
// It pulls with one Fetch at a time (at most batch reads, expiring after
// expiry) rather than a ConsumeContext: pausing stops asking and lets the
// pull in flight end, so every read the server sends for it reaches the
// handler. Stopping a ConsumeContext (Drain or Stop) unsubscribes while the
// server may still be sending: those reads were delivered to no handler,
// and came back only after the ack wait (TestAFullParkChargesNoDeliveryWithoutACall).
type puller struct {
	cons    jetstream.Consumer
	handler jetstream.MessageHandler
	batch   int
	expiry  time.Duration
	onErr   func(error) // a pull that failed; the next is asked after a pause

	mu         sync.Mutex
	run        *fetching     // nil while paused
	last       *fetching     // the last run, which may still end its pull after a pause
	unexpected chan struct{} // closed when the server ends the durable under us
	once       sync.Once
}

// fetching is one run of pulls, from a resume to a pause.
type fetching struct{ stop, done chan struct{} }

func newPuller(cons jetstream.Consumer, h jetstream.MessageHandler, batch int, expiry time.Duration, onErr func(error)) *puller {
	if onErr == nil {
		onErr = func(error) {}
	}
	return &puller{cons: cons, handler: h, batch: max(batch, 1), expiry: expiry, onErr: onErr, unexpected: make(chan struct{})}
}

// pulling reports whether reads are being pulled.
func (p *puller) pulling() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.run != nil
}

// resume starts pulling if paused.
func (p *puller) resume() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.run != nil {
		return nil
	}
	f := &fetching{stop: make(chan struct{}), done: make(chan struct{})}
	p.run, p.last = f, f
	go p.loop(f)
	return nil
}

// pause stops asking for reads and waits up to timeout for the pull in
// flight to end (it ends when its batch is delivered, or at its expiry):
// every read it brings reaches the handler first. Paused already, it waits
// for the pull of the last run all the same (an earlier pause may have
// given up waiting): a read NAKed while that pull is open would be
// delivered to it again. It reports whether the pull ended in time.
func (p *puller) pause(timeout time.Duration) bool {
	p.mu.Lock()
	f := p.last
	if p.run != nil {
		close(p.run.stop)
		p.run = nil
	}
	p.mu.Unlock()
	if f == nil {
		return true
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-f.done:
		return true
	case <-t.C:
		return false
	}
}

// loop pulls until f is stopped, or the durable is gone.
func (p *puller) loop(f *fetching) {
	defer close(f.done)
	var wait time.Duration // after a failed pull
	for {
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-f.stop:
				t.Stop()
				return
			case <-t.C:
			}
		} else {
			select {
			case <-f.stop:
				return
			default:
			}
		}
		err := p.fetch()
		switch {
		case err == nil:
			wait = 0
		case gone(err) || errors.Is(err, nats.ErrNoResponders) && p.missing():
			p.ended(f)
			return
		default:
			p.onErr(err)
			wait = min(max(2*wait, 50*time.Millisecond), time.Second)
		}
	}
}

// fetch asks for a batch and hands each read to the handler as it comes.
// An expiry without a read is no error.
func (p *puller) fetch() error {
	b, err := p.cons.Fetch(p.batch, jetstream.FetchMaxWait(p.expiry))
	if err != nil {
		return err
	}
	for m := range b.Messages() {
		p.handler(m)
	}
	if err := b.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
		return err
	}
	return nil
}

// gone reports whether err says the durable or the connection is gone for
// good: pulling again cannot help.
func gone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
		errors.Is(err, jetstream.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionClosed)
}

// missing reports whether the durable is gone: a pull no one answered
// (nats.ErrNoResponders) is also what a leader election looks like for a
// moment, so the server is asked.
func (p *puller) missing() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := p.cons.Info(ctx)
	return errors.Is(err, jetstream.ErrConsumerNotFound)
}

// ended marks f's run as over on the server's side and says so once.
func (p *puller) ended(f *fetching) {
	p.mu.Lock()
	if p.run == f {
		p.run = nil
	}
	p.mu.Unlock()
	p.once.Do(func() { close(p.unexpected) })
}
