// Package fakeclock provides a Clock that tests step by hand, so code that polls on a
// ticker or waits on a timer can be tested without sleeping.
//
// A Clock starts at the instant given to New and moves only when Advance is called.
// Advance fires every ticker and timer due on the way in time order, at its own instant:
// a tick is sent as that instant, and a timer's function runs before Advance moves on.
// Wait blocks until the code under test has started the tickers and timers a test
// expects, which is how a test knows that a goroutine has reached its select before it
// advances the clock.
//
// A *Clock is the one Clock rota's loops take (internal/clock: bridge.Clock and
// maintenance.Config.Clock): Now, NewTicker and AfterFunc.
package fakeclock

import (
	"sync"
	"time"

	"github.com/rotaworks/rota/internal/clock"
)

// Clock is a manual clock. The zero value is not usable; call New. Safe for concurrent
// use.
type Clock struct {
	adv sync.Mutex // serializes Advance

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever a ticker or timer starts, stops or fires
	now     time.Time
	seq     uint64 // registration order: the tie-break between events due at one instant
	events  []*event
}

// event is a ticker (every > 0) or a one-shot timer.
type event struct {
	seq   uint64
	at    time.Time // next tick or the timer's instant
	every time.Duration
	c     chan time.Time
	f     func()
	done  bool // stopped, or a timer that fired
}

var _ clock.Clock = (*Clock)(nil)

// New returns a Clock reading now.
func New(now time.Time) *Clock {
	return &Clock{now: now, changed: make(chan struct{})}
}

// Now returns the clock's current instant.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTicker returns a channel that receives the clock's instant every d of advanced time,
// and a function that stops the ticker. Like time.Ticker, the channel holds one tick and
// drops later ones while it is unread. It panics if d ≤ 0.
func (c *Clock) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	if d <= 0 {
		panic("fakeclock: NewTicker: non-positive interval")
	}
	ch := make(chan time.Time, 1)
	e := c.add(&event{every: d, c: ch}, d)
	return ch, func() { c.stop(e) }
}

// AfterFunc arranges for f to be called once the clock has advanced by d, and returns a
// function that cancels the call and reports whether it did, like time.Timer.Stop. f runs
// in the goroutine that calls Advance, which waits for it to return. For d ≤ 0, as with
// time.AfterFunc, f is called at once in a goroutine of its own.
func (c *Clock) AfterFunc(d time.Duration, f func()) func() bool {
	if d <= 0 {
		go f()
		return func() bool { return false }
	}
	e := c.add(&event{f: f}, d)
	return func() bool { return c.stop(e) }
}

// add registers e, first due d from now.
func (c *Clock) add(e *event, d time.Duration) *event {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	e.seq, e.at = c.seq, c.now.Add(d)
	c.events = append(c.events, e)
	c.notify()
	return e
}

// stop ends e and reports whether it was still pending.
func (c *Clock) stop(e *event) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.done {
		return false
	}
	e.done = true
	c.prune()
	c.notify()
	return true
}

// Advance moves the clock forward by d. On the way it stops at every instant a ticker or
// timer is due, in time order (registration order at one instant): it sends a tick, or
// calls a timer's function and waits for it. Tickers and timers started by those
// functions fire within the same Advance if they fall due before its end. Calls of
// Advance are serialized.
func (c *Clock) Advance(d time.Duration) {
	c.adv.Lock()
	defer c.adv.Unlock()
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		e := c.next(end)
		if e == nil {
			break
		}
		c.now = e.at
		if e.every > 0 {
			select {
			case e.c <- e.at:
			default: // the previous tick is unread: drop this one
			}
			e.at = e.at.Add(e.every)
			c.notify()
			continue
		}
		e.done = true
		c.prune()
		c.notify()
		c.mu.Unlock()
		e.f()
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
}

// next returns the earliest pending event due at or before end, nil if none.
func (c *Clock) next(end time.Time) *event {
	var first *event
	for _, e := range c.events {
		if e.done || e.at.After(end) {
			continue
		}
		if first == nil || e.at.Before(first.at) || (e.at.Equal(first.at) && e.seq < first.seq) {
			first = e
		}
	}
	return first
}

// prune drops finished events.
func (c *Clock) prune() {
	live := c.events[:0]
	for _, e := range c.events {
		if !e.done {
			live = append(live, e)
		}
	}
	clear(c.events[len(live):])
	c.events = live
}

func (c *Clock) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Live returns how many tickers run and how many timers are pending.
func (c *Clock) Live() (tickers, timers int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live()
}

func (c *Clock) live() (tickers, timers int) {
	for _, e := range c.events {
		switch {
		case e.done:
		case e.every > 0:
			tickers++
		default:
			timers++
		}
	}
	return tickers, timers
}

// Wait blocks until exactly tickers tickers run and timers timers are pending: the way a
// test learns that the code under test has started (or stopped) them before it calls
// Advance.
func (c *Clock) Wait(tickers, timers int) {
	for {
		c.mu.Lock()
		tk, tm := c.live()
		changed := c.changed
		c.mu.Unlock()
		if tk == tickers && tm == timers {
			return
		}
		<-changed
	}
}
