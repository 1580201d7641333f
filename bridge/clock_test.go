package bridge_test

import (
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
)

// fakeClock is a bridge.Clock that moves only when Advance is called. A ticker is a
// timer that re-arms itself and drops a tick its reader has not taken; an AfterFunc
// calls its f in a goroutine.
type fakeClock struct {
	mu      sync.Mutex
	changed *sync.Cond // broadcast when a timer is armed, fires or is stopped
	now     time.Time
	timers  []*fakeTimer
}

type fakeTimer struct {
	at    time.Time
	every time.Duration // > 0 for a ticker
	fire  func(now time.Time)
	off   bool
}

var _ bridge.Clock = (*fakeClock)(nil)

func newFakeClock(now time.Time) *fakeClock {
	c := &fakeClock{now: now}
	c.changed = sync.NewCond(&c.mu)
	return c
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// arm adds a timer at now+d and returns the function that stops it.
func (c *fakeClock) arm(d, every time.Duration, fire func(time.Time)) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	tm := &fakeTimer{at: c.now.Add(d), every: every, fire: fire}
	c.timers = append(c.timers, tm)
	c.changed.Broadcast()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !tm.off
		tm.off = true
		c.changed.Broadcast()
		return was
	}
}

func (c *fakeClock) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	ch := make(chan time.Time, 1)
	stop := c.arm(d, d, func(now time.Time) {
		select {
		case ch <- now:
		default:
		}
	})
	return ch, func() { stop() }
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	return c.arm(d, 0, func(time.Time) { go f() })
}

// Advance moves the clock forward by d, stopping at each instant a timer is due on the
// way to fire it there.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	end := c.now.Add(d)
	for {
		var next *fakeTimer
		for _, tm := range c.timers {
			if !tm.off && !tm.at.After(end) && (next == nil || tm.at.Before(next.at)) {
				next = tm
			}
		}
		if next == nil {
			break
		}
		c.now = next.at
		next.fire(c.now)
		if next.every > 0 {
			next.at = next.at.Add(next.every)
		} else {
			next.off = true
		}
		c.changed.Broadcast()
	}
	c.now = end
}

// liveNow returns the number of running tickers and of pending timers.
func (c *fakeClock) liveNow() (tickers, timers int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tm := range c.timers {
		switch {
		case tm.off:
		case tm.every > 0:
			tickers++
		default:
			timers++
		}
	}
	return tickers, timers
}

// waitTimerAt blocks until a timer is pending that fires at exactly at, and fails the
// test if none is within ten seconds of real time.
func (c *fakeClock) waitTimerAt(t testing.TB, at time.Time) {
	t.Helper()
	expired := false
	bound := time.AfterFunc(10*time.Second, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		expired = true
		c.changed.Broadcast()
	})
	defer bound.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for !expired {
		for _, tm := range c.timers {
			if !tm.off && tm.every == 0 && tm.at.Equal(at) {
				return
			}
		}
		c.changed.Wait()
	}
	t.Fatalf("no timer set for %v", at)
}
