package clock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/meterline/meter-consumer/internal/clock"
)

func TestFakeStepMovesTheWallClockAlone(t *testing.T) {
	wall := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		move     func(*clock.Fake)
		wantWall time.Time
		wantMono time.Duration
	}{
		{"advance", func(f *clock.Fake) { f.Advance(3 * time.Second) }, wall.Add(3 * time.Second), 3 * time.Second},
		{"step back", func(f *clock.Fake) { f.Step(-time.Minute) }, wall.Add(-time.Minute), 0},
		{"step back, then advance", func(f *clock.Fake) { f.Step(-time.Minute); f.Advance(time.Second) },
			wall.Add(-59 * time.Second), time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := clock.NewFake(wall)
			tt.move(f)
			assert.Equal(t, tt.wantWall, f.Now())
			assert.Equal(t, tt.wantMono, f.Mono())
		})
	}
}

func TestSystemMonoStartsAtZeroAndGrows(t *testing.T) {
	c := clock.System()
	a := c.Mono()
	b := c.Mono()
	assert.GreaterOrEqual(t, a, time.Duration(0))
	assert.GreaterOrEqual(t, b, a)
}
