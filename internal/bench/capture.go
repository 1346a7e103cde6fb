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
type nakCapture struct {
	mu     sync.Mutex
	delays map[uint64]time.Duration
}

func newNakCapture() *nakCapture { return &nakCapture{delays: map[uint64]time.Duration{}} }

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
			delay = a.Value.Duration()
		}
		return true
	})
	c.record(seq, delay)
	return nil
}

// record keeps the delay asked for the read at stream sequence seq.
func (c *nakCapture) record(seq uint64, delay time.Duration) {
	c.mu.Lock()
	c.delays[seq] = delay
	c.mu.Unlock()
}

func (c *nakCapture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *nakCapture) WithGroup(string) slog.Handler      { return c }

// delay returns the delay asked for the read at stream sequence seq.
func (c *nakCapture) delay(seq uint64) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.delays[seq]
	return d, ok
}
