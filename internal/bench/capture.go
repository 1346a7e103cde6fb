package bench

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// nakCapture is a slog.Handler that keeps the delay the consumer asked for
// in each "nak" record, by stream sequence: the consumer's own account of
// when a read is due back. It is enabled at debug, the level at which the
// consumer writes every nak line (at info a storm's lines are summarised).
// A baseline that NAKs by itself records its delays with record. Pauses
// and credited sheds are read from the product's metrics
// (engine_pauses_total, uncharged_failures_total), not from its lines.
type nakCapture struct {
	mu     sync.Mutex
	delays map[uint64][]asked
}

// asked is one delay asked for a read: when it was asked (the NAK), and the
// delay.
type asked struct {
	at    time.Time
	delay time.Duration
}

func newNakCapture() *nakCapture { return &nakCapture{delays: map[uint64][]asked{}} }

func (c *nakCapture) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelDebug }

func (c *nakCapture) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "nak" {
		return nil
	}
	var seq uint64
	var delay time.Duration
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "stream_seq":
			seq = a.Value.Uint64()
		case "delay":
			delay = a.Value.Duration() // absent when the delay asked is 0
		}
		return true
	})
	// The time is taken now, in the log call: a monotonic reading, which
	// compares safely with the rate engine's.
	c.record(seq, delay)
	return nil
}

// record keeps the delay asked now for the read at stream sequence seq.
func (c *nakCapture) record(seq uint64, delay time.Duration) {
	now := time.Now()
	c.mu.Lock()
	c.delays[seq] = append(c.delays[seq], asked{at: now, delay: delay})
	c.mu.Unlock()
}

func (c *nakCapture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *nakCapture) WithGroup(string) slog.Handler      { return c }

// all returns every delay asked for the read at stream sequence seq, in the
// order they were asked.
func (c *nakCapture) all(seq uint64) []asked {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.delays[seq]
}
