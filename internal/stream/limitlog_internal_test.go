package stream

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLimitLogWritesTheFirstMoveThenOneLineAFlush(t *testing.T) {
	var buf bytes.Buffer
	l := newLimitLog(slog.New(slog.NewJSONHandler(&buf, nil)), 1)
	l.move(2) // written at once
	l.move(4)
	l.move(3)
	l.flush() // 4 and 3 since
	l.flush() // no move: nothing
	l.move(8)
	l.move(5)
	l.flush()

	var lines []map[string]any
	for _, b := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var r map[string]any
		require.NoError(t, json.Unmarshal(b, &r))
		assert.Equal(t, "concurrency limit", r["msg"])
		assert.Equal(t, "INFO", r["level"])
		lines = append(lines, map[string]any{"limit": r["limit"], "from": r["from"], "low": r["low"], "high": r["high"]})
	}
	assert.Equal(t, []map[string]any{
		{"limit": 2.0, "from": 1.0, "low": 1.0, "high": 2.0},
		{"limit": 3.0, "from": 2.0, "low": 2.0, "high": 4.0},
		{"limit": 5.0, "from": 3.0, "low": 3.0, "high": 8.0},
	}, lines)
}
