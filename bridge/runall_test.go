package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rotaworks/rota/bridge"
)

// untilDone is a run that waits for its context and returns ret(ctx), counting its
// returns in stopped.
func untilDone(stopped *atomic.Int32, ret func(ctx context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		<-ctx.Done()
		stopped.Add(1)
		return ret(ctx)
	}
}

// startRunAll runs RunAll on its own goroutine and returns the channel its error arrives on.
func startRunAll(ctx context.Context, runs ...func(context.Context) error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- bridge.RunAll(ctx, runs...) }()
	return done
}

// runAllReturned reports whether RunAll has returned, once every goroutine of the bubble is
// blocked, and its error.
func runAllReturned(done <-chan error) (bool, error) {
	synctest.Wait()
	select {
	case err := <-done:
		return true, err
	default:
		return false, nil
	}
}

// When ctx ends every run stops, and RunAll returns nil once all have returned cleanly:
// nil, ctx's error, an error wrapping it, or ctx's cause.
func TestRunAllCleanStop(t *testing.T) {
	errCause := errors.New("SIGTERM")
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(context.Background())
		var stopped atomic.Int32
		done := startRunAll(ctx,
			untilDone(&stopped, func(context.Context) error { return nil }),
			untilDone(&stopped, func(ctx context.Context) error { return ctx.Err() }),
			untilDone(&stopped, func(ctx context.Context) error { return fmt.Errorf("runner: %w", ctx.Err()) }),
			untilDone(&stopped, context.Cause),
		)
		if ok, err := runAllReturned(done); ok {
			t.Fatalf("RunAll returned %v before ctx ended", err)
		}
		cancel(errCause)
		if ok, err := runAllReturned(done); !ok || err != nil {
			t.Fatalf("after ctx ended RunAll returned (%v, %v); want a clean stop, nil", ok, err)
		}
		if n := stopped.Load(); n != 4 {
			t.Errorf("%d runs returned before RunAll did, want 4", n)
		}
	})
}

// A deadline is an end of ctx like any other: runs that return context.DeadlineExceeded
// at it stop cleanly.
func TestRunAllDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var stopped atomic.Int32
		err := bridge.RunAll(ctx,
			untilDone(&stopped, func(ctx context.Context) error { return ctx.Err() }),
			untilDone(&stopped, func(ctx context.Context) error { return ctx.Err() }))
		if err != nil || stopped.Load() != 2 {
			t.Errorf("at the deadline RunAll = %v with %d runs stopped; want nil, 2", err, stopped.Load())
		}
	})
}

// A run that fails early cancels the others, with its failure as their context's cause;
// RunAll waits for them and returns every failure joined, the first first, each naming
// its run's index — a run that fails as it stops included, a clean stop left out.
func TestRunAllFailsEarly(t *testing.T) {
	errListen := errors.New("listen: connection refused")
	errStop := errors.New("shutdown timeout")
	synctest.Test(t, func(t *testing.T) {
		var stopped atomic.Int32
		var cause error
		listen := make(chan struct{})
		done := startRunAll(context.Background(),
			untilDone(&stopped, func(ctx context.Context) error { cause = context.Cause(ctx); return ctx.Err() }),
			func(context.Context) error { <-listen; return errListen },
			untilDone(&stopped, func(context.Context) error { return errStop }),
			untilDone(&stopped, context.Cause), // returns runs[1]'s failure: a clean stop
		)
		if ok, err := runAllReturned(done); ok {
			t.Fatalf("RunAll returned %v before any run did", err)
		}
		close(listen)
		ok, err := runAllReturned(done)
		if !ok {
			t.Fatal("RunAll did not return after a run failed")
		}
		if n := stopped.Load(); n != 3 {
			t.Errorf("%d of the 3 other runs stopped; want all", n)
		}
		if !errors.Is(err, errListen) || !errors.Is(err, errStop) {
			t.Fatalf("RunAll = %v; want both failures", err)
		}
		joined, _ := err.(interface{ Unwrap() []error })
		if joined == nil || len(joined.Unwrap()) != 2 {
			t.Fatalf("RunAll = %v; want two failures joined", err)
		}
		errs := joined.Unwrap()
		if !errors.Is(errs[0], errListen) || !strings.Contains(errs[0].Error(), "runs[1]") {
			t.Errorf("the first failure is %q; want runs[1]'s %q", errs[0], errListen)
		}
		if !errors.Is(errs[1], errStop) || !strings.Contains(errs[1].Error(), "runs[2]") {
			t.Errorf("the second failure is %q; want runs[2]'s %q", errs[1], errStop)
		}
		if !errors.Is(cause, errListen) {
			t.Errorf("the others' context ended with cause %v; want runs[1]'s failure", cause)
		}
	})
}

// A run that returns its context's error before ctx ends has failed: the error is its
// own, not a stop.
func TestRunAllOwnCancelIsAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stopped atomic.Int32
		err := bridge.RunAll(context.Background(),
			untilDone(&stopped, func(ctx context.Context) error { return ctx.Err() }),
			func(context.Context) error { return fmt.Errorf("dial: %w", context.Canceled) })
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "runs[1]: dial") || stopped.Load() != 1 {
			t.Errorf("RunAll = %v with %d stopped; want runs[1]'s dial error, the other stopped", err, stopped.Load())
		}
	})
}

// A run that fails as ctx ends, with an error of its own, fails: the stop is not clean.
func TestRunAllFailureAtStop(t *testing.T) {
	errStop := errors.New("items cut short")
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var stopped atomic.Int32
		done := startRunAll(ctx,
			untilDone(&stopped, func(context.Context) error { return errStop }),
			untilDone(&stopped, func(ctx context.Context) error { return ctx.Err() }))
		cancel()
		if ok, err := runAllReturned(done); !ok || !errors.Is(err, errStop) || strings.Contains(err.Error(), "canceled") {
			t.Errorf("RunAll = (%v, %v); want runs[0]'s failure alone", ok, err)
		}
	})
}

// A panic is recovered and returned as a failure naming the run's index and the value,
// and it stops the others; a panic with an error is seen through errors.Is.
func TestRunAllPanic(t *testing.T) {
	errBad := errors.New("bad state")
	for _, tc := range []struct {
		name  string
		value any
		want  string
	}{
		{"string", "kaput", "runs[1] panicked: kaput"},
		{"error", errBad, "runs[1] panicked: bad state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var stopped atomic.Int32
				err := bridge.RunAll(context.Background(),
					untilDone(&stopped, func(ctx context.Context) error { return ctx.Err() }),
					func(context.Context) error { panic(tc.value) },
					untilDone(&stopped, func(context.Context) error { return nil }))
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("RunAll = %v; want %q", err, tc.want)
				}
				if stopped.Load() != 2 {
					t.Errorf("%d of the 2 other runs stopped after the panic", stopped.Load())
				}
				if _, isErr := tc.value.(error); isErr != errors.Is(err, errBad) {
					t.Errorf("errors.Is(RunAll's error, the panic's error) = %v, want %v", !isErr, isErr)
				}
			})
		})
	}
}

// A run that calls runtime.Goexit (t.FailNow in a test's helper) fails like a panic
// instead of leaving RunAll waiting.
func TestRunAllGoexit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stopped atomic.Int32
		err := bridge.RunAll(context.Background(),
			func(context.Context) error { runtime.Goexit(); return nil },
			untilDone(&stopped, func(ctx context.Context) error { return ctx.Err() }))
		if err == nil || !strings.Contains(err.Error(), "runs[0] called runtime.Goexit") || stopped.Load() != 1 {
			t.Errorf("RunAll = %v with %d stopped; want runs[0]'s Goexit, the other stopped", err, stopped.Load())
		}
	})
}

// A run that returns nil before ctx ends has finished: the others go on until ctx ends.
func TestRunAllEarlyNil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var stopped atomic.Int32
		done := startRunAll(ctx,
			func(context.Context) error { return nil },
			untilDone(&stopped, func(ctx context.Context) error { return ctx.Err() }))
		if ok, err := runAllReturned(done); ok || stopped.Load() != 0 {
			t.Fatalf("RunAll returned %v, %d runs stopped, after one run finished; want the other to go on", err, stopped.Load())
		}
		cancel()
		if ok, err := runAllReturned(done); !ok || err != nil {
			t.Errorf("after ctx ended RunAll = (%v, %v); want a clean stop", ok, err)
		}
	})
}

// A nil run is refused before any starts; no runs at all return nil at once.
func TestRunAllBadInput(t *testing.T) {
	ran := false
	err := bridge.RunAll(context.Background(), func(context.Context) error { ran = true; return nil }, nil)
	if err == nil || !strings.Contains(err.Error(), "runs[1] is nil") || ran {
		t.Errorf("RunAll with a nil run = %v, ran %v; want runs[1] refused, nothing run", err, ran)
	}
	if err := bridge.RunAll(context.Background()); err != nil {
		t.Errorf("RunAll() = %v, want nil", err)
	}
}
