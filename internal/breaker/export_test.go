package breaker

// FreshWaiting reports whether two fresh reads wait in Acquire, for the tests.
func FreshWaiting(b *Breaker) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fresh == 2
}
