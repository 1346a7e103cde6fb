package stream

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// LimitLogInterval is how often the concurrency limit's moves are written
// to the log, a line at most.
const LimitLogInterval = 10 * time.Second

// limitLog writes the concurrency limit's moves to the log: the first at
// once, then a line each LimitLogInterval in which it moved, with the
// limit now, the one the last line said, and the lowest and highest it
// was in between. A person watching the log (the demo's first reader) sees
// the limit find the engine's capacity, without a line for each of its
// steps, which come a round trip apart.
type limitLog struct {
	log *slog.Logger

	mu           sync.Mutex
	now, said    int  // the limit now, and what the last line said
	lo, hi       int  // since the last line
	moved, first bool // moved since the last line; the first move is written at once
}

func newLimitLog(log *slog.Logger, limit int) *limitLog {
	return &limitLog{log: log, now: limit, said: limit, lo: limit, hi: limit, first: true}
}

// move notes the limit's new value; the first move is written at once.
func (l *limitLog) move(limit int) {
	l.mu.Lock()
	l.now, l.lo, l.hi, l.moved = limit, min(l.lo, limit), max(l.hi, limit), true
	first := l.first
	l.first = false
	l.mu.Unlock()
	if first {
		l.flush()
	}
}

// flush writes a line if the limit moved since the last one.
func (l *limitLog) flush() {
	l.mu.Lock()
	if !l.moved {
		l.mu.Unlock()
		return
	}
	limit, from, lo, hi := l.now, l.said, l.lo, l.hi
	l.said, l.lo, l.hi, l.moved = limit, limit, limit, false
	l.mu.Unlock()
	l.log.LogAttrs(context.Background(), slog.LevelInfo, "concurrency limit", slog.Int("limit", limit), slog.Int("from", from),
		slog.Int("low", lo), slog.Int("high", hi))
}

// run flushes every interval until ctx ends, then once more; a nil
// limitLog (no adaptive limit) returns at once.
func (l *limitLog) run(ctx context.Context, interval time.Duration) {
	if l == nil {
		return
	}
	defer l.flush()
	every(ctx, interval, l.flush)
}
