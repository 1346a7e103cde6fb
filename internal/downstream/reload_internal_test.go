package downstream

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/clock"
)

func TestReloadedLogsOnceAndRecovers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "value")
	require.NoError(t, os.WriteFile(path, []byte("one"), 0o600))
	var now time.Duration
	clk := func() time.Duration { return now }
	var buf bytes.Buffer
	loads := 0
	r, err := newReloaded("test file", []string{path}, time.Second, func() (string, error) {
		loads++
		b, err := os.ReadFile(path)
		return string(b), err
	}, clk, slog.New(slog.NewTextHandler(&buf, nil)))
	require.NoError(t, err)

	steps := []struct {
		name      string
		act       func()
		want      string
		wantLoads int
	}{
		{"unchanged: not read again", func() {}, "one", 1},
		{"moved away", func() { require.NoError(t, os.Rename(path, path+".bak")) }, "one", 1},
		{"still away", func() {}, "one", 1},
		{"back as it was: not read again", func() { require.NoError(t, os.Rename(path+".bak", path)) }, "one", 1},
		{"rewritten", func() { require.NoError(t, os.WriteFile(path, []byte("two!"), 0o600)) }, "two!", 2},
	}
	for _, st := range steps {
		st.act()
		now += time.Second
		assert.Equal(t, st.want, r.Get(), st.name)
		assert.Equal(t, st.wantLoads, loads, st.name)
	}
	out := buf.String()
	assert.Equal(t, 1, strings.Count(out, "could not be read again"), out)
	assert.Equal(t, 1, strings.Count(out, "readable again; its content did not change"), out)
	assert.Equal(t, 1, strings.Count(out, "changed; read again"), out)
}

func TestReloadedFirstLoadError(t *testing.T) {
	boom := errors.New("boom")
	_, err := newReloaded("test file", []string{"/nonexistent"}, time.Second,
		func() (int, error) { return 0, boom }, clock.System().Mono, slog.New(slog.DiscardHandler))
	assert.ErrorIs(t, err, boom)
}

// Many deliveries read the value while it is checked and swapped: one
// caller checks, the others go on with the current value (run with -race).
func TestReloadedConcurrentGet(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "value")
	require.NoError(t, os.WriteFile(path, []byte("v0"), 0o600))
	r, err := newReloaded("test file", []string{path}, time.Nanosecond, func() (string, error) {
		b, err := os.ReadFile(path)
		return string(b), err
	}, clock.System().Mono, slog.New(slog.DiscardHandler))
	require.NoError(t, err)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 16 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					v := r.Get()
					if !strings.HasPrefix(v, "v") {
						t.Errorf("got %q", v)
						return
					}
				}
			}
		})
	}
	for i := 1; i <= 50; i++ {
		tmp := filepath.Join(dir, "tmp")
		require.NoError(t, os.WriteFile(tmp, []byte("v"+strings.Repeat("x", i)), 0o600))
		require.NoError(t, os.Rename(tmp, path)) // atomic: readers see the old or the new file
	}
	close(stop)
	wg.Wait()
	require.Eventually(t, func() bool { return r.Get() == "v"+strings.Repeat("x", 50) }, 5*time.Second, time.Millisecond)
}

// TestReloadedChecksWhateverTheWallClockDoes: the checks are due on the
// monotonic clock. Due on the wall clock (UnixNano, as before), a step
// back of an hour delayed every check by an hour: a rotated token was not
// read again.
func TestReloadedChecksWhateverTheWallClockDoes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "value")
	require.NoError(t, os.WriteFile(path, []byte("one"), 0o600))
	clk := clock.NewFake(time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC))
	r, err := newReloaded("test file", []string{path}, time.Second, func() (string, error) {
		b, err := os.ReadFile(path)
		return string(b), err
	}, clk.Mono, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	clk.Step(-time.Hour)
	require.NoError(t, os.WriteFile(path, []byte("two!"), 0o600))
	clk.Advance(2 * time.Second)
	assert.Equal(t, "two!", r.Get())
}
