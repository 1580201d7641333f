package maintenance_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/internal/fakeclock"
	"github.com/rotaworks/rota/maintenance"
)

// within fails t unless f returns within ten seconds of real time: the guard of a step
// that hangs when the scheduler breaks its promise.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still waiting after 10s", what)
	}
}

// hangingLease's Renew hangs, like a call on a connection that stopped forwarding, until
// its context ends.
type hangingLease struct {
	*maintenance.MemoryLease
	calls    chan time.Time // each Renew's now
	returned chan error     // each Renew's error
}

func (l *hangingLease) Renew(ctx context.Context, g maintenance.Grant, ttl time.Duration, now time.Time) (maintenance.Grant, error) {
	l.calls <- now
	<-ctx.Done()
	l.returned <- ctx.Err()
	return maintenance.Grant{}, ctx.Err()
}

// flakyLease's Renew fails with a transient error while fail > 0.
type flakyLease struct {
	*maintenance.MemoryLease
	calls chan time.Time
	mu    sync.Mutex
	fail  int
}

var errReset = errors.New("connection reset by peer")

func (l *flakyLease) Renew(ctx context.Context, g maintenance.Grant, ttl time.Duration, now time.Time) (maintenance.Grant, error) {
	l.calls <- now
	l.mu.Lock()
	fail := l.fail > 0
	l.fail--
	l.mu.Unlock()
	if fail {
		return maintenance.Grant{}, errReset
	}
	return l.MemoryLease.Renew(ctx, g, ttl, now)
}

// keepFixture runs one heavy task under Run on a fake clock: LeaseTTL 9m (renewals every
// 3m), MaxHold 1h, no poll tick within the test. The task runs until its context ends.
type keepFixture struct {
	clk     *fakeclock.Clock
	store   *maintenance.MemoryStateStore
	sched   *maintenance.Scheduler
	taskCtx context.Context
	polls   chan maintenance.PollReport
	stop    func()
}

const keepTTL = 9 * time.Minute

func startKeep(t *testing.T, lease maintenance.Lease, inner *maintenance.MemoryLease) *keepFixture {
	t.Helper()
	f := &keepFixture{clk: fakeclock.New(t0), store: maintenance.NewMemoryStateStore(), polls: make(chan maintenance.PollReport, 16)}
	f.store.FenceWith(inner)
	ctxs := make(chan context.Context, 1)
	task := heavy("reindex", day)
	task.Run = func(ctx context.Context) error {
		ctxs <- ctx
		<-ctx.Done()
		return context.Cause(ctx)
	}
	f.sched = newSched(t, []maintenance.Task{task}, maintenance.Config{
		Lease: lease, StateStore: f.store, LeaseTTL: keepTTL, MaxHold: time.Hour, PollInterval: 2 * time.Hour,
		Clock: f.clk, Observer: observerFunc(func(r maintenance.PollReport) { f.polls <- r }),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.sched.Run(ctx) }()
	f.stop = func() {
		cancel()
		within(t, "Run returns", func() {
			if err := <-done; err != nil {
				t.Errorf("Run = %v", err)
			}
		})
	}
	within(t, "the task starts", func() { f.taskCtx = <-ctxs })
	within(t, "Run starts its tickers and timers", func() { f.clk.Wait(2, 2) })
	return f
}

// A renewal that hangs — a connection that stops forwarding without a reset — cannot
// keep the task running past its grant: the task's context is cancelled when the clock
// reaches the grant's ExpiresAt, the hung call's context with it, and the hung call
// holds no lock a poll needs.
func TestRunStopsTaskAtExpiryWhenRenewalHangs(t *testing.T) {
	inner := maintenance.NewMemoryLease(time.Hour)
	lease := &hangingLease{MemoryLease: inner, calls: make(chan time.Time, 1), returned: make(chan error, 1)}
	f := startKeep(t, lease, inner)
	defer f.stop()
	expiry := t0.Add(keepTTL)

	f.clk.Advance(keepTTL / 3)
	within(t, "the renewal is sent", func() { <-lease.calls })
	var perr error
	within(t, "a poll beside the hung renewal", func() { _, perr = f.sched.Poll(bg, f.clk.Now()) })
	if perr != nil {
		t.Fatalf("poll beside the hung renewal: %v", perr)
	}
	f.clk.Advance(expiry.Sub(f.clk.Now()) - time.Nanosecond)
	if err := f.taskCtx.Err(); err != nil {
		t.Fatalf("the task was cancelled before its grant expired: %v", context.Cause(f.taskCtx))
	}
	f.clk.Advance(time.Nanosecond)
	if cause := context.Cause(f.taskCtx); !errors.Is(cause, maintenance.ErrNotHolder) {
		t.Fatalf("at the grant's ExpiresAt the task's context is cancelled with a cause wrapping ErrNotHolder: %v", cause)
	}
	within(t, "the hung renewal's context ends", func() {
		if err := <-lease.returned; err == nil {
			t.Error("the hung renewal returned no error")
		}
	})
	within(t, "Run polls once the task has ended", func() {
		for r := <-f.polls; !r.Now.Equal(expiry); r = <-f.polls {
		}
	})
	if st := stateOf(t, f.store, "reindex"); st.Running || st.LastOutcome != maintenance.OutcomeCancelled {
		t.Fatalf("the cut-short run is recorded as cancelled: %+v", st)
	}
	if g, err := inner.Acquire(bg, "other", keepTTL, expiry); err != nil || g.Holder != "other" {
		t.Fatalf("another holder acquires at the grant's expiry: %+v, %v", g, err)
	}
}

// One failed renewal does not cancel a task whose grant is still valid: Run retries after
// a short backoff on the Clock, and once a retry succeeds the task runs on past the
// expiry of the grant the failure would have let lapse.
func TestRunRetriesTransientRenewalError(t *testing.T) {
	inner := maintenance.NewMemoryLease(time.Hour)
	lease := &flakyLease{MemoryLease: inner, calls: make(chan time.Time, 100), fail: 1}
	f := startKeep(t, lease, inner)
	defer f.stop()

	f.clk.Advance(keepTTL / 3)
	within(t, "the first renewal is sent", func() { <-lease.calls })
	// Two tickers; four timers: MaxHold, the claim's expiry, the retries' deadline, the backoff.
	within(t, "the retry is scheduled on the clock", func() { f.clk.Wait(2, 4) })
	if err := f.taskCtx.Err(); err != nil {
		t.Fatalf("a transient renewal error cancelled the task: %v", context.Cause(f.taskCtx))
	}
	backoff := keepTTL / 64
	f.clk.Advance(backoff)
	within(t, "the retry is sent", func() {
		if at := <-lease.calls; !at.Equal(t0.Add(keepTTL/3 + backoff)) {
			t.Errorf("retry at %v, want after a backoff of %v", at.Sub(t0), backoff)
		}
	})
	f.clk.Advance(2*keepTTL/3 - f.clk.Now().Sub(t0))
	within(t, "the next renewal is sent: the retry was taken in", func() { <-lease.calls })
	f.clk.Advance(keepTTL/3 + time.Second) // past the first grant's expiry
	if err := f.taskCtx.Err(); err != nil {
		t.Fatalf("the task was cancelled although a renewal succeeded: %v", context.Cause(f.taskCtx))
	}
	if g, held, _ := inner.Current(bg, f.clk.Now()); !held || g.Holder != maintenance.DefaultHolder {
		t.Fatalf("the renewed grant is live: %+v, %v", g, held)
	}
}

// Renewals that keep failing are retried until the grant expires and no longer: the task
// is cancelled exactly at ExpiresAt.
func TestRunStopsTaskAtExpiryWhenRenewalsKeepFailing(t *testing.T) {
	inner := maintenance.NewMemoryLease(time.Hour)
	lease := &flakyLease{MemoryLease: inner, calls: make(chan time.Time, 1000), fail: 1 << 30}
	f := startKeep(t, lease, inner)
	defer f.stop()

	f.clk.Advance(keepTTL / 3)
	// Two tickers; four timers: MaxHold, the claim's expiry, the retries' deadline, the backoff.
	within(t, "the retry is scheduled on the clock", func() { f.clk.Wait(2, 4) })
	f.clk.Advance(keepTTL / 64)
	within(t, "the first renewal and its retry are sent", func() { <-lease.calls; <-lease.calls })
	f.clk.Advance(t0.Add(keepTTL).Sub(f.clk.Now()) - time.Nanosecond)
	if err := f.taskCtx.Err(); err != nil {
		t.Fatalf("failed renewals cancelled the task before its grant expired: %v", context.Cause(f.taskCtx))
	}
	f.clk.Advance(time.Nanosecond)
	if cause := context.Cause(f.taskCtx); !errors.Is(cause, maintenance.ErrNotHolder) {
		t.Fatalf("at ExpiresAt the task's context is cancelled with a cause wrapping ErrNotHolder: %v", cause)
	}
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a slog handler.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A poll of Run's that fails is one log line, at level Error, with the error under the
// key "error".
func TestRunLogsOneLinePerFailedPoll(t *testing.T) {
	clk := fakeclock.New(t0)
	var logs syncBuffer
	fs := &failingStore{MemoryStateStore: maintenance.NewMemoryStateStore(), failLoad: true}
	polls := make(chan maintenance.PollReport, 4)
	s := newSched(t, []maintenance.Task{heavy("reindex", day)}, maintenance.Config{
		StateStore: fs, Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Observer: observerFunc(func(r maintenance.PollReport) { polls <- r }),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	within(t, "the first poll", func() { <-polls })
	cancel()
	within(t, "Run returns", func() { <-done })
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `level=ERROR msg="maintenance: poll"`) ||
		!strings.Contains(lines[0], `error="maintenance: poll: load state: disk unavailable"`) {
		t.Fatalf("want one Error line with the error under \"error\", got %q", lines)
	}
}
