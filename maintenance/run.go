package maintenance

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Run polls at once and then every PollInterval and whenever a task ends, until ctx ends.
// It runs each dispatched task's RunFunc in its own goroutine, records every outcome with
// Complete (a panic is a failure) and logs errors to Config.Logger.
//
// A heavy task runs exactly as long as a live grant covers it, and at most MaxHold: Run
// renews the grant every LeaseTTL/3, each renewal bounded by the time left on the grant;
// retries a failed renewal with a short backoff until the grant expires; and cancels the
// task's context when the grant expires unrenewed, when the lease is lost, at MaxHold,
// or when ctx ends. The context's cause then wraps ErrNotHolder or ErrHoldExceeded. A
// task that ignores its context keeps Run waiting, and while it runs this process starts
// no other heavy task; other schedulers of the fleet do once its grant lapses.
//
// When ctx ends Run stops polling, waits for the running tasks to return, records their
// outcomes and returns nil; it returns ErrRunning if the scheduler is already running.
//
// Run reads time only from Config.Clock, so a test drives it with a fake Clock or with the
// real one inside a testing/synctest bubble. A task's context has no Deadline: on a fake
// clock one would be meaningless.
func (s *Scheduler) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.runActive {
		s.mu.Unlock()
		return ErrRunning
	}
	s.runActive = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.runActive = false
		s.mu.Unlock()
	}()

	active := 0
	ticks, stopTicker := s.cfg.Clock.NewTicker(s.cfg.PollInterval)
	defer stopTicker()
	outcome := make(chan struct{})
	poll := func() {
		now := s.cfg.Clock.Now()
		res, err := s.poll(ctx, now)
		s.report(now, res, err) // the poll's one log line carries its error
		for _, c := range res.Dispatched() {
			s.mu.Lock()
			s.local[c.Task.Name] = true
			s.mu.Unlock()
			active++
			go func() {
				s.runOne(ctx, c.Task)
				outcome <- struct{}{}
			}()
		}
	}
	poll()
	for {
		select {
		case <-ctx.Done():
			for ; active > 0; active-- {
				<-outcome
			}
			return nil
		case <-ticks:
			poll()
		case <-outcome:
			active--
			poll()
		}
	}
}

// runOne runs t to its end, keeping the lease if t is heavy, and records the outcome.
func (s *Scheduler) runOne(ctx context.Context, t Task) {
	clock := s.cfg.Clock
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	holdErr := fmt.Errorf("%w: task %q ran for MaxHold %v", ErrHoldExceeded, t.Name, s.cfg.MaxHold)
	stopHold := clock.AfterFunc(s.cfg.MaxHold, func() { cancel(holdErr) })
	defer stopHold()
	kctx, stopKeeper := context.WithCancel(tctx)
	kept := make(chan struct{})
	if t.Class == Heavy {
		go func() {
			defer close(kept)
			s.keepLease(kctx, t.Name, cancel)
		}()
	} else {
		close(kept)
	}
	err := runSafely(tctx, t)
	cut := tctx.Err() != nil
	stopKeeper()
	<-kept
	if err == nil && cut && ctx.Err() == nil {
		// The task returned nil after MaxHold or a lost lease: it was cut short all the same.
		err = context.Cause(tctx)
	}
	cerr := s.Complete(context.WithoutCancel(ctx), t.Name, err, clock.Now())
	s.mu.Lock()
	delete(s.local, t.Name)
	s.mu.Unlock()
	if cerr != nil {
		s.cfg.Logger.Error("maintenance: record outcome", "task", t.Name, "error", cerr)
	}
}

func runSafely(ctx context.Context, t Task) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("maintenance: task %q panicked: %v", t.Name, r)
		}
	}()
	err = t.Run(ctx)
	if err != nil && ctx.Err() != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		// Report a run cut short as cancelled even if the task wrapped the cause away.
		err = fmt.Errorf("%w (%w)", context.Cause(ctx), err)
	}
	return err
}

// keepLease keeps the grant of the heavy task name until ctx ends: it renews the grant
// every LeaseTTL/3 and cancels the task (cancel) when the grant expires unrenewed — a
// timer on the Clock at ExpiresAt, re-armed on every renewal — or is lost.
func (s *Scheduler) keepLease(ctx context.Context, name string, cancel context.CancelCauseFunc) {
	s.mu.Lock()
	g, ok := s.grants[name]
	s.mu.Unlock()
	if !ok { // no grant covers the task: it must not run
		cancel(fmt.Errorf("%w: task %q has no lease grant", ErrNotHolder, name))
		return
	}
	disarm := s.armExpiry(name, g, cancel)
	defer func() { disarm() }()
	ticks, stopTicker := s.cfg.Clock.NewTicker(max(s.cfg.LeaseTTL/3, time.Millisecond))
	defer stopTicker()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		ng, err := s.renewUntilExpiry(ctx, name, g)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.cfg.Logger.Warn("maintenance: lease lost, cancelling task", "task", name, "error", err)
			cancel(err)
			return
		}
		disarm()
		g, disarm = ng, s.armExpiry(name, ng, cancel)
	}
}

// armExpiry arranges for the task name to be cancelled when g expires, unless a renewal
// has moved the task's grant past that instant by then. It returns the timer's stop.
func (s *Scheduler) armExpiry(name string, g Grant, cancel context.CancelCauseFunc) func() bool {
	clock := s.cfg.Clock
	cause := fmt.Errorf("%w: task %q: lease grant %d expired at %v unrenewed", ErrNotHolder, name, g.Token, g.ExpiresAt)
	if !g.ExpiresAt.Before(g.AcquiredAt.Add(s.cfg.MaxHold)) {
		cause = fmt.Errorf("%w: task %q: lease grant %d reached MaxHold %v", ErrHoldExceeded, name, g.Token, s.cfg.MaxHold)
	}
	expire := func() {
		s.mu.Lock()
		cur := s.grants[name]
		s.mu.Unlock()
		if cur.Token == g.Token && cur.ExpiresAt.After(clock.Now()) {
			return // renewed meanwhile; the renewal re-arms
		}
		cancel(cause)
	}
	left := g.ExpiresAt.Sub(clock.Now())
	if left <= 0 {
		expire()
		return func() bool { return false }
	}
	return clock.AfterFunc(left, expire)
}

// renewUntilExpiry renews g, retrying a failure other than ErrNotHolder, ErrHoldExceeded
// or ErrInvalid with a backoff on the Clock (LeaseTTL/64 doubling up to LeaseTTL/8) until
// g expires or ctx ends. On the real clock the calls' context has its deadline at g's
// expiry; on any Clock the expiry timer cancels ctx (see armExpiry).
func (s *Scheduler) renewUntilExpiry(ctx context.Context, name string, g Grant) (Grant, error) {
	clock := s.cfg.Clock
	rctx := ctx
	if _, real := clock.(realClock); real {
		var cancel context.CancelFunc
		rctx, cancel = context.WithDeadline(ctx, g.ExpiresAt)
		defer cancel()
	}
	expired := grantExpired(name, g)
	wait := max(s.cfg.LeaseTTL/64, time.Millisecond)
	for {
		ng, err := s.renewGrant(rctx, name, g, clock.Now())
		switch {
		case err == nil || errors.Is(err, ErrNotHolder) || errors.Is(err, ErrHoldExceeded) || errors.Is(err, ErrInvalid):
			return ng, err
		case ctx.Err() != nil:
			return g, err
		case rctx.Err() != nil:
			return g, expired
		}
		s.cfg.Logger.Warn("maintenance: renewing the lease failed, retrying until it expires",
			"task", name, "error", err, "expires_at", g.ExpiresAt)
		if !s.sleep(rctx, min(wait, max(g.ExpiresAt.Sub(clock.Now()), time.Nanosecond))) {
			if ctx.Err() != nil {
				return g, context.Cause(ctx)
			}
			return g, expired
		}
		wait = min(2*wait, max(s.cfg.LeaseTTL/8, time.Millisecond))
	}
}

// sleep waits d on the Clock and reports whether it did before ctx ended.
func (s *Scheduler) sleep(ctx context.Context, d time.Duration) bool {
	done := make(chan struct{})
	stop := s.cfg.Clock.AfterFunc(d, func() { close(done) })
	defer stop()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}
