package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/clock"
	"github.com/rotaworks/rota/internal/localstart"
)

// The backoff of a failed write's retries: it starts at retryBackoffMin and doubles up to
// retryBackoffMax, for as long as a claim the write carries lasts.
const (
	retryBackoffMin = 50 * time.Millisecond
	retryBackoffMax = 5 * time.Second
)

// writer gathers a Worker's writes — completions for Index.CompleteMany, hand-backs for
// Index.Unclaim — and makes them one batch at a time: a batch starts once FlushItems wait,
// FlushInterval after the first, or when flush is called, and what comes while it is in
// flight goes in the next, all of it. Batches are written on a goroutine of their own, so
// that no worker waits for one.
type writer struct {
	w         *Worker
	begun     atomic.Uint64 // calls of write begun
	ended     atomic.Uint64 // calls of write returned
	mu        sync.Mutex
	pending   []*job
	stopTimer func() bool
	writing   bool // a batch is in flight
	flushed   bool // flush was called while it was
}

// add queues j's write.
func (wr *writer) add(j *job) {
	cfg := &wr.w.cfg
	wr.mu.Lock()
	defer wr.mu.Unlock()
	wr.pending = append(wr.pending, j)
	if len(wr.pending) == 1 && cfg.FlushItems > 1 {
		wr.stopTimer = cfg.Clock.AfterFunc(cfg.FlushInterval, wr.flush)
	}
	wr.startWrite(len(wr.pending) >= cfg.FlushItems)
}

// flush writes whatever waits: now, or right after the batch in flight.
func (wr *writer) flush() {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	wr.flushed = true
	wr.startWrite(true)
}

// startWrite starts writing what waits when ready is set, something waits and no batch is
// in flight. wr.mu must be held.
func (wr *writer) startWrite(ready bool) {
	if !ready || wr.writing || len(wr.pending) == 0 {
		return
	}
	wr.writing, wr.flushed = true, false
	go wr.loop(wr.take())
}

// take empties the batch; wr.mu must be held.
func (wr *writer) take() []*job {
	js := wr.pending
	wr.pending = nil
	if wr.stopTimer != nil {
		wr.stopTimer()
		wr.stopTimer = nil
	}
	return js
}

// loop writes js, then what came meanwhile for as long as that is a full batch or a
// flush came.
func (wr *writer) loop(js []*job) {
	for {
		wr.write(js)
		wr.mu.Lock()
		if len(wr.pending) == 0 || (len(wr.pending) < wr.w.cfg.FlushItems && !wr.flushed) {
			wr.writing, wr.flushed = false, false
			wr.mu.Unlock()
			return
		}
		js, wr.flushed = wr.take(), false
		wr.mu.Unlock()
	}
}

// writeCalls is what calls returns: how many writes had begun and ended.
type writeCalls struct{ begun, ended uint64 }

// calls returns how many writes have begun and ended so far.
func (wr *writer) calls() writeCalls {
	e := wr.ended.Load() // first: ended never passes begun
	return writeCalls{begun: wr.begun.Load(), ended: e}
}

// overlapped reports whether a write was in flight at some point since calls returned
// since.
func (wr *writer) overlapped(since writeCalls) bool {
	return since.begun != since.ended || wr.begun.Load() != since.begun
}

// write hands back the unrun items of js in one Index.Unclaim, completes the others in
// one Index.CompleteMany, and settles each.
func (wr *writer) write(js []*job) {
	wr.begun.Add(1)
	ctx, cancel := writeContext(js)
	defer cancel()
	ctx = localstart.With(ctx, wr.w.local)
	idx := wr.w.b.Index
	var back, done []*job
	for _, j := range js {
		if j.ir.write == writeUnclaim {
			back = append(back, j)
		} else {
			done = append(done, j)
		}
	}
	if len(back) > 0 {
		claims := make([]duework.Unclaim, len(back))
		for k, j := range back {
			claims[k] = duework.Unclaim{Tenant: j.tc, Claim: j.item.Claim}
		}
		errs, _ := wr.call(ctx, "Unclaim", back, func(ctx context.Context) ([]error, error) { return idx.Unclaim(ctx, claims) })
		for k, j := range back {
			j.ir = j.ir.unclaimed(j.item.Claim, errs[k])
		}
	}
	if len(done) > 0 {
		dones := make([]duework.Done, len(done))
		for k, j := range done {
			dones[k] = duework.Done{Tenant: j.tc, Claim: j.item.Claim, Next: j.ir.next}
		}
		errs, failed := wr.call(ctx, "CompleteMany", done, func(ctx context.Context) ([]error, error) { return idx.CompleteMany(ctx, dones) })
		if failed != nil {
			wr.resolve(ctx, dones, errs, failed)
		}
		for k, j := range done {
			j.ir = j.ir.completed(j.item.Claim, errs[k])
		}
	}
	// The write has ended before any of its items is settled: a cycle reported settled
	// never counts its own write as one in flight beside the next dispatch.
	wr.ended.Add(1)
	for _, j := range js {
		wr.w.settle(j)
	}
}

// call makes one batch's call (method, an Index method taking js's items) and returns
// each item's outcome. A call that fails as a whole is logged and reported to the jobs'
// owners, then retried after a backoff that doubles from retryBackoffMin to
// retryBackoffMax, for as long as any of js's claims lasts and ctx does; failed is the
// last failure, nil if there was none. When the call never succeeds, every outcome is
// that failure and the claims are left to end.
func (wr *writer) call(ctx context.Context, method string, js []*job, f func(context.Context) ([]error, error)) (errs []error, failed error) {
	clk := wr.w.cfg.Clock
	end := claimsEnd(js)
	for backoff := retryBackoffMin; ; backoff = min(2*backoff, retryBackoffMax) {
		errs, err := f(ctx)
		if err == nil && len(errs) != len(js) {
			err = fmt.Errorf("Index.%s returned %d outcomes for %d items", method, len(errs), len(js))
		}
		if err == nil {
			return errs, failed
		}
		failed = fmt.Errorf("bridge: %s of %d items: %w", method, len(js), err)
		for _, o := range owners(js) {
			o.flushFailed(failed)
		}
		retry := ctx.Err() == nil && clk.Now().Add(backoff).Before(end)
		attrs := []slog.Attr{slog.String("call", method), slog.Int("items", len(js)), slog.Bool("retry", retry)}
		if retry {
			attrs = append(attrs, slog.Duration("backoff", backoff))
		}
		wr.w.cfg.Logger.LogAttrs(context.WithoutCancel(ctx), slog.LevelWarn, "rota: write failed", append(attrs, slog.Any("error", failed))...)
		if !retry || !clock.Sleep(ctx, clk, backoff) {
			break
		}
	}
	errs = make([]error, len(js))
	for k := range errs {
		errs[k] = failed
	}
	return errs, failed
}

// resolve clears the ErrClaimLost of each item whose entry is exactly its Next: a failed
// call wrote it. The others keep their outcome, joined with that call's error; when the
// retries never succeeded, every outcome is failed itself and stays so.
func (wr *writer) resolve(ctx context.Context, dones []duework.Done, errs []error, failed error) {
	for k, d := range dones {
		if errs[k] == nil || errs[k] == failed {
			continue
		}
		if errors.Is(errs[k], duework.ErrClaimLost) {
			e, err := wr.w.b.Index.Get(ctx, d.Tenant, d.Next.WorkKey)
			if err == nil && sameEntry(e, d.Next) {
				errs[k] = nil
				continue
			}
		}
		errs[k] = errors.Join(errs[k], failed)
	}
}

// claimsEnd is the latest instant, on the Worker's Clock, at which a claim of js ends.
func claimsEnd(js []*job) time.Time {
	var end time.Time
	for _, j := range js {
		if t := j.span.clockAt(j.item.Claim.Until); t.After(end) {
			end = t
		}
	}
	return end
}

// owners returns the distinct owners of js.
func owners(js []*job) []owner {
	var out []owner
	for _, j := range js {
		if !slices.Contains(out, j.owner) {
			out = append(out, j.owner)
		}
	}
	return out
}

// writeContext returns the context of one batch's write: it ends once the write context
// of every job of js has ended, so that one owner's stop does not cut another's writes.
func writeContext(js []*job) (context.Context, context.CancelFunc) {
	var distinct []context.Context
	for _, j := range js {
		if !slices.Contains(distinct, j.write) {
			distinct = append(distinct, j.write)
		}
	}
	if len(distinct) == 1 {
		return context.WithCancel(distinct[0])
	}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(distinct[0]))
	var left atomic.Int64
	left.Store(int64(len(distinct)))
	stops := make([]func() bool, len(distinct))
	for i, c := range distinct {
		stops[i] = context.AfterFunc(c, func() {
			if left.Add(-1) == 0 {
				cancel(context.Cause(c))
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel(context.Canceled)
	}
}

// stopper turns the end of a Run's or Cycle's context into a bounded stop: drain, the
// parent of the dispatch and the items, ends t after it; write, under which completions
// and hand-backs are written, t later.
type stopper struct {
	drain, write             context.Context
	cancelDrain, cancelWrite context.CancelCauseFunc
	stopWatch                func() bool

	mu     sync.Mutex
	closed bool
	timers []func() bool
}

func newStopper(ctx context.Context, clk Clock, t time.Duration) *stopper {
	base := context.WithoutCancel(ctx)
	s := &stopper{}
	s.drain, s.cancelDrain = context.WithCancelCause(base)
	s.write, s.cancelWrite = context.WithCancelCause(base)
	s.stopWatch = context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return
		}
		s.timers = append(s.timers,
			clk.AfterFunc(t, func() { s.cancelDrain(ErrShutdownTimeout) }),
			clk.AfterFunc(2*t, func() { s.cancelWrite(ErrShutdownTimeout) }))
	})
	return s
}

// close stops the timers and reports whether the stop ran into its timeout.
func (s *stopper) close() (timedOut bool) {
	s.stopWatch()
	s.mu.Lock()
	s.closed = true
	for _, stop := range s.timers {
		stop()
	}
	s.mu.Unlock()
	timedOut = errors.Is(context.Cause(s.drain), ErrShutdownTimeout)
	s.cancelDrain(context.Canceled)
	s.cancelWrite(context.Canceled)
	return timedOut
}
