package maintenance

import "time"

// Clock is Run's only source of time: the narrowest interface its loop needs. A nil
// Config.Clock means the real one; tests pass a fake or run Run inside a testing/synctest
// bubble with the real one. Poll, Renew and Complete take now and never read a clock.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTicker returns a channel that receives a value every d, and a function that
	// stops the ticker. Like time.Ticker, it drops ticks for a slow receiver.
	NewTicker(d time.Duration) (c <-chan time.Time, stop func())
	// AfterFunc calls f in its own goroutine once d has passed, unless stop is called
	// first; stop reports whether it prevented the call, like time.Timer.Stop.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// realClock is the Clock of a nil Config.Clock: the time package.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

func (realClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
