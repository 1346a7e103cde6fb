package stream

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/meterline/meter-consumer/internal/classify"
)

// Under a failure storm a line per NAKed read would bury everything else:
// 20,000 failing reads, 20,000 warnings. The first NakLines of each
// NakInterval are logged one by one; the rest are counted by cause and
// said in one "nak lines summarised" line at the end of the interval. At
// debug level every line is logged. Dead-letters are always logged one by
// one.
const (
	NakLines    = 20
	NakInterval = 10 * time.Second
)

// nakLog decides which per-read NAK lines are written, and counts the rest.
type nakLog struct {
	log   *slog.Logger
	limit int

	mu         sync.Mutex
	logged     int
	suppressed map[classify.Cause]int
}

// line writes a per-read NAK record, or counts it when this interval's
// lines are spent.
func (n *nakLog) line(ctx context.Context, level slog.Level, msg string, cause classify.Cause, attrs []slog.Attr) {
	if !n.log.Enabled(ctx, slog.LevelDebug) {
		n.mu.Lock()
		if n.logged >= n.limit {
			if n.suppressed == nil {
				n.suppressed = map[classify.Cause]int{}
			}
			n.suppressed[cause]++
			n.mu.Unlock()
			return
		}
		n.logged++
		n.mu.Unlock()
	}
	n.log.LogAttrs(ctx, level, msg, attrs...)
}

// flush ends an interval: the lines it did not write are said in one
// summary, counted by cause.
func (n *nakLog) flush() {
	n.mu.Lock()
	suppressed := n.suppressed
	n.logged, n.suppressed = 0, nil
	n.mu.Unlock()
	if len(suppressed) == 0 {
		return
	}
	causes := make([]string, 0, len(suppressed))
	total := 0
	for c, k := range suppressed {
		causes = append(causes, string(c))
		total += k
	}
	slices.Sort(causes)
	byCause := make([]any, 0, len(causes))
	for _, c := range causes {
		byCause = append(byCause, slog.Int(c, suppressed[classify.Cause(c)]))
	}
	n.log.Warn("nak lines summarised", slog.Int("not_logged", total), slog.Group("by_cause", byCause...),
		slog.Int("logged_per_interval", n.limit), slog.Duration("interval", NakInterval))
}

// run flushes every NakInterval until ctx ends, then once more.
func (n *nakLog) run(ctx context.Context, interval time.Duration) {
	defer n.flush()
	every(ctx, interval, n.flush)
}
