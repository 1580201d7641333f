package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
)

// pending is item i of a cycle whose claim is still to be completed with ir.next.
type pending struct {
	i    int
	item dispatch.Item
	ir   itemRun
}

// batcher gathers a cycle's completions and writes them with Index.CompleteMany, one call
// in flight at a time: a write starts once FlushItems wait, FlushInterval after the first,
// or when flush is called, and what comes while it is in flight goes in the next, all of
// it. Writes run on a goroutine of their own, so that no worker waits for one.
type batcher struct {
	c         *cycle
	mu        sync.Mutex
	pending   []pending
	stopTimer func() bool
	writing   bool // a write is in flight
	flushed   bool // flush was called while it was
}

// add queues p's write.
func (bt *batcher) add(p pending) {
	cfg := &bt.c.r.cfg
	bt.mu.Lock()
	defer bt.mu.Unlock()
	bt.pending = append(bt.pending, p)
	if len(bt.pending) == 1 && cfg.FlushItems > 1 {
		bt.stopTimer = cfg.Clock.AfterFunc(cfg.FlushInterval, bt.flush)
	}
	bt.startWrite(len(bt.pending) >= cfg.FlushItems)
}

// flush writes whatever waits: now, or right after the write in flight.
func (bt *batcher) flush() {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	bt.flushed = true
	bt.startWrite(true)
}

// startWrite starts writing what waits when ready is set, something waits and no write is
// in flight. bt.mu must be held.
func (bt *batcher) startWrite(ready bool) {
	if !ready || bt.writing || len(bt.pending) == 0 {
		return
	}
	bt.writing, bt.flushed = true, false
	go bt.write(bt.take())
}

// take empties the batch; bt.mu must be held.
func (bt *batcher) take() []pending {
	ps := bt.pending
	bt.pending = nil
	if bt.stopTimer != nil {
		bt.stopTimer()
		bt.stopTimer = nil
	}
	return ps
}

// write writes ps, then what came meanwhile for as long as that is a full batch or a flush
// came.
func (bt *batcher) write(ps []pending) {
	for {
		bt.c.write(ps)
		bt.mu.Lock()
		if len(bt.pending) == 0 || (len(bt.pending) < bt.c.r.cfg.FlushItems && !bt.flushed) {
			bt.writing, bt.flushed = false, false
			bt.mu.Unlock()
			return
		}
		ps, bt.flushed = bt.take(), false
		bt.mu.Unlock()
	}
}

// write completes the claims of ps in one Index.CompleteMany and settles each item.
func (c *cycle) write(ps []pending) {
	dones := make([]duework.Done, 0, len(ps))
	todo := ps[:0:0]
	for _, p := range ps {
		if !p.ir.write {
			c.settle(p)
			continue
		}
		dones = append(dones, duework.Done{Tenant: p.ir.tc, Claim: p.item.Claim, Next: p.ir.next})
		todo = append(todo, p)
	}
	if len(todo) == 0 {
		return
	}
	errs := c.completeMany(dones)
	for k, p := range todo {
		p.ir = p.ir.written(p.item.Claim, errs[k])
		c.settle(p)
	}
}

// completeMany writes dones and returns each one's outcome. A call that fails as a whole
// is reported and tried once more; an item the retry finds already completed was written
// by the failed call when the entry is exactly its Next. If the retry fails too, every
// item gets its error, and the claims are left to end.
func (c *cycle) completeMany(dones []duework.Done) []error {
	ctx, idx := c.st.write, c.r.b.Index
	var failed error
	for attempt := range 2 {
		errs, err := idx.CompleteMany(ctx, dones)
		if err == nil && len(errs) != len(dones) {
			err = fmt.Errorf("Index.CompleteMany returned %d outcomes for %d items", len(errs), len(dones))
		}
		if err == nil {
			if failed != nil {
				c.resolve(ctx, dones, errs, failed)
			}
			return errs
		}
		failed = fmt.Errorf("bridge: complete %d items: %w", len(dones), err)
		retry := attempt == 0 && ctx.Err() == nil
		c.flushFailed(failed, len(dones), retry)
		if !retry {
			break
		}
	}
	errs := make([]error, len(dones))
	for k := range errs {
		errs[k] = failed
	}
	return errs
}

// resolve clears the ErrClaimLost of each item whose entry is exactly its Next: the
// failed call wrote it. The others keep their outcome, joined with that call's error.
func (c *cycle) resolve(ctx context.Context, dones []duework.Done, errs []error, failed error) {
	for k, d := range dones {
		if errs[k] == nil {
			continue
		}
		if errors.Is(errs[k], duework.ErrClaimLost) {
			e, err := c.r.b.Index.Get(ctx, d.Tenant, d.Next.WorkKey)
			if err == nil && sameEntry(e, d.Next) {
				errs[k] = nil
				continue
			}
		}
		errs[k] = errors.Join(errs[k], failed)
	}
}

// flushFailed reports a failed CompleteMany in the cycle's report and in one log line.
func (c *cycle) flushFailed(err error, items int, retry bool) {
	c.mu.Lock()
	c.report.FlushErrs = append(c.report.FlushErrs, err)
	c.mu.Unlock()
	c.r.cfg.Logger.LogAttrs(context.Background(), slog.LevelWarn, "rota: complete failed",
		slog.Int("items", items), slog.Bool("retry", retry), slog.Any("error", err))
}

// stopper turns the end of a Run's or Cycle's context into a bounded stop: drain, the
// parent of the dispatch and the items, ends ShutdownTimeout after it; write, under which
// completions are written, ShutdownTimeout later.
type stopper struct {
	drain, write             context.Context
	cancelDrain, cancelWrite context.CancelCauseFunc
	stopWatch                func() bool

	mu     sync.Mutex
	closed bool
	timers []func() bool
}

func (r *Runner) newStopper(ctx context.Context) *stopper {
	base := context.WithoutCancel(ctx)
	s := &stopper{}
	s.drain, s.cancelDrain = context.WithCancelCause(base)
	s.write, s.cancelWrite = context.WithCancelCause(base)
	t, clock := r.cfg.ShutdownTimeout, r.cfg.Clock
	s.stopWatch = context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return
		}
		s.timers = append(s.timers,
			clock.AfterFunc(t, func() { s.cancelDrain(ErrShutdownTimeout) }),
			clock.AfterFunc(2*t, func() { s.cancelWrite(ErrShutdownTimeout) }))
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
