package stream

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// puller starts and stops pulling: it is paused while the breaker is open,
// so new reads stay in the stream with their delivery counts untouched.
type puller struct {
	cons    jetstream.Consumer
	handler jetstream.MessageHandler
	opts    []jetstream.PullConsumeOpt

	mu         sync.Mutex
	cc         jetstream.ConsumeContext // nil while paused
	unexpected chan struct{}            // closed when the server ends a consume we did not stop
	once       sync.Once
}

func newPuller(cons jetstream.Consumer, h jetstream.MessageHandler, opts ...jetstream.PullConsumeOpt) *puller {
	return &puller{cons: cons, handler: h, opts: opts, unexpected: make(chan struct{})}
}

// pulling reports whether messages are being pulled.
func (p *puller) pulling() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cc != nil
}

// resume starts pulling if paused.
func (p *puller) resume() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cc != nil {
		return nil
	}
	cc, err := p.cons.Consume(p.handler, p.opts...)
	if err != nil {
		return err
	}
	p.cc = cc
	go func() {
		<-cc.Closed()
		p.mu.Lock()
		ours := p.cc != cc // pause cleared it before draining
		if !ours {
			p.cc = nil
		}
		p.mu.Unlock()
		if !ours {
			p.once.Do(func() { close(p.unexpected) })
		}
	}()
	return nil
}

// pause stops pulling with Drain, which hands buffered messages to the
// handler instead of throwing them away (Stop would burn an attempt on
// each), and waits up to timeout for it to finish.
func (p *puller) pause(timeout time.Duration) bool {
	p.mu.Lock()
	cc := p.cc
	p.cc = nil
	p.mu.Unlock()
	if cc == nil {
		return true
	}
	cc.Drain()
	select {
	case <-cc.Closed():
		return true
	case <-time.After(timeout):
		return false
	}
}
