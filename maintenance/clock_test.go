package maintenance_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/maintenance"
)

// fakeClock is a maintenance.Clock stepped by hand with Advance. Its tickers drop a tick
// when the previous one is unread, like time.Ticker; its AfterFunc calls f in a goroutine.
type fakeClock struct {
	mu      sync.Mutex
	changed *sync.Cond // broadcast whenever a ticker or timer starts or stops
	now     time.Time
	tickers []*fakeTicker
	timers  []*fakeTimer
}

type fakeTicker struct {
	every   time.Duration
	next    time.Time
	c       chan time.Time
	stopped bool
}

type fakeTimer struct {
	at   time.Time
	f    func()
	done bool // fired or stopped
}

var _ maintenance.Clock = (*fakeClock)(nil)

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

func (c *fakeClock) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	if d <= 0 {
		panic("fakeClock: non-positive ticker interval")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	tk := &fakeTicker{every: d, next: c.now.Add(d), c: make(chan time.Time, 1)}
	c.tickers = append(c.tickers, tk)
	c.changed.Broadcast()
	return tk.c, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		tk.stopped = true
		c.changed.Broadcast()
	}
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	tm := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, tm)
	c.changed.Broadcast()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if tm.done {
			return false
		}
		tm.done = true
		c.changed.Broadcast()
		return true
	}
}

// Advance moves the clock forward by d, stopping at every instant a tick or timer is due
// on the way and firing it there.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	end := c.now.Add(d)
	for {
		at, due := end, false
		for _, tk := range c.tickers {
			if !tk.stopped && !tk.next.After(at) {
				at, due = tk.next, true
			}
		}
		for _, tm := range c.timers {
			if !tm.done && !tm.at.After(at) {
				at, due = tm.at, true
			}
		}
		if !due {
			break
		}
		c.now = at
		for _, tk := range c.tickers {
			if !tk.stopped && tk.next.Equal(at) {
				select {
				case tk.c <- at:
				default: // the previous tick is unread: drop this one
				}
				tk.next = at.Add(tk.every)
			}
		}
		for _, tm := range c.timers {
			if !tm.done && tm.at.Equal(at) {
				tm.done = true
				go tm.f()
			}
		}
		c.changed.Broadcast()
	}
	c.now = end
}

// live returns the number of running tickers and of pending timers.
func (c *fakeClock) live() (tickers, timers int) {
	for _, tk := range c.tickers {
		if !tk.stopped {
			tickers++
		}
	}
	for _, tm := range c.timers {
		if !tm.done {
			timers++
		}
	}
	return tickers, timers
}

// waitLive blocks until exactly tickers tickers run and timers timers are pending.
func (c *fakeClock) waitLive(tickers, timers int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if tk, tm := c.live(); tk == tickers && tm == timers {
			return
		}
		c.changed.Wait()
	}
}

func (c *fakeClock) liveNow() (tickers, timers int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live()
}

// renewal is one call of recordingLease.Renew.
type renewal struct {
	now time.Time
	err error
}

// recordingLease reports every Renew on a channel.
type recordingLease struct {
	maintenance.Lease
	renewals chan renewal
}

func (l recordingLease) Renew(ctx context.Context, g maintenance.Grant, ttl time.Duration, now time.Time) (maintenance.Grant, error) {
	g, err := l.Lease.Renew(ctx, g, ttl, now)
	l.renewals <- renewal{now, err}
	return g, err
}

// TestConfigClockDefault: a nil Config.Clock means the real clock; a given one is kept.
func TestConfigClockDefault(t *testing.T) {
	if c := newSched(t, nil, maintenance.Config{}).Config().Clock; c == nil {
		t.Fatal("rule: a nil Config.Clock is filled in with the real clock")
	}
	fake := newFakeClock(time.Time{})
	if c := newSched(t, nil, maintenance.Config{Clock: fake}).Config().Clock; c != fake {
		t.Fatalf("rule: a given Config.Clock is kept: got %T", c)
	}
}

// TestRunOnFakeClock drives Run entirely on a hand-stepped Config.Clock, without synctest:
// Run reads no time but the clock's. It polls at start and once per poll tick, renews the
// lease once per renew tick (LeaseTTL/3) with the clock's now, cancels the heavy task's
// context exactly when the clock reaches MaxHold (the cause wraps ErrHoldExceeded),
// records the outcome and polls at once, stops the task's ticker and timer, and on ctx end
// stops its own ticker and returns nil.
func TestRunOnFakeClock(t *testing.T) {
	const (
		maxHold  = 50 * time.Minute
		leaseTTL = 21 * time.Minute // renewals every 7 minutes, none at MaxHold
		pollIval = 6 * time.Minute  // no poll tick at MaxHold either
	)
	start := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	clk := newFakeClock(start)

	type cut struct {
		at         time.Time
		err, cause error
	}
	started := make(chan time.Time, 1)
	cancelled := make(chan cut, 1)
	summary := heavy("summary", day)
	summary.Run = func(ctx context.Context) error {
		started <- clk.Now()
		<-ctx.Done()
		cancelled <- cut{clk.Now(), ctx.Err(), context.Cause(ctx)}
		return context.Cause(ctx)
	}
	polls := make(chan maintenance.PollReport, 100)
	lease := recordingLease{maintenance.NewMemoryLease(maxHold), make(chan renewal, 100)}
	store := maintenance.NewMemoryStateStore()
	s := newSched(t, []maintenance.Task{summary}, maintenance.Config{
		Lease: lease, StateStore: store, MaxHold: maxHold, LeaseTTL: leaseTTL, PollInterval: pollIval,
		Clock: clk, Observer: maintenance.ObserverFunc(func(r maintenance.PollReport) { polls <- r }),
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	if r := <-polls; !r.Now.Equal(start) || r.HeavyWinner() != "summary" || r.Err != nil {
		t.Fatalf("rule: Run polls at once, at the clock's now: %v, winner %q, err %v", r.Now, r.HeavyWinner(), r.Err)
	}
	if at := <-started; !at.Equal(start) {
		t.Fatalf("summary started at %v", at)
	}
	clk.waitLive(2, 1) // Run's poll ticker, the task's renew ticker and its MaxHold timer

	for m := 1; m < 50; m++ {
		clk.Advance(time.Minute)
		now := start.Add(time.Duration(m) * time.Minute)
		if m%6 == 0 {
			if r := <-polls; !r.Now.Equal(now) || r.Err != nil || r.HeavyWinner() != "" {
				t.Fatalf("rule: one poll per tick, at the tick's now: at %v got poll at %v (winner %q, err %v)", now, r.Now, r.HeavyWinner(), r.Err)
			}
		}
		if m%7 == 0 {
			if r := <-lease.renewals; !r.now.Equal(now) || r.err != nil {
				t.Fatalf("rule: one renewal per renew tick, at the tick's now: at %v got renewal at %v (err %v)", now, r.now, r.err)
			}
		}
		select {
		case c := <-cancelled:
			t.Fatalf("rule: the task runs until MaxHold: cancelled at %v", c.at.Sub(start))
		default:
		}
	}
	if g, held, _ := lease.Current(bg, clk.Now()); !held || !g.AcquiredAt.Equal(start) || !g.ExpiresAt.Equal(start.Add(maxHold)) {
		// Unrenewed, the grant would have lapsed at LeaseTTL (21m); renewed, it runs to its cap.
		t.Fatalf("rule: the renewals keep the grant live up to MaxHold: %+v, held %v", g, held)
	}

	clk.Advance(time.Minute) // MaxHold
	c := <-cancelled
	if !c.at.Equal(start.Add(maxHold)) || !errors.Is(c.cause, maintenance.ErrHoldExceeded) || !errors.Is(c.err, context.Canceled) {
		t.Fatalf("rule: the task's context is cancelled when the clock reaches MaxHold, cause ErrHoldExceeded: at %v, err %v, cause %v",
			c.at.Sub(start), c.err, c.cause)
	}
	if r := <-polls; !r.Now.Equal(start.Add(maxHold)) || r.Err != nil || r.Result.Winner != nil {
		t.Fatalf("rule: Run polls as soon as the task ends: poll at %v, winner %v, err %v", r.Now.Sub(start), r.Result.Winner, r.Err)
	}
	st := stateOf(t, store, "summary")
	if st.Running || st.LastOutcome != maintenance.OutcomeCancelled || !st.LastRunAt.Equal(start) {
		t.Fatalf("rule: the cut-short run is recorded as cancelled: %+v", st)
	}
	if _, held, _ := lease.Current(bg, clk.Now()); held {
		t.Fatal("rule: the lease is released after the run")
	}
	if tk, tm := clk.liveNow(); tk != 1 || tm != 0 {
		t.Fatalf("rule: the ended task leaves no ticker or timer behind: %d tickers, %d timers live", tk, tm)
	}

	clk.Advance(4 * time.Minute)
	if r := <-polls; !r.Now.Equal(start.Add(54 * time.Minute)) {
		t.Fatalf("rule: polling goes on at each tick after the run: poll at %v", r.Now.Sub(start))
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v after a clean stop", err)
	}
	if tk, tm := clk.liveNow(); tk != 0 || tm != 0 {
		t.Fatalf("rule: a stopped Run leaves no ticker or timer behind: %d tickers, %d timers live", tk, tm)
	}
	if len(polls) != 0 || len(lease.renewals) != 0 {
		t.Fatalf("rule: no poll or renewal but on a tick or a task's end: %d polls, %d renewals extra", len(polls), len(lease.renewals))
	}
}
