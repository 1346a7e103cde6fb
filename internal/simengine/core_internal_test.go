package simengine

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The servers and the queue as a state machine, step by step, with no clock.
func TestCore(t *testing.T) {
	type step struct {
		do   string // arrive, finish, leave, servers
		name string // the ticket arriving or leaving
		n    int    // servers
		want string // arrive: serve, wait, shed; finish, servers: tickets started; leave: true, false
	}
	tests := []struct {
		name                          string
		servers, queue                int
		steps                         []step
		wantBusy, wantQueued, wantMax int
	}{
		{
			name: "two servers, three queued, the rest shed", servers: 2, queue: 3,
			steps: []step{
				{do: "arrive", name: "a", want: "serve"},
				{do: "arrive", name: "b", want: "serve"},
				{do: "arrive", name: "c", want: "wait"},
				{do: "arrive", name: "d", want: "wait"},
				{do: "arrive", name: "e", want: "wait"},
				{do: "arrive", name: "f", want: "shed"},
				{do: "arrive", name: "g", want: "shed"},
			},
			wantBusy: 2, wantQueued: 3, wantMax: 5,
		},
		{
			name: "first in, first out", servers: 1, queue: 3,
			steps: []step{
				{do: "arrive", name: "a", want: "serve"},
				{do: "arrive", name: "b", want: "wait"},
				{do: "arrive", name: "c", want: "wait"},
				{do: "finish", want: "b"},
				{do: "finish", want: "c"},
				{do: "finish", want: ""},
			},
			wantBusy: 0, wantQueued: 0, wantMax: 3,
		},
		{
			name: "a call that leaves the queue is not served", servers: 1, queue: 3,
			steps: []step{
				{do: "arrive", name: "a", want: "serve"},
				{do: "arrive", name: "b", want: "wait"},
				{do: "arrive", name: "c", want: "wait"},
				{do: "arrive", name: "d", want: "wait"},
				{do: "leave", name: "c", want: "true"},
				{do: "leave", name: "b", want: "true"},
				{do: "arrive", name: "e", want: "wait"},
				{do: "finish", want: "d"},
				{do: "finish", want: "e"},
			},
			wantBusy: 1, wantQueued: 0, wantMax: 4,
		},
		{
			name: "a call given a server cannot leave the queue", servers: 1, queue: 1,
			steps: []step{
				{do: "arrive", name: "a", want: "serve"},
				{do: "arrive", name: "b", want: "wait"},
				{do: "finish", want: "b"},
				{do: "leave", name: "b", want: "false"},
			},
			wantBusy: 1, wantQueued: 0, wantMax: 2,
		},
		{
			name: "raising the servers starts queued calls, lowering them waits", servers: 1, queue: 4,
			steps: []step{
				{do: "arrive", name: "a", want: "serve"},
				{do: "arrive", name: "b", want: "wait"},
				{do: "arrive", name: "c", want: "wait"},
				{do: "arrive", name: "d", want: "wait"},
				{do: "servers", n: 3, want: "b,c"},
				{do: "servers", n: 1, want: ""},
				{do: "finish", want: ""},
				{do: "finish", want: ""},
				{do: "finish", want: "d"},
			},
			wantBusy: 1, wantQueued: 0, wantMax: 4,
		},
		{
			name: "unlimited servers never queue", servers: 0, queue: 0,
			steps: []step{
				{do: "arrive", name: "a", want: "serve"},
				{do: "arrive", name: "b", want: "serve"},
				{do: "arrive", name: "c", want: "serve"},
			},
			wantBusy: 3, wantQueued: 0, wantMax: 3,
		},
		{
			name: "no queue sheds as soon as the servers are busy", servers: 1, queue: 0,
			steps: []step{
				{do: "arrive", name: "a", want: "serve"},
				{do: "arrive", name: "b", want: "shed"},
				{do: "finish", want: ""},
				{do: "arrive", name: "c", want: "serve"},
			},
			wantBusy: 1, wantQueued: 0, wantMax: 1,
		},
	}
	admissions := map[admission]string{serve: "serve", wait: "wait", shed: "shed"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := core{servers: tt.servers, queueCap: tt.queue}
			tickets := map[string]*ticket{}
			names := map[*ticket]string{}
			started := func() string {
				var out []string
				for tk := c.next(); tk != nil; tk = c.next() {
					out = append(out, names[tk])
				}
				return strings.Join(out, ",")
			}
			for i, s := range tt.steps {
				switch s.do {
				case "arrive":
					tk := &ticket{}
					tickets[s.name], names[tk] = tk, s.name
					assert.Equal(t, s.want, admissions[c.arrive(tk)], "step %d", i)
				case "finish":
					c.finish()
					assert.Equal(t, s.want, started(), "step %d", i)
				case "leave":
					assert.Equal(t, s.want == "true", c.leave(tickets[s.name]), "step %d", i)
				case "servers":
					c.servers = s.n
					assert.Equal(t, s.want, started(), "step %d", i)
				}
				require.GreaterOrEqual(t, c.busy, 0, "step %d", i)
				require.GreaterOrEqual(t, c.queued, 0, "step %d", i)
			}
			assert.Equal(t, tt.wantBusy, c.busy, "busy")
			assert.Equal(t, tt.wantQueued, c.queued, "queued")
			assert.Equal(t, tt.wantMax, c.maxInSystem, "max in system")
		})
	}
}

// fakeClock is a clock a test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// Arrivals are counted per 100ms window from the engine's start, and the peak
// slides a 100ms window in steps of 10ms, so a herd across a window's edge is
// seen whole.
func TestArrivals(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name        string
		at          []time.Duration
		wantWindows []int
		wantPeak    int
	}{
		{"none", nil, []int{}, 0},
		{"one window", []time.Duration{0, 5 * ms, 99 * ms}, []int{3}, 3},
		{"windows in order", []time.Duration{0, 5 * ms, 95 * ms, 105 * ms, 150 * ms, 250 * ms}, []int{3, 2, 1}, 3},
		{"a herd across an edge", []time.Duration{60 * ms, 70 * ms, 80 * ms, 110 * ms, 120 * ms, 130 * ms}, []int{3, 3}, 6},
		{"a quiet gap", []time.Duration{0, 450 * ms}, []int{1, 0, 0, 0, 1}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(Options{})
			require.NoError(t, err)
			clock := &fakeClock{t: time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)}
			e.now, e.start = clock.now, clock.now()
			for i, at := range tt.at {
				clock.t = e.start.Add(at)
				req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/reads", strings.NewReader("{}"))
				req.Header.Set(KeyHeader, "k"+strings.Repeat("x", i))
				rec := httptest.NewRecorder()
				e.ServeHTTP(rec, req)
				require.Equal(t, http.StatusOK, rec.Code)
			}
			assert.Equal(t, tt.wantWindows, e.Arrivals())
			assert.Equal(t, tt.wantPeak, e.PeakArrivals())
			for key, calls := range e.Ledger() {
				require.Len(t, calls, 1)
				assert.Equal(t, e.start.Add(tt.at[len(key)-1]), calls[0].At, "the call's time is the engine's clock")
			}
		})
	}
}
