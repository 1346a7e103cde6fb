package demo_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/demo"
	"github.com/meterline/meter-consumer/internal/simengine"
)

func TestScheduleAt(t *testing.T) {
	const s = time.Second
	tests := []struct {
		give     time.Duration
		wantStep int
		wantLeft time.Duration
	}{
		{-5 * s, 0, 60 * s},
		{0, 0, 60 * s},
		{59 * s, 0, s},
		{60 * s, 1, 30 * s},
		{89*s + 500*time.Millisecond, 1, 500 * time.Millisecond},
		{90 * s, 2, 60 * s},
		{150 * s, 3, 20 * s},
		{169 * s, 3, s},
		{170 * s, 0, 60 * s}, // the second round
		{170*s + 65*s, 1, 25 * s},
		{10 * 170 * s, 0, 60 * s},
	}
	for _, tt := range tests {
		t.Run(tt.give.String(), func(t *testing.T) {
			step, left := demo.DefaultSchedule.At(tt.give)
			assert.Equal(t, tt.wantStep, step)
			assert.Equal(t, tt.wantLeft, left)
		})
	}
}

// fakeClock is the schedule's clock: each sleep notes the engine's phase
// and what the phase gauge says, then moves the clock by what was asked
// plus late; the sleeps-th sleep ends the run instead.
type fakeClock struct {
	t      *testing.T
	re     *demo.RateEngine
	reg    *prometheus.Registry
	now    time.Time
	late   time.Duration
	sleeps int

	slept  []time.Duration
	phases []demo.Phase
}

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) Sleep(_ context.Context, d time.Duration) error {
	p := c.re.Phase()
	c.phases = append(c.phases, p)
	c.slept = append(c.slept, d)
	assert.Equal(c.t, 1.0, phaseGauge(c.t, c.reg, p), "the gauge says %s", p)
	if len(c.slept) == c.sleeps {
		return context.Canceled
	}
	c.now = c.now.Add(d + c.late)
	return nil
}

// phaseGauge is meter_consumer_demo_rate_engine_phase{phase=p}.
func phaseGauge(t *testing.T, reg prometheus.Gatherer, p demo.Phase) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "meter_consumer_demo_rate_engine_phase" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == string(p) {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no gauge for phase %s", p)
	return 0
}

// logRecorder keeps the messages logged at info and above.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *logRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Level.String()+" "+rec.Message)
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

func TestIncidentsFollowTheSchedule(t *testing.T) {
	const (
		s         = time.Second
		scheduled = "INFO demo: rate engine incidents scheduled"
		overload  = "WARN demo: rate engine overloaded: it queues and sheds with 503 and 429"
		down      = "WARN demo: rate engine down: every call answered 503"
		recovered = "INFO demo: rate engine recovered"
	)
	normal, over, out := demo.PhaseNormal, demo.PhaseOverload, demo.PhaseOutage
	tests := []struct {
		name       string
		late       time.Duration // every wake-up is this late
		sleeps     int
		wantSlept  []time.Duration
		wantPhases []demo.Phase
		wantLogs   []string
	}{
		{
			name:       "on time, a round and a half",
			sleeps:     7,
			wantSlept:  []time.Duration{60 * s, 30 * s, 60 * s, 20 * s, 60 * s, 30 * s, 60 * s},
			wantPhases: []demo.Phase{normal, over, normal, out, normal, over, normal},
			wantLogs:   []string{scheduled, overload, recovered, down, recovered, overload, recovered},
		},
		{
			name:       "late wake-ups shorten the next phase, not shift the schedule",
			late:       5 * s,
			sleeps:     5,
			wantSlept:  []time.Duration{60 * s, 25 * s, 55 * s, 15 * s, 55 * s},
			wantPhases: []demo.Phase{normal, over, normal, out, normal},
			wantLogs:   []string{scheduled, overload, recovered, down, recovered},
		},
		{
			name:       "a wake-up past a whole phase skips it",
			late:       40 * s, // 0 → 100s (overload skipped) → 190s (outage skipped)
			sleeps:     3,
			wantSlept:  []time.Duration{60 * s, 50 * s, 40 * s},
			wantPhases: []demo.Phase{normal, normal, normal},
			wantLogs:   []string{scheduled},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &logRecorder{}
			reg := prometheus.NewRegistry()
			re := newEngine(t, demo.RateEngineOptions{Logger: slog.New(rec), Metrics: demo.NewMetrics(reg)})
			clock := &fakeClock{t: t, re: re, reg: reg, now: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC),
				late: tt.late, sleeps: tt.sleeps}
			in := &demo.Incidents{Engine: re, Now: clock.Now, Sleep: clock.Sleep}
			require.NoError(t, in.Run(t.Context()))
			assert.Equal(t, tt.wantSlept, clock.slept)
			assert.Equal(t, tt.wantPhases, clock.phases)
			assert.Equal(t, tt.wantLogs, rec.msgs, "each change logged once")
		})
	}
}

func TestIncidentsPhasesSetTheCapacity(t *testing.T) {
	re := newEngine(t, demo.RateEngineOptions{ServiceTime: 40 * time.Millisecond})
	sched := demo.Schedule{{demo.PhaseOverload, time.Minute}, {demo.PhaseOutage, time.Minute}, {demo.PhaseNormal, time.Minute}}
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	var capacities []float64
	in := &demo.Incidents{Engine: re, Schedule: sched, Now: func() time.Time { return now },
		Sleep: func(_ context.Context, d time.Duration) error {
			capacities = append(capacities, re.Engine().Capacity())
			if len(capacities) == len(sched) {
				return context.Canceled
			}
			now = now.Add(d)
			return nil
		}}
	require.NoError(t, in.Run(t.Context()))
	// Overload: 1 server of 100ms; outage and normal: the engine's own 8 of 40ms.
	assert.InDeltaSlice(t, []float64{10, 200, 200}, capacities, 1e-9)
	assert.Equal(t, demo.PhaseNormal, re.Phase())
}

func TestIncidentsValidation(t *testing.T) {
	re := newEngine(t, demo.RateEngineOptions{})
	tests := []struct {
		name string
		give *demo.Incidents
		want string
	}{
		{"no engine", &demo.Incidents{}, "Engine is nil"},
		{"empty schedule", &demo.Incidents{Engine: re, Schedule: demo.Schedule{}}, "no step"},
		{"unknown phase", &demo.Incidents{Engine: re, Schedule: demo.Schedule{{"meltdown", time.Second}}}, `step 0: phase "meltdown"`},
		{"zero step", &demo.Incidents{Engine: re, Schedule: demo.Schedule{{demo.PhaseNormal, time.Second}, {demo.PhaseOutage, 0}}}, "step 1: For 0s is not > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.Run(t.Context())
			require.ErrorIs(t, err, demo.ErrConfig)
			assert.ErrorContains(t, err, tt.want)
		})
	}
	require.ErrorIs(t, re.SetPhase("meltdown"), demo.ErrConfig)
	assert.Equal(t, demo.PhaseNormal, re.Phase())
}

// On loopback, through the phases: in the overload the engine serves one
// call at a time and queues two, and sheds the rest at once; in the outage
// it answers 503 to every call; once recovered it bills again.
func TestRateEngineOverloadOutageAndRecovery(t *testing.T) {
	reg := prometheus.NewRegistry()
	re := newEngine(t, demo.RateEngineOptions{
		OKPercent: 100, Metrics: demo.NewMetrics(reg),
		Overload: demo.Capacity{Servers: 1, ServiceTime: time.Hour, Queue: 2},
	})
	serving, stop := context.WithCancel(t.Context())
	url, wait, err := demo.StartRateEngine(serving, re, "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { stop(); assert.NoError(t, wait()) }()

	status, err := postURL(t.Context(), url, "before")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "normal: billed")

	require.NoError(t, re.SetPhase(demo.PhaseOverload))
	assert.InDelta(t, 1/time.Hour.Seconds(), re.Engine().Capacity(), 1e-12)
	held, release := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for i := range 3 { // one served (for an hour), two queued
		wg.Go(func() { _, _ = postURL(held, url, fmt.Sprintf("held-%d", i)) })
	}
	actx, acancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer acancel()
	require.NoError(t, re.Engine().Await(actx, func(st simengine.Stats) bool { return st.InSystem == 3 }))
	for i := range 5 {
		status, err := postURL(t.Context(), url, fmt.Sprintf("over-%d", i))
		require.NoError(t, err)
		assert.Contains(t, []int{http.StatusServiceUnavailable, http.StatusTooManyRequests}, status, "shed")
	}
	assert.EqualValues(t, 5, re.Stats().Shed, "every call past the reduced capacity is shed")
	release()
	wg.Wait()
	// The server sees the clients go: the queued calls leave, the served
	// one is abandoned (its server stays busy for its hour).
	require.NoError(t, re.Engine().Await(actx, func(st simengine.Stats) bool { return st.Left+st.Abandoned == 3 }))

	require.NoError(t, re.SetPhase(demo.PhaseOutage))
	assert.Equal(t, 1.0, phaseGauge(t, reg, demo.PhaseOutage))
	for _, key := range []string{"before", "new-1", "new-2"} { // billed or not
		status, err := postURL(t.Context(), url, key)
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, status, key)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "a bad request too")
	assert.Empty(t, resp.Header.Get("Retry-After"))
	assert.EqualValues(t, 4, re.Stats().Down)

	require.NoError(t, re.SetPhase(demo.PhaseNormal))
	assert.Equal(t, 1.0, phaseGauge(t, reg, demo.PhaseNormal))
	assert.Zero(t, phaseGauge(t, reg, demo.PhaseOutage))
	for _, key := range []string{"new-1", "before"} {
		status, err := postURL(t.Context(), url, key)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, status, "recovered: %s", key)
	}
	st := re.Stats()
	assert.EqualValues(t, 2, st.Billed, "before and new-1; nothing billed while shed or down")
	assert.EqualValues(t, 1, st.Duplicates)
}

// A served call's outcome is its read's: the same for the same key and
// call number whatever the order, the concurrency and the phase, as long as
// the call is served (the capacity is the only tie to the load).
func TestRateEngineOutcomeIsTheReadsNotTheLoad(t *testing.T) {
	const n = 400
	engine := func() *demo.RateEngine {
		return newEngine(t, demo.RateEngineOptions{
			Rand: rand.New(rand.NewPCG(2026, 1)), SlowDelay: time.Millisecond,
			Overload: demo.Capacity{Servers: 1, ServiceTime: time.Microsecond, Queue: n},
		})
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("MTR-%05d@2026-12-01T08:00:00Z", i)
	}

	alone := engine()
	want := map[string]int{}
	for _, k := range keys {
		want[k] = serve(alone, post(t.Context(), k)).Code
	}

	loaded := engine()
	require.NoError(t, loaded.SetPhase(demo.PhaseOverload))
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := n - 1 - w; i >= 0; i -= 8 { // backwards, eight at once
				code := serve(loaded, post(t.Context(), keys[i])).Code
				mu.Lock()
				got[keys[i]] = code
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Zero(t, loaded.Stats().Shed, "the queue holds every call: all are served")
	assert.Equal(t, want, got)
	codes := map[int]bool{}
	for _, c := range want {
		codes[c] = true
	}
	assert.Len(t, codes, 4, "200, 503, 429 and 422 drawn: %v", codes)
}

func TestMetricsLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	demo.NewMetrics(reg)
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP meter_consumer_demo_rate_engine_phase 1 for the phase the demo's simulated rate engine is in (normal, overload, outage; --demo-incidents), 0 for the others.
# TYPE meter_consumer_demo_rate_engine_phase gauge
meter_consumer_demo_rate_engine_phase{phase="normal"} 1
meter_consumer_demo_rate_engine_phase{phase="outage"} 0
meter_consumer_demo_rate_engine_phase{phase="overload"} 0
`)))
}
