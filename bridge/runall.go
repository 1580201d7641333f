package bridge

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
)

// RunAll runs each of runs on its own goroutine under one context and returns once every
// one has returned: what a service calls to run its loops together — a Runner's Run, a
// maintenance Scheduler's Run, a Feeder's Run, a listener that calls Runner.Wake — with
// one clean stop.
//
//	err := bridge.RunAll(ctx, runner.Run, scheduler.Run)
//
// When ctx ends, each run sees its context end, and RunAll returns nil once all have
// returned cleanly: nil, or, after their context ended, an error wrapping its error or
// cause. Any other error, or a panic (recovered), is a failure: the first cancels the
// others' context, with itself as the cause, and RunAll returns, once all have returned,
// every failure joined in the order they came, each naming its run's index. A run that
// returns nil early has finished; the others go on. A nil run is refused before any
// starts. RunAll waits as long as the slowest run takes to stop.
func RunAll(ctx context.Context, runs ...func(context.Context) error) error {
	for i, run := range runs {
		if run == nil {
			return fmt.Errorf("bridge: RunAll: runs[%d] is nil", i)
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	results := make(chan error, len(runs))
	for i, run := range runs {
		go runOne(ctx, i, run, results)
	}
	var errs []error
	for range runs {
		err := <-results
		if err == nil {
			continue
		}
		if errs == nil {
			cancel(err)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// runOne calls run(ctx) and sends its failure to results: nil after a clean stop, an
// error naming i otherwise — a runPanic after a panic or runtime.Goexit.
func runOne(ctx context.Context, i int, run func(context.Context) error, results chan<- error) {
	var failed error
	returned := false
	defer func() {
		if v := recover(); v != nil || !returned {
			failed = runPanic{i: i, v: v, stack: debug.Stack()}
		}
		results <- failed
	}()
	err := run(ctx)
	returned = true
	if err != nil && (ctx.Err() == nil || !errors.Is(err, ctx.Err()) && !errors.Is(err, context.Cause(ctx))) {
		failed = fmt.Errorf("bridge: RunAll: runs[%d]: %w", i, err)
	}
}

// runPanic is the error of a run that panicked, or called runtime.Goexit (a nil v): its
// index, the value and the stack.
type runPanic struct {
	i     int
	v     any
	stack []byte
}

func (p runPanic) Error() string {
	if p.v == nil {
		return fmt.Sprintf("bridge: RunAll: runs[%d] called runtime.Goexit\n%s", p.i, p.stack)
	}
	return fmt.Sprintf("bridge: RunAll: runs[%d] panicked: %v\n%s", p.i, p.v, p.stack)
}

// Unwrap returns the panic's value when it is an error, so errors.Is and errors.As see it.
func (p runPanic) Unwrap() error {
	err, _ := p.v.(error)
	return err
}
