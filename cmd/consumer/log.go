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
	switch resolveFormat(c.Format, w) {
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

// resolveFormat returns the handler format auto stands for on w: tint on a
// terminal, json otherwise; other formats are themselves.
func resolveFormat(format string, w io.Writer) string {
	if format != "auto" {
		return format
	}
	if isTerminal(w) {
		return "tint"
	}
	return "json"
}

// refuse writes why the configuration was refused, in the format the
// process's lines would have had: one JSON record when they are JSON (so a
// log pipeline that reads JSON shows it), the plain message otherwise.
func refuse(c config.Log, w io.Writer, err error) {
	if resolveFormat(c.Format, w) != "json" {
		fmt.Fprintf(w, "consumer: %v\n", err)
		return
	}
	slog.New(slog.NewJSONHandler(w, nil)).Error("configuration refused; not starting", slog.String("error", err.Error()))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
