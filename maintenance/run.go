package maintenance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rotaworks/rota/internal/clock"
)

// Run polls at once and then every PollInterval and whenever a task ends, until ctx ends.
// It runs each dispatched task's RunFunc in its own goroutine, records every outcome with
// Complete (a panic is a failure) and logs errors to Config.Logger.
//
// A task runs exactly as long as its claim covers it, and at most MaxHold: Run extends the
// claim every LeaseTTL/3 — a heavy task's by renewing its grant first, each renewal
// bounded by the time left on it — retries a failed extension with a short backoff until
// the claim would lapse, and cancels the task's context when the claim lapses unextended,
// when the grant or the claim is lost, at MaxHold, or when ctx ends. The context's cause
// then wraps ErrNotHolder or ErrHoldExceeded. A task that ignores its context keeps Run
// waiting, and while it runs this process starts no other heavy task; other schedulers
// of the fleet do once its claim lapses.
//
// A failed write of an outcome is retried with the same backoff until the run's claim
// would lapse — at most LeaseTTL after the run ended — and then given up with one Error
// line: the flag lapses on its own and the task is runnable again.
//
// When ctx ends Run stops polling (a poll the end cuts short starts nothing and is not
// reported), waits for the running tasks to return, records their outcomes and returns
// nil; it returns an error if the scheduler is already running.
//
// Run reads time only from Config.Clock, so a test drives it with a fake Clock or with the
// real one inside a testing/synctest bubble. A task's context has no Deadline: on a fake
// clock one would be meaningless.
func (s *Scheduler) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.runActive {
		s.mu.Unlock()
		return errRunning
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
		if ctx.Err() != nil {
			for _, c := range res.Dispatched() {
				s.abandon(context.WithoutCancel(ctx), c.Task.Name)
			}
			return
		}
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

// runOne runs t to its end, keeping its claim (and a heavy task's lease), and records the
// outcome.
func (s *Scheduler) runOne(ctx context.Context, t Task) {
	clk := s.cfg.Clock
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	holdErr := fmt.Errorf("%w: task %q ran for MaxHold %v", ErrHoldExceeded, t.Name, s.cfg.MaxHold)
	stopHold := clk.AfterFunc(s.cfg.MaxHold, func() { cancel(holdErr) })
	defer stopHold()
	kctx, stopKeeper := context.WithCancel(tctx)
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		s.keep(kctx, t.Name, cancel)
	}()
	err := runSafely(tctx, t)
	cut := tctx.Err() != nil
	stopKeeper()
	<-kept
	if err == nil && cut && ctx.Err() == nil {
		// The task returned nil after MaxHold or a lost claim: it was cut short all the same.
		err = context.Cause(tctx)
	}
	s.record(ctx, t.Name, err)
	s.mu.Lock()
	delete(s.local, t.Name)
	s.mu.Unlock()
}

// record completes the run of task name that ended with runErr, retrying a failure that
// a retry may cure, with a backoff on the Clock, until the run's claim would lapse or ctx
// ends; then it gives the run up (see abandon). It logs one line per failed attempt.
func (s *Scheduler) record(ctx context.Context, name string, runErr error) {
	wctx := context.WithoutCancel(ctx)
	clk := s.cfg.Clock
	wait := max(s.cfg.LeaseTTL/64, time.Millisecond)
	for {
		err := s.Complete(wctx, name, runErr, clk.Now())
		switch {
		case err == nil:
			return
		case errors.Is(err, ErrNotHolder) || errors.Is(err, ErrStaleToken):
			s.cfg.Logger.Warn("maintenance: outcome not recorded: the run's claim was lost", "task", name, "error", err)
			return
		case final(err):
			s.cfg.Logger.Error("maintenance: record outcome", "task", name, "error", err)
			return
		}
		s.mu.Lock()
		until := s.runs[name].run.until
		s.mu.Unlock()
		left := until.Sub(clk.Now())
		if left <= 0 || ctx.Err() != nil {
			s.abandon(wctx, name)
			s.cfg.Logger.Error("maintenance: record outcome: giving up; the task's claim lapses on its own",
				"task", name, "error", err, "lapses_at", until)
			return
		}
		s.cfg.Logger.Warn("maintenance: recording the outcome failed, retrying", "task", name, "error", err)
		clock.Sleep(ctx, clk, min(wait, left))
		wait = min(2*wait, max(s.cfg.LeaseTTL/8, time.Millisecond))
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

// keep keeps the claim of the run of task name — and a heavy run's grant — until ctx
// ends: every LeaseTTL/3 it renews the grant, then extends the claim, and it cancels the
// task (cancel) when the claim lapses unextended — a timer on the Clock at its end,
// re-armed on every extension — or when the grant or the claim is lost.
func (s *Scheduler) keep(ctx context.Context, name string, cancel context.CancelCauseFunc) {
	s.mu.Lock()
	tr, ok := s.runs[name]
	s.mu.Unlock()
	if !ok { // no claim covers the task: it must not run
		cancel(fmt.Errorf("%w: task %q has no claim", ErrNotHolder, name))
		return
	}
	disarm := s.armExpiry(name, tr, cancel)
	defer func() { disarm() }()
	ticks, stopTicker := s.cfg.Clock.NewTicker(max(s.cfg.LeaseTTL/3, time.Millisecond))
	defer stopTicker()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		ntr, err := s.keepOnce(ctx, name, tr)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.cfg.Logger.Warn("maintenance: lease or claim lost, cancelling task", "task", name, "error", err)
			cancel(err)
			return
		}
		disarm()
		tr, disarm = ntr, s.armExpiry(name, ntr, cancel)
	}
}

// keepOnce renews a heavy run's grant, retrying until it expires, then extends the run's
// claim, retrying until it lapses.
func (s *Scheduler) keepOnce(ctx context.Context, name string, tr taskRun) (taskRun, error) {
	if tr.run.class == Heavy {
		g := tr.grant
		err := s.retry(ctx, g.ExpiresAt, grantExpired(name, g), func(ctx context.Context, now time.Time) error {
			ng, err := s.renewGrant(ctx, name, g, now)
			tr.grant = ng
			return err
		}, "maintenance: renewing the lease failed, retrying until it expires", "task", name, "expires_at", g.ExpiresAt)
		if err != nil {
			return tr, err
		}
	}
	r := tr.run
	err := s.retry(ctx, r.until, claimExpired(r), func(ctx context.Context, now time.Time) error {
		ntr, err := s.extendClaim(ctx, name, tr, now)
		tr.run = ntr.run
		return err
	}, "maintenance: extending the task's claim failed, retrying until it lapses", "task", name, "lapses_at", r.until)
	return tr, err
}

// armExpiry arranges for the task name to be cancelled when the claim of tr lapses,
// unless an extension has moved it past that instant by then. It returns the timer's
// stop.
func (s *Scheduler) armExpiry(name string, tr taskRun, cancel context.CancelCauseFunc) func() bool {
	clk := s.cfg.Clock
	at, start := tr.run.until, tr.run.since
	cause := fmt.Errorf("%w: task %q: claim lapsed at %v unextended", ErrNotHolder, name, at)
	if tr.run.class == Heavy {
		start = tr.grant.AcquiredAt
		cause = fmt.Errorf("%w: task %q: lease grant %d expired at %v unrenewed", ErrNotHolder, name, tr.grant.Token, at)
	}
	if !at.Before(start.Add(s.cfg.MaxHold)) {
		cause = fmt.Errorf("%w: task %q: its claim reached MaxHold %v", ErrHoldExceeded, name, s.cfg.MaxHold)
	}
	expire := func() {
		s.mu.Lock()
		cur, ok := s.runs[name]
		s.mu.Unlock()
		if ok && cur.run.since.Equal(tr.run.since) && cur.run.until.After(clk.Now()) {
			return // extended meanwhile; the extension re-arms
		}
		cancel(cause)
	}
	left := at.Sub(clk.Now())
	if left <= 0 {
		expire()
		return func() bool { return false }
	}
	return clk.AfterFunc(left, expire)
}

// retry calls op until it succeeds or fails for good (see final), retrying any other
// failure with a backoff on the Clock — LeaseTTL/64, doubling up to LeaseTTL/8 — and a
// Warn line (msg and attrs) until deadline, then returning lapsed; or until ctx ends. op's
// context ends at deadline on the Clock (on the real clock it carries it as its
// Deadline), as does ctx, which the expiry timer cancels (see armExpiry).
func (s *Scheduler) retry(ctx context.Context, deadline time.Time, lapsed error, op func(ctx context.Context, now time.Time) error, msg string, attrs ...any) error {
	clk := s.cfg.Clock
	rctx, cancel := clock.ContextAt(ctx, clk, deadline, lapsed)
	defer cancel()
	wait := max(s.cfg.LeaseTTL/64, time.Millisecond)
	for {
		err := op(rctx, clk.Now())
		switch {
		case err == nil || final(err):
			return err
		case ctx.Err() != nil:
			return err
		case rctx.Err() != nil:
			return lapsed
		}
		s.cfg.Logger.Warn(msg, append(attrs, "error", err)...)
		if !clock.Sleep(rctx, clk, min(wait, max(deadline.Sub(clk.Now()), time.Nanosecond))) {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return lapsed
		}
		wait = min(2*wait, max(s.cfg.LeaseTTL/8, time.Millisecond))
	}
}
