package clock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rotaworks/rota/internal/clock"
	"github.com/rotaworks/rota/internal/fakeclock"
)

var (
	t0       = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	errEnded = errors.New("ended")
)

// On the real clock the context carries its end as a Deadline and ends then with the
// cause.
func TestContextAtRealClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		at := time.Now().Add(time.Minute)
		ctx, cancel := clock.ContextAt(context.Background(), clock.Real, at, errEnded)
		defer cancel()
		if d, ok := ctx.Deadline(); !ok || !d.Equal(at) {
			t.Fatalf("Deadline = %v, %v; want %v", d, ok, at)
		}
		time.Sleep(time.Minute - time.Nanosecond)
		if ctx.Err() != nil {
			t.Fatalf("ended before its instant: %v", context.Cause(ctx))
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !errors.Is(context.Cause(ctx), errEnded) || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("at its instant: Err %v, Cause %v; want DeadlineExceeded and the cause", ctx.Err(), context.Cause(ctx))
		}
	})
}

// On any other clock the context has no Deadline and ends when that clock reaches the
// instant, by one timer of that clock, which cancel releases.
func TestContextAtOtherClock(t *testing.T) {
	fc := fakeclock.New(t0)
	ctx, cancel := clock.ContextAt(context.Background(), fc, t0.Add(time.Minute), errEnded)
	defer cancel()
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("a context on a fake clock has a Deadline")
	}
	if _, timers := fc.Live(); timers != 1 {
		t.Fatalf("%d timers pending, want 1", timers)
	}
	fc.Advance(time.Minute - time.Nanosecond)
	if ctx.Err() != nil {
		t.Fatalf("ended before its instant: %v", context.Cause(ctx))
	}
	fc.Advance(time.Nanosecond)
	if !errors.Is(context.Cause(ctx), errEnded) {
		t.Fatalf("at its instant: Cause %v, want the cause", context.Cause(ctx))
	}

	ctx, cancel = clock.ContextAt(context.Background(), fc, fc.Now().Add(time.Hour), errEnded)
	cancel()
	if _, timers := fc.Live(); timers != 0 || !errors.Is(context.Cause(ctx), context.Canceled) {
		t.Fatalf("after cancel: %d timers, Cause %v; want none and context.Canceled", timers, context.Cause(ctx))
	}

	ctx, cancel = clock.ContextAt(context.Background(), fc, fc.Now(), errEnded)
	defer cancel()
	if !errors.Is(context.Cause(ctx), errEnded) {
		t.Fatalf("an instant already reached: Cause %v, want the cause at once", context.Cause(ctx))
	}
}

// A parent's end ends the context, whichever the clock.
func TestContextAtParentEnds(t *testing.T) {
	for _, c := range []clock.Clock{clock.Real, fakeclock.New(t0)} {
		parent, stop := context.WithCancel(context.Background())
		ctx, cancel := clock.ContextAt(parent, c, c.Now().Add(time.Hour), errEnded)
		stop()
		if !errors.Is(context.Cause(ctx), context.Canceled) {
			t.Errorf("%T: Cause %v after the parent ended, want context.Canceled", c, context.Cause(ctx))
		}
		cancel()
	}
}

func TestSleep(t *testing.T) {
	fc := fakeclock.New(t0)
	done := make(chan bool)
	go func() { done <- clock.Sleep(context.Background(), fc, time.Second) }()
	fc.Wait(0, 1)
	fc.Advance(time.Second)
	if !<-done {
		t.Fatal("Sleep reported false after its time passed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- clock.Sleep(ctx, fc, time.Second) }()
	fc.Wait(0, 1)
	cancel()
	if <-done {
		t.Fatal("Sleep reported true after ctx ended")
	}
	fc.Wait(0, 0) // its timer is stopped
}

func TestRealIsTheTimePackage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := clock.Real.Now()
		ticks, stop := clock.Real.NewTicker(time.Second)
		defer stop()
		fired := make(chan time.Time, 1)
		clock.Real.AfterFunc(1500*time.Millisecond, func() { fired <- time.Now() })
		if got := (<-ticks).Sub(start); got != time.Second {
			t.Errorf("the first tick after %v, want 1s", got)
		}
		if got := (<-fired).Sub(start); got != 1500*time.Millisecond {
			t.Errorf("AfterFunc ran after %v, want 1.5s", got)
		}
		if stopped := clock.Real.AfterFunc(time.Hour, func() {})(); !stopped {
			t.Error("stopping a pending AfterFunc reported false")
		}
	})
}
