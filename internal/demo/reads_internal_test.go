package demo

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/meter"
)

func TestFormatThousandths(t *testing.T) {
	tests := []struct {
		give uint64
		want string
	}{
		{0, "0.000"},
		{1, "0.001"},
		{10, "0.010"},
		{999, "0.999"},
		{1000, "1.000"},
		{1234567, "1234.567"},
		{18446744073709551615, "18446744073709551.615"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			assert.Equal(t, tt.want, formatThousandths(tt.give))
		})
	}
}

func TestGeneratorReadsHonourTheContract(t *testing.T) {
	at := time.Date(2026, 11, 30, 7, 0, 0, 0, time.FixedZone("CET", 3600))
	g := newGenerator(rand.New(rand.NewPCG(7, 11)), 20, 30)

	last := map[string]uint64{}
	region := map[string]string{}
	faultsSeen := map[string]int{}
	for i := range 1000 {
		r := g.next(at.Add(time.Duration(i) * time.Millisecond))
		require.Contains(t, regions, r.region)
		require.NotEmpty(t, r.msgID)

		got, err := meter.Decode(r.body)
		if r.invalid != "" {
			faultsSeen[r.invalid]++
			require.Error(t, err, "fault %s: %s", r.invalid, r.body)
			continue
		}
		require.NoError(t, err, "%s", r.body)
		assert.Equal(t, r.msgID, got.IdempotencyKey)

		id := got.MeterID
		q := got.Quantity.String()
		require.Regexp(t, `^\d+\.\d{3}$`, q)
		v, err := strconv.ParseUint(strings.Replace(q, ".", "", 1), 10, 64)
		require.NoError(t, err)
		if prev, ok := last[id]; ok {
			require.Greater(t, v, prev, "register of %s must grow", id)
		}
		last[id] = v
		if prev, ok := region[id]; ok {
			require.Equal(t, prev, r.region, "meter %s changed region", id)
		}
		region[id] = r.region
	}
	assert.Len(t, faultsSeen, len(faults), "every fault is used")
	assert.Len(t, last, 20, "every meter reports")
}

func TestGeneratorFaultsCycleInOrder(t *testing.T) {
	g := newGenerator(rand.New(rand.NewPCG(1, 1)), 5, 100)
	for i := range 2 * len(faults) {
		r := g.next(time.Unix(0, 0).UTC())
		assert.Equal(t, faults[i%len(faults)].name, r.invalid)
	}
}

func TestGeneratorNoInvalidAtZeroPercent(t *testing.T) {
	g := newGenerator(rand.New(rand.NewPCG(3, 4)), 5, 0)
	for range 500 {
		require.Empty(t, g.next(time.Unix(0, 0).UTC()).invalid)
	}
}

func TestInterval(t *testing.T) {
	tests := []struct {
		rate float64
		want time.Duration
	}{
		{1, time.Second},
		{20, 50 * time.Millisecond},
		{200, 5 * time.Millisecond},
		{3, 333333333 * time.Nanosecond},
		{1e9, time.Microsecond},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, interval(tt.rate), "rate %v", tt.rate)
	}
}
