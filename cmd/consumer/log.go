package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/lmittmann/tint"

	"github.com/meterline/meter-consumer/config"
)

// newLogger builds the process logger: tint's coloured handler on a
// terminal with format auto (or text), JSON otherwise. Durations read as in
// the configuration in every format: "1.5s", never 1500000000.
func newLogger(c config.Log, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.Level)); err != nil {
		return nil, fmt.Errorf("log.level (%q): %w", c.Level, err)
	}
	format := c.Format
	if format == "auto" {
		format = "json"
		if isTerminal(w) {
			format = "tint"
		}
	}
	switch format {
	case "tint":
		return slog.New(tint.NewHandler(w, &tint.Options{Level: level, TimeFormat: time.TimeOnly})), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: durationText})), nil
	}
	return nil, fmt.Errorf("log.format (%q) must be auto, text or json", c.Format)
}

// durationText writes a duration as text ("1.5s", "30s", "5m0s"), as
// time.ParseDuration and the configuration read it: the JSON handler
// would write nanoseconds. The text and tint handlers already write text.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
