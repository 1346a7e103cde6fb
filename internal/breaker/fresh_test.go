package breaker_test

import (
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/breaker"
)

// again is a call of a read that failed before.
func again(t *testing.T, b *breaker.Breaker, failed bool) {
	t.Helper()
	p, err := b.Acquire(t.Context(), false)
	require.NoError(t, err)
	b.Done(p, failed)
}

// open opens b with fresh failures and ends the cool-down.
func open(t *testing.T, b *breaker.Breaker, c *clock) {
	t.Helper()
	for range 10 {
		call(t, b, true)
	}
	require.Equal(t, breaker.Open, b.State())
	c.coolDownOver()
	require.Equal(t, breaker.HalfOpen, b.State())
}

func TestReadsFailingAgainDoNotOpenIt(t *testing.T) {
	b, _, _ := newBreaker(t)
	for range 5 {
		call(t, b, false)
	}
	for range 100 {
		again(t, b, true) // a few reads that always fail, retried
	}
	assert.Equal(t, breaker.Closed, b.State(), "a read failing again is evidence about that read")
	for range 5 {
		call(t, b, true)
	}
	assert.Equal(t, breaker.Open, b.State(), "5 fresh failures in 10 fresh calls")
}

func TestAFailedProbeOfAReadThatFailedBeforeDoesNotDecideAlone(t *testing.T) {
	tests := []struct {
		name   string
		probes []struct{ fresh, failed bool }
		want   breaker.State
	}{
		{"one failed retry, then fresh successes: closes",
			[]struct{ fresh, failed bool }{{false, true}, {true, false}, {true, false}}, breaker.Closed},
		{"failed retries, then retries that pass: closes",
			[]struct{ fresh, failed bool }{{false, true}, {false, false}, {false, false}}, breaker.Closed},
		{"as many failed retries as probes: reopens",
			[]struct{ fresh, failed bool }{{false, true}, {false, true}}, breaker.Open},
		{"a failed fresh probe: reopens",
			[]struct{ fresh, failed bool }{{false, false}, {true, true}}, breaker.Open},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, c, _ := newBreaker(t)
			open(t, b, c)
			for _, p := range tt.probes {
				require.Equal(t, breaker.HalfOpen, b.State())
				permit, err := b.Acquire(t.Context(), p.fresh)
				require.NoError(t, err)
				require.True(t, permit.Probe())
				b.Done(permit, p.failed)
			}
			assert.Equal(t, tt.want, b.State())
		})
	}
}

// The retries ask first and wait longest; synctest.Wait orders the two
// pairs: it returns once the retries are blocked in Acquire, before the
// fresh reads ask, and once the fresh reads are too, before the cool-down
// ends.
func TestFreshReadsProbeFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, c, _ := newBreaker(t)
		for range 10 {
			call(t, b, true)
		}
		require.Equal(t, breaker.Open, b.State())
		type got struct {
			fresh bool
			p     breaker.Permit
		}
		ch := make(chan got, 4)
		acquire := func(fresh bool) {
			p, err := b.Acquire(t.Context(), fresh)
			if err == nil {
				ch <- got{fresh, p}
			}
		}
		go acquire(false)
		go acquire(false)
		synctest.Wait() // the retries wait first
		go acquire(true)
		go acquire(true)
		synctest.Wait()
		require.True(t, breaker.FreshWaiting(b), "both fresh reads wait")
		c.coolDownOver()
		first, second := <-ch, <-ch
		assert.True(t, first.fresh && second.fresh, "both probes are fresh reads, though retries waited longer")
		b.Done(first.p, false)
		b.Done(second.p, false)
		assert.Equal(t, breaker.Closed, b.State())
		third, fourth := <-ch, <-ch
		assert.False(t, third.fresh || fourth.fresh)
	})
}

func TestARetryProbesWhenNoFreshReadWaits(t *testing.T) {
	b, c, _ := newBreaker(t)
	open(t, b, c)
	p, err := b.Acquire(t.Context(), false)
	require.NoError(t, err)
	assert.True(t, p.Probe())
	assert.False(t, p.Fresh())
}
