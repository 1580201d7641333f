package maintenance_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rotaworks/rota/internal/fakeclock"
	"github.com/rotaworks/rota/maintenance"
)

// Config.Clock takes the fake clock bridge.Clock takes.
var _ = maintenance.Config{Clock: (*fakeclock.Clock)(nil)}

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
	clk := fakeclock.New(start)

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
		Clock: clk, Observer: observerFunc(func(r maintenance.PollReport) { polls <- r }),
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	if r := <-polls; !r.Now.Equal(start) || heavyName(r.Result) != "summary" || r.Err != nil {
		t.Fatalf("rule: Run polls at once, at the clock's now: %v, winner %q, err %v", r.Now, heavyName(r.Result), r.Err)
	}
	if at := <-started; !at.Equal(start) {
		t.Fatalf("summary started at %v", at)
	}
	clk.Wait(2, 2) // Run's poll ticker, the task's renewal ticker, its MaxHold and expiry timers

	for m := 1; m < 50; m++ {
		clk.Advance(time.Minute)
		now := start.Add(time.Duration(m) * time.Minute)
		if m%6 == 0 {
			if r := <-polls; !r.Now.Equal(now) || r.Err != nil || heavyName(r.Result) != "" {
				t.Fatalf("rule: one poll per tick, at the tick's now: at %v got poll at %v (winner %q, err %v)", now, r.Now, heavyName(r.Result), r.Err)
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
	if tk, tm := clk.Live(); tk != 1 || tm != 0 {
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
	if tk, tm := clk.Live(); tk != 0 || tm != 0 {
		t.Fatalf("rule: a stopped Run leaves no ticker or timer behind: %d tickers, %d timers live", tk, tm)
	}
	if len(polls) != 0 || len(lease.renewals) != 0 {
		t.Fatalf("rule: no poll or renewal but on a tick or a task's end: %d polls, %d renewals extra", len(polls), len(lease.renewals))
	}
}
