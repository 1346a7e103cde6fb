package stream

import (
	"sync"
	"sync/atomic"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/dlq"
)

// unstoredCopy remembers the outcome of a read whose dead-letter copy was not
// confirmed, so that its redelivery to this replica is dead-lettered with
// the same reason and cause. A redelivery to another replica past the
// attempt budget is dead-lettered as exhausted, cause unsettled.
type unstoredCopy struct {
	reason dlq.Reason
	ce     *classify.Error
}

// maxUnstored bounds the memory of unstored copies: an entry is only taken
// back when the redelivery lands on this replica.
const maxUnstored = 10000

type unstoredCopies struct {
	n  atomic.Int64 // len(m), read without the lock on the hot path
	mu sync.Mutex
	m  map[uint64]unstoredCopy
}

func (u *unstoredCopies) put(seq uint64, c unstoredCopy) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = make(map[uint64]unstoredCopy)
	}
	if _, dup := u.m[seq]; !dup && len(u.m) < maxUnstored {
		u.m[seq] = c
		u.n.Add(1)
	}
}

func (u *unstoredCopies) take(seq uint64) (unstoredCopy, bool) {
	if u.n.Load() == 0 {
		return unstoredCopy{}, false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	c, ok := u.m[seq]
	if ok {
		delete(u.m, seq)
		u.n.Add(-1)
	}
	return c, ok
}
