package maintenance

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Run polls at once and then every PollInterval and whenever a task finishes, until ctx
// ends. It runs each dispatched task's RunFunc in its own goroutine with a context that
// is cancelled at MaxHold, when the lease is lost, and when ctx ends; renews the lease
// every LeaseTTL/3 while a heavy task runs; and records every outcome with Complete. A
// panicking RunFunc is recorded as failed. Errors are logged to Config.Logger.
//
// When ctx ends Run stops polling, waits for the running tasks to return, records their
// outcomes and returns nil; ErrRunning if the scheduler is already running. A task that
// ignores its context keeps Run waiting, and while it runs this process starts no other
// heavy task — though once its lease lapses, other schedulers of the fleet do.
//
// Run is the one place in this package that reads a clock, and it reads only
// Config.Clock (nil: the real one): its now for Poll, Renew and Complete, the tickers for
// PollInterval and renewals, and the MaxHold timer. A task's context therefore carries no
// Deadline, and at MaxHold its Err is context.Canceled with a cause that wraps
// ErrHoldExceeded. For simulated time, pass a fake Clock, run Run with the real clock
// inside a testing/synctest bubble, or drive Poll, Renew and Complete with your own now.
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
		res, err := s.Poll(ctx, s.cfg.Clock.Now())
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.Error("maintenance: poll", "err", err)
		}
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

// runOne runs t to its end, renewing the lease if t is heavy, and records the outcome.
func (s *Scheduler) runOne(ctx context.Context, t Task) {
	clock := s.cfg.Clock
	tctx, cancelCause := context.WithCancelCause(ctx)
	cancel := func() { cancelCause(nil) }
	defer cancel()
	holdErr := fmt.Errorf("maintenance: task %q: %w", t.Name, ErrHoldExceeded)
	stopHold := clock.AfterFunc(s.cfg.MaxHold, func() { cancelCause(holdErr) })
	defer stopHold()
	stopRenew := make(chan struct{})
	renewDone := make(chan struct{})
	if t.Class == Heavy {
		go func() {
			defer close(renewDone)
			ticks, stopTicker := clock.NewTicker(max(s.cfg.LeaseTTL/3, time.Millisecond))
			defer stopTicker()
			for {
				select {
				case <-stopRenew:
					return
				case <-tctx.Done():
					return
				case <-ticks:
					if err := s.Renew(context.WithoutCancel(ctx), clock.Now()); err != nil {
						s.cfg.Logger.Warn("maintenance: lease lost, cancelling task", "task", t.Name, "err", err)
						cancel()
						return
					}
				}
			}
		}()
	} else {
		close(renewDone)
	}
	err := runSafely(tctx, t)
	close(stopRenew)
	<-renewDone
	if err == nil && tctx.Err() != nil && ctx.Err() == nil {
		// The task returned nil after MaxHold or a lost lease: it was cut short all the same.
		err = context.Cause(tctx)
	}
	cerr := s.Complete(context.WithoutCancel(ctx), t.Name, err, clock.Now())
	s.mu.Lock()
	delete(s.local, t.Name)
	s.mu.Unlock()
	if cerr != nil {
		s.cfg.Logger.Error("maintenance: record outcome", "task", t.Name, "err", cerr)
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
