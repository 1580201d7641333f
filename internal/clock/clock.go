// Package clock is the one Clock of rota's loops — the interface bridge.Clock names and
// maintenance.Config.Clock spells out — with the real clock and the helpers whose behaviour depends on
// which clock they are given. Code that takes a Clock never asks which one it has: it
// calls these helpers, which give the real clock real deadlines and any other clock
// timers of its own.
package clock

import (
	"context"
	"time"
)

// Clock is where a loop reads time: the narrowest interface the Runner, Worker and Feeder
// of package bridge and the maintenance Scheduler need. Tests pass a fake they step by
// hand (internal/fakeclock) or run the real one in a testing/synctest bubble.
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

// Real is the time package, the Clock of every nil Clock field.
var Real Clock = realClock{}

// realClock is the time package.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

func (realClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// ContextAt returns a context under parent that ends with cause when c reads at. On the
// real clock it is context.WithDeadlineCause, so the context carries at as its Deadline
// and a database driver can pass it on; on any other clock it has no deadline and ends
// when c's timer fires, since a deadline would be meaningless on a clock that does not
// follow the wall. An at that c has reached ends it at once. Calling the returned
// function releases the timer and ends the context with context.Canceled, if it has not
// ended.
func ContextAt(parent context.Context, c Clock, at time.Time, cause error) (context.Context, context.CancelFunc) {
	if _, ok := c.(realClock); ok {
		return context.WithDeadlineCause(parent, at, cause)
	}
	ctx, cancel := context.WithCancelCause(parent)
	d := at.Sub(c.Now())
	if d <= 0 {
		cancel(cause)
		return ctx, func() {}
	}
	stop := c.AfterFunc(d, func() { cancel(cause) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}

// Sleep waits d on c and reports true, or false once ctx ends first.
func Sleep(ctx context.Context, c Clock, d time.Duration) bool {
	done := make(chan struct{})
	stop := c.AfterFunc(d, func() { close(done) })
	defer stop()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}
