package bridge

import "time"

// Clock is where the Runner reads time: its cycles' now, its ticker, and the timers that
// end items, flush completions and bound a stop. Nil in RunnerConfig means the time
// package; a test passes a fake it steps by hand (Clock has the method set of
// maintenance.Clock, so one fake serves both) or runs the Runner in a testing/synctest
// bubble.
type Clock interface {
	// Now is time.Now.
	Now() time.Time
	// NewTicker is time.NewTicker: c receives the time every d, dropping ticks a slow
	// reader misses, until stop is called.
	NewTicker(d time.Duration) (c <-chan time.Time, stop func())
	// AfterFunc is time.AfterFunc: f runs in its own goroutine once d has passed, unless
	// stop, which reports whether it prevented that, is called first.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// realClock is the time package.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

func (realClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
