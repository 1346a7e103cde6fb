package bench

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// nakCapture is a slog.Handler that keeps the delay the consumer asked for
// in each "nak" record, by stream sequence: the consumer's own account of
// when a read is due back. It is enabled at debug, the level at which the
// consumer writes every nak line (at info a storm's lines are summarised).
// A baseline that NAKs by itself records its delays with record. It also
// counts the consumer's pauses (pausedLine, at warn); warnOnly (pauseCounter)
// enables it at warn only, for a fleet whose delays nobody reads.
type nakCapture struct {
	mu     sync.Mutex
	delays map[uint64][]asked
	// credited are the first lines (at most maxCredited) of sheds credited
	// as the engine's, with what the engine's view said then.
	credited []string

	warnOnly bool
	paused   atomic.Int64
}

// maxCredited bounds nakCapture.credited.
const maxCredited = 10

// creditedLine is the consumer's debug line of a shed not charged because
// the engine sheds its load.
const creditedLine = "shed while the engine sheds its load: not charged"

// pausedLine is the consumer's warn line when it pauses its calls on a
// Retry-After (older products have no metric of it: see FleetRun.Pauses).
const pausedLine = "the rate engine throttles broadly: calls paused"

// asked is one delay asked for a read: when it was asked (the NAK), and the
// delay.
type asked struct {
	at    time.Time
	delay time.Duration
}

func newNakCapture() *nakCapture { return &nakCapture{delays: map[uint64][]asked{}} }

// pauseCounter is a nakCapture enabled at warn only: it counts pauses.
func pauseCounter() *nakCapture {
	c := newNakCapture()
	c.warnOnly = true
	return c
}

func (c *nakCapture) Enabled(_ context.Context, l slog.Level) bool {
	if c.warnOnly {
		return l >= slog.LevelWarn
	}
	return l >= slog.LevelDebug
}

// pauses returns the pause lines seen.
func (c *nakCapture) pauses() int { return int(c.paused.Load()) }

func (c *nakCapture) Handle(_ context.Context, r slog.Record) error {
	if r.Message == pausedLine {
		c.paused.Add(1)
		return nil
	}
	if r.Message == creditedLine {
		c.credit(r)
		return nil
	}
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

// delay returns the last delay asked for the read at stream sequence seq.
func (c *nakCapture) delay(seq uint64) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.delays[seq]
	if len(d) == 0 {
		return 0, false
	}
	return d[len(d)-1].delay, true
}

// all returns every delay asked for the read at stream sequence seq, in the
// order they were asked.
func (c *nakCapture) all(seq uint64) []asked {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.delays[seq]
}

// credit keeps a credited shed's line, its attributes as key=value.
func (c *nakCapture) credit(r slog.Record) {
	var b strings.Builder
	b.WriteString(r.Time.UTC().Format("15:04:05.000"))
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	c.mu.Lock()
	if len(c.credited) < maxCredited {
		c.credited = append(c.credited, b.String())
	}
	c.mu.Unlock()
}

// credits returns the credited sheds' lines kept.
func (c *nakCapture) credits() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.credited)
}
