package downstream

import (
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// reloaded is a value loaded from files and loaded again when one of them
// changes. Get is cheap and lock-free until a check is due; then one caller
// stats the files (the others keep the current value) and loads them again
// if their modification time, size or inode changed. A load that fails
// keeps the last good value; it is logged once, and the next success once.
type reloaded[T any] struct {
	what  string // e.g. "downstream token file", for the log
	paths []string
	load  func() (T, error)
	every time.Duration
	mono  func() time.Duration // the monotonic clock: a step of the wall clock delays no check
	log   *slog.Logger

	cur atomic.Pointer[T]
	due atomic.Int64 // the monotonic reading of the next check; 0 checks at the next Get

	mu      sync.Mutex // held by the one caller that checks
	stamps  []fileStamp
	failing bool
}

// newReloaded loads the value a first time: its error is the caller's.
func newReloaded[T any](what string, paths []string, every time.Duration, load func() (T, error),
	mono func() time.Duration, log *slog.Logger) (*reloaded[T], error) {
	r := &reloaded[T]{what: what, paths: paths, load: load, every: every, mono: mono, log: log}
	stamps, _ := stampAll(paths) // a file that cannot be stat'ed cannot be loaded either
	v, err := load()
	if err != nil {
		return nil, err
	}
	r.cur.Store(&v)
	r.stamps = stamps
	r.due.Store(int64(mono() + every))
	return r, nil
}

// Get returns the current value, checking the files first when due.
func (r *reloaded[T]) Get() T {
	if int64(r.mono()) >= r.due.Load() && r.mu.TryLock() {
		r.check()
		r.mu.Unlock()
	}
	return *r.cur.Load()
}

// CheckSoon makes the next Get check the files, e.g. after the rate engine
// refused the token.
func (r *reloaded[T]) CheckSoon() { r.due.Store(0) }

// check runs with mu held.
func (r *reloaded[T]) check() {
	r.due.Store(int64(r.mono() + r.every))
	stamps, err := stampAll(r.paths)
	if err == nil && slices.Equal(stamps, r.stamps) {
		if r.failing { // back as it was
			r.failing = false
			r.log.Info(r.what+" readable again; its content did not change", slog.Any("paths", r.paths))
		}
		return
	}
	var v T
	if err == nil {
		v, err = r.load()
	}
	if err != nil {
		if !r.failing {
			r.failing = true
			r.log.Warn(r.what+" could not be read again; keeping the last good one",
				slog.Any("paths", r.paths), slog.Any("error", err))
		}
		return
	}
	r.cur.Store(&v)
	r.stamps = stamps
	r.failing = false
	r.log.Info(r.what+" changed; read again", slog.Any("paths", r.paths))
}

// fileStamp is what tells a changed file: a swapped symlink (a new inode),
// a rewrite (a new modification time or size).
type fileStamp struct {
	mtime int64
	size  int64
	dev   uint64
	ino   uint64
}

func stampAll(paths []string) ([]fileStamp, error) {
	stamps := make([]fileStamp, len(paths))
	for i, p := range paths {
		fi, err := os.Stat(p) // follows symlinks: a Kubernetes secret's file is one
		if err != nil {
			return nil, err
		}
		stamps[i] = fileStamp{mtime: fi.ModTime().UnixNano(), size: fi.Size()}
		stamps[i].dev, stamps[i].ino = inode(fi)
	}
	return stamps, nil
}
