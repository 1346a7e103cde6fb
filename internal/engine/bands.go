package engine

import "math/bits"

// nBands is how many bands of calls in flight are told apart: 1, 2-3, 4-7,
// ..., 64 and more.
const nBands = 7

// bandMemory is the weight of calls a band remembers (older calls fade as
// new ones come: a band's share is that of its last calls, however long
// ago they were made); bandLeast the weight a band needs before its share
// is a background.
const (
	bandMemory = 200.0
	bandLeast  = 50.0
)

// band is the band of a call made with inFlight calls in flight (itself
// included); 0 for 1 call or an unknown count.
func band(inFlight int) int {
	if inFlight <= 1 {
		return 0
	}
	return min(bits.Len(uint(inFlight))-1, nBands-1)
}

// bands remembers the shed shares of the calls made at each band of calls
// in flight. A shed that answers to concurrency (more of the calls shed
// when more are in flight) is the engine's load; the share shed at fewer
// calls in flight is the background of reads that fail on their own,
// which no slowing down relieves.
type bands struct {
	b [nBands]struct{ calls, shed, fast float64 }
}

func (bs *bands) add(b int, w float64, shed, fast bool) {
	x := &bs.b[b]
	x.calls += w
	if shed {
		x.shed += w
	}
	if fast {
		x.fast += w
	}
	if x.calls > bandMemory {
		k := bandMemory / x.calls
		x.calls, x.shed, x.fast = bandMemory, x.shed*k, x.fast*k
	}
}

// background is the shed and fast-shed shares, of share and fast now at
// band b, that are not load: those of the nearest band below that weighs
// enough. At the lowest band, with nothing below to compare, its own
// (nothing can be relieved by fewer calls than one). Above it, with no
// band below known: the shares now, when a band above sheds less (the
// sheds grew as the calls in flight fell: they do not answer to
// concurrency, as at the end of a backlog, where only the reads that always
// fail are left); none otherwise: a shed is then taken for load until
// fewer calls in flight have shown otherwise.
func (bs *bands) background(b, lowest int, share, fast float64) (float64, float64) {
	if b < 0 {
		return 0, 0
	}
	from := b - 1
	if b <= lowest {
		from = b
	}
	for i := from; i >= lowest && i >= 0; i-- {
		if x := bs.b[i]; x.calls >= bandLeast {
			return x.shed / x.calls, x.fast / x.calls
		}
	}
	for i := b + 1; i < nBands; i++ {
		if x := bs.b[i]; x.calls >= bandLeast && x.shed/x.calls < share {
			return share, fast
		}
	}
	return 0, 0
}

// excess is the share of the calls a background bg left unshed that were
// shed: 0 when every call is shed at any concurrency (an outage is the
// breaker's to judge, not a load).
func excess(share, bg float64) float64 {
	if bg >= 1 {
		return 0
	}
	return max(share-bg, 0) / (1 - bg)
}
