package bench

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/meterline/meter-consumer/internal/simengine"
)

// keyEngine is the process scenario's engine: simengine's, answering 200 at
// once, keeping no ledger, and counting the calls of each read's key and
// the bodies that do not hold their key's meter id.
type keyEngine struct {
	*simengine.Server
	URL  string // where the reads are posted
	pass atomic.Pointer[keyCounts]
}

// keyCounts are the calls of one pass, by read index.
type keyCounts struct {
	calls      []atomic.Int32
	mismatched atomic.Int64
}

// KeyTally is what the engine saw of one pass.
type KeyTally struct {
	Calls      int64 `json:"calls"`
	Duplicated int   `json:"duplicated_keys"` // called more than once
	Missed     int   `json:"missed_keys"`     // never called
	Mismatched int64 `json:"mismatched"`      // a key of no read, or a body without its key's meter id
}

func startKeyEngine(ctx context.Context) (*keyEngine, error) {
	k := &keyEngine{}
	srv, err := serveEngine(ctx, simengine.Options{Keep: func(string) bool { return false }, Check: k.check})
	if err != nil {
		return nil, err
	}
	k.Server, k.URL = srv, srv.URL+"/reads"
	return k, nil
}

// expect starts counting a pass of reads 0 to n-1.
func (k *keyEngine) expect(n int) *keyCounts {
	c := &keyCounts{calls: make([]atomic.Int32, n)}
	k.pass.Store(c)
	return c
}

// check counts a call; it never refuses one.
func (k *keyEngine) check(r *http.Request, body []byte) error {
	c := k.pass.Load()
	if c == nil {
		return nil
	}
	key := r.Header.Get(simengine.KeyHeader)
	i, ok := Index(key)
	if !ok || i >= len(c.calls) {
		c.mismatched.Add(1)
		return nil
	}
	c.calls[i].Add(1)
	if id, _, _ := strings.Cut(key, "@"); !bytes.Contains(body, []byte(`"`+id+`"`)) {
		c.mismatched.Add(1)
	}
	return nil
}

func (c *keyCounts) tally() KeyTally {
	t := KeyTally{Mismatched: c.mismatched.Load()}
	for i := range c.calls {
		n := c.calls[i].Load()
		t.Calls += int64(n)
		switch {
		case n == 0:
			t.Missed++
		case n > 1:
			t.Duplicated++
		}
	}
	return t
}
