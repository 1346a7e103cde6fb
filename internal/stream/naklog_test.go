package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/classify"
)

// A storm of 20,000 failing reads writes NakLines per-read lines and one
// summary counting the rest by cause, not 20,000 warnings.
func TestNakLinesAreSummarisedUnderAStorm(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	n := &nakLog{log: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), limit: NakLines}
	ctx := context.Background()
	for i := range 20000 {
		cause := classify.CauseHTTP503
		if i%4 == 0 {
			cause = classify.CauseTimeout
		}
		n.line(ctx, slog.LevelWarn, "nak", cause, []slog.Attr{slog.Int("i", i)})
	}
	n.flush()
	n.line(ctx, slog.LevelWarn, "nak", classify.CauseHTTP503, nil) // a new interval logs again
	n.flush()                                                      // nothing suppressed: no summary

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, NakLines+2)
	var summary struct {
		Msg       string         `json:"msg"`
		NotLogged int            `json:"not_logged"`
		ByCause   map[string]int `json:"by_cause"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[NakLines]), &summary))
	assert.Equal(t, "nak lines summarised", summary.Msg)
	assert.Equal(t, 20000-NakLines, summary.NotLogged)
	assert.Equal(t, map[string]int{"http_503": 14985, "timeout": 4995}, summary.ByCause)
	assert.Contains(t, lines[NakLines+1], `"msg":"nak"`)
}

// At debug level every line is written.
func TestNakLinesAreAllWrittenAtDebug(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	n := &nakLog{log: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), limit: NakLines}
	for range 100 {
		n.line(context.Background(), slog.LevelWarn, "nak", classify.CauseHTTP503, nil)
	}
	n.flush()
	assert.Equal(t, 100, strings.Count(buf.String(), "\n"))
}
