package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// ErrWorkerStopped is returned, wrapped in ItemReport.Err, for an item handed to Worker.Do
// after Stop: it is not run, and its claim is handed back.
var ErrWorkerStopped = errors.New("bridge: worker stopped")

// Worker runs dispatched items that reach it from anywhere — a queue's consumers, a
// host's own dispatch loop — on a bounded pool, with the Runner's guarantees: a late item
// is handed back unstarted, a pipeline's context ends before its claim does, claims and
// watchlist entries are read for many items in one call each, and completions are
// written in Index.CompleteMany batches, one call in flight. The Runner is built on it.
//
// Call [Worker.Do] from as many goroutines as you consume messages; it returns once the
// item's completion is written, so a consumer acknowledges the message then, whatever the
// status. [Worker.Stop] ends it. A Worker is safe for concurrent use.
type Worker struct {
	b      *Bridge
	cfg    WorkerConfig // with defaults
	sem    chan struct{}
	reads  gatherer
	writes writer

	mu         sync.Mutex
	stopped    bool
	busy       int // items admitted and not yet queued for their write
	active     int // items admitted whose outcome is not final
	idle       chan struct{}
	idleClosed bool
	kill       context.Context // ends the items and writes of Do when a Stop runs out of time
	killFn     context.CancelCauseFunc
}

// NewWorker returns a Worker that runs items through b. It refuses a nil or incomplete
// Bridge and a knob out of range, wrapping [ErrInvalidConfig] and naming the field.
func NewWorker(b *Bridge, cfg WorkerConfig) (*Worker, error) {
	if err := errors.Join(b.check(true), cfg.validate()); err != nil {
		return nil, err
	}
	return newWorker(b, cfg.withDefaults()), nil
}

// newWorker returns a Worker with cfg, its defaults already applied.
func newWorker(b *Bridge, cfg WorkerConfig) *Worker {
	w := &Worker{b: b, cfg: cfg, sem: make(chan struct{}, cfg.Workers), idle: make(chan struct{})}
	w.kill, w.killFn = context.WithCancelCause(context.Background())
	w.reads.w, w.writes.w = w, w
	return w
}

// job is one item in a Worker, from its admission to its final outcome.
type job struct {
	attempt
	owner owner
	i     int             // the item's place in its owner's list
	run   context.Context // the pipeline's parent
	write context.Context // under which its write is made
	bad   bool            // the item names no valid tenant: ir is its outcome
	ir    itemRun
	ready chan struct{} // closed once a gathered prepare has read for it
}

// owner is whoever handed jobs to the Worker: a Do call or a Runner's cycle.
type owner interface {
	// queued is called once j's write is queued, or j needs none.
	queued(j *job)
	// settled is called once j.ir is final.
	settled(j *job)
	// flushFailed is called once per failed call that carried some of its jobs' writes.
	flushFailed(err error)
}

// newJob returns the job of item, whose time line sp gives, for o.
func (w *Worker) newJob(item dispatch.Item, sp span, o owner, i int) *job {
	tc, ir, ok := begin(item)
	return &job{attempt: attempt{item: item, tc: tc, span: sp, margin: w.cfg.ClaimMargin}, owner: o, i: i, bad: !ok, ir: ir}
}

// report is j's outcome as its caller sees it.
func (j *job) report() ItemReport {
	return ItemReport{Item: j.item, Status: j.ir.status, Result: j.ir.result, Next: j.ir.next, Err: j.ir.err, Written: j.ir.written}
}

// Do runs item on the Worker's pool, taking now as its start on the item's time line
// (the dispatcher's; times the item spends waiting and running are measured on the
// Worker's Clock), and returns once its outcome is final: its completion write has
// returned or finally failed. It refuses nothing: what Do cannot run it hands back or
// leaves to its claim, and the report says which.
//
// The item's claim is checked with Index.CheckClaims and its watchlist entry read with
// Watchlist.GetMany, each one call for the items that arrive together, so a decoded or
// forged item runs nothing unless its claim is current ([StatusLostClaim]). An item the
// claim rule does not let start (see RunDueItem, with WorkerConfig.ClaimMargin) — at once
// or when a worker frees — is handed back unstarted ([StatusLate]), as is an item whose
// ctx ends while it waits for a worker ([StatusReleased]); ctx is also the pipeline's
// parent. Writes ignore ctx's cancellation. After Stop, Do hands the item back at once
// and reports [ErrWorkerStopped].
func (w *Worker) Do(ctx context.Context, item dispatch.Item, now time.Time) ItemReport {
	o := &doOwner{done: make(chan struct{})}
	j := w.newJob(item, span{now: now, at: w.cfg.Clock.Now(), clock: w.cfg.Clock}, o, 0)
	if !w.admit(1) {
		return w.refuse(ctx, j)
	}
	run, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(w.kill, func() { cancel(context.Cause(w.kill)) })
	j.run, j.write = run, w.kill
	w.do(ctx, j)
	<-o.done
	stop()
	cancel(context.Canceled)
	return o.rep
}

// do takes j from its admission to its write.
func (w *Worker) do(ctx context.Context, j *job) {
	if j.bad {
		w.queue(j, j.ir)
		return
	}
	if left := claimLeft(j.item.Claim, j.span.current(), j.margin); left <= 0 {
		w.queue(j, lateRun(j.tc, j.item.Claim, left))
		return
	}
	w.reads.prepare(j)
	if j.checkErr != nil {
		w.queue(j, w.b.execute(j.run, &j.attempt)) // it runs nothing: no worker needed
		return
	}
	if !w.acquire(ctx) {
		w.queue(j, releasedRun(j, context.Cause(ctx)))
		return
	}
	w.start(j)
}

// refuse hands back an item that came after Stop.
func (w *Worker) refuse(ctx context.Context, j *job) ItemReport {
	if !j.bad {
		c := j.item.Claim
		j.ir = itemRun{status: StatusReleased, tc: j.tc, err: fmt.Errorf("bridge: %s: %w", itemName(c), ErrWorkerStopped)}
		errs, err := w.b.Index.Unclaim(ctx, []duework.Unclaim{{Tenant: j.tc, Claim: c}})
		if err == nil && len(errs) == 1 {
			err = errs[0]
		}
		j.ir = j.ir.unclaimed(c, err)
	}
	return j.report()
}

// releasedRun is the outcome of an item handed back unstarted because cause ended the
// wait for a worker.
func releasedRun(j *job, cause error) itemRun {
	if j.bad {
		return j.ir
	}
	err := fmt.Errorf("bridge: %s: not started: %w", itemName(j.item.Claim), cause)
	return itemRun{status: StatusReleased, tc: j.tc, write: writeUnclaim, err: err}
}

// admit counts n items in, or reports false once the Worker is stopped.
func (w *Worker) admit(n int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return false
	}
	w.busy += n
	w.active += n
	return true
}

// acquire takes a worker slot, or reports false once ctx has ended.
func (w *Worker) acquire(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	select {
	case w.sem <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// start runs j on the worker slot it holds, frees the slot and queues j's write.
func (w *Worker) start(j *job) {
	ir := w.b.execute(j.run, &j.attempt)
	<-w.sem
	w.queue(j, ir)
}

// queue records ir as j's outcome so far and queues its write, or settles it when it
// needs none. When no admitted item is left before its write, what waits is written.
func (w *Worker) queue(j *job, ir itemRun) {
	j.ir = ir
	if ir.write != writeNone {
		w.writes.add(j)
	}
	j.owner.queued(j)
	w.mu.Lock()
	w.busy--
	idle := w.busy == 0
	w.mu.Unlock()
	if ir.write == writeNone {
		w.settle(j)
	}
	if idle {
		w.writes.flush()
	}
}

// settle hands j's final outcome to its owner.
func (w *Worker) settle(j *job) {
	j.owner.settled(j)
	w.mu.Lock()
	w.active--
	done := w.stopped && w.active == 0 && !w.idleClosed
	if done {
		w.idleClosed = true
	}
	w.mu.Unlock()
	if done {
		close(w.idle)
	}
}

// Stop refuses new items (Do hands them back), waits for the items admitted to end and
// for their completions to be written, and returns nil. If ctx ends first, it cancels the
// running items and the writes in flight (cause ErrShutdownTimeout) and returns an error
// wrapping ErrShutdownTimeout: what was not written stays claimed until its claims end,
// and is then dispatched again. A Runner's own Worker is never stopped.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	w.stopped = true
	if w.active == 0 && !w.idleClosed {
		w.idleClosed = true
		close(w.idle)
	}
	w.mu.Unlock()
	w.writes.flush()
	select {
	case <-w.idle:
		w.killFn(context.Canceled)
		return nil
	case <-ctx.Done():
		w.killFn(ErrShutdownTimeout)
		err := fmt.Errorf("bridge: Worker.Stop: items cancelled and writes cut short (%w): %w", context.Cause(ctx), ErrShutdownTimeout)
		w.cfg.Logger.LogAttrs(context.WithoutCancel(ctx), slog.LevelWarn, "rota: worker stopped", slog.Any("error", err))
		return err
	}
}

// doOwner is the owner of Do's one job.
type doOwner struct {
	rep  ItemReport
	done chan struct{}
}

func (o *doOwner) queued(*job)       {}
func (o *doOwner) flushFailed(error) {}
func (o *doOwner) settled(j *job) {
	o.rep = j.report()
	close(o.done)
}

// prepare checks the claims of jobs not checked yet with one Index.CheckClaims, then
// reads the watchlist entries of those still good with one Watchlist.GetMany, each under
// its own tenant. A call that fails as a whole is logged once and becomes each of its
// jobs' error: they are retried unrun.
func (w *Worker) prepare(ctx context.Context, jobs []*job) {
	var checks []duework.Unclaim
	var checking []*job
	for _, j := range jobs {
		if !j.bad && !j.checked {
			checks = append(checks, duework.Unclaim{Tenant: j.tc, Claim: j.item.Claim})
			checking = append(checking, j)
		}
	}
	if len(checks) > 0 {
		errs, err := w.b.Index.CheckClaims(ctx, checks)
		if err == nil && len(errs) != len(checks) {
			err = fmt.Errorf("Index.CheckClaims returned %d outcomes for %d claims", len(errs), len(checks))
		}
		if err != nil {
			w.callFailed(ctx, "rota: claim check failed", len(checks), err)
		}
		for k, j := range checking {
			j.checked, j.checkErr = true, err
			if err == nil {
				j.checkErr = errs[k]
			}
		}
	}
	var lookups []tenancy.Lookup
	var reading []*job
	for _, j := range jobs {
		if !j.bad && j.checkErr == nil && j.read == nil {
			lookups = append(lookups, tenancy.Lookup{Tenant: j.tc, Slug: j.item.Claim.Entry.WorkKey})
			reading = append(reading, j)
		}
	}
	if len(lookups) == 0 {
		return
	}
	es, errs, err := w.b.Watchlist.GetMany(ctx, lookups)
	if err == nil && (len(es) != len(lookups) || len(errs) != len(lookups)) {
		err = fmt.Errorf("Watchlist.GetMany returned %d entries and %d outcomes for %d lookups", len(es), len(errs), len(lookups))
	}
	if err != nil {
		w.callFailed(ctx, "rota: watchlist read failed", len(lookups), err)
	}
	for k, j := range reading {
		if err != nil {
			j.read = &watchRead{err: err}
			continue
		}
		e, l := es[k], lookups[k]
		if errs[k] == nil && (e.UserID != l.Tenant.UserID() || e.Slug != l.Slug) {
			// Never run one tenant's pipeline with another's entry.
			j.read = &watchRead{err: fmt.Errorf("Watchlist.GetMany answered lookup %d with user %q entry %q", k, e.UserID, e.Slug)}
			continue
		}
		j.read = &watchRead{entry: e, err: errs[k]}
	}
}

// callFailed logs a call that failed as a whole for items items.
func (w *Worker) callFailed(ctx context.Context, msg string, items int, err error) {
	w.cfg.Logger.LogAttrs(context.WithoutCancel(ctx), slog.LevelWarn, msg, slog.Int("items", items), slog.Any("error", err))
}

// gatherer prepares the jobs of Do calls that arrive together in one call each: one
// prepare in flight at a time, and the jobs that arrive meanwhile go in the next.
type gatherer struct {
	w       *Worker
	mu      sync.Mutex
	waiting []*job
	busy    bool
}

// prepare returns once j's claim is checked and its watchlist entry read.
func (g *gatherer) prepare(j *job) {
	j.ready = make(chan struct{})
	g.mu.Lock()
	g.waiting = append(g.waiting, j)
	start := !g.busy
	g.busy = true
	g.mu.Unlock()
	if start {
		go g.loop()
	}
	<-j.ready
}

func (g *gatherer) loop() {
	for {
		g.mu.Lock()
		js := g.waiting
		g.waiting = nil
		if len(js) == 0 {
			g.busy = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		g.w.prepare(g.w.kill, js)
		for _, j := range js {
			close(j.ready)
		}
	}
}
