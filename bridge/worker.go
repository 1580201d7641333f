package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/localstart"
	"github.com/rotaworks/rota/internal/lograte"
	"github.com/rotaworks/rota/tenancy"
)

// ErrWorkerStopped is returned, wrapped in ItemReport.Err, for an item handed to Worker.Do
// after Stop, or still waiting for a worker when Stop was called: it is not run, and its
// claim is handed back.
var ErrWorkerStopped = errors.New("bridge: worker stopped")

// Worker runs dispatched items that reach it from anywhere — a queue's consumers, a
// host's own loop, a Runner's dispatch — on a bounded pool: it is the one place an item
// runs. A late item is handed back unstarted, an item starts only once a worker is free
// for it and Index.StartClaims has started its claim (so no two copies of an item ever
// run), a pipeline's context ends before its claim does, claims and watchlist entries are
// read for many items in one call each, and completions are written in
// Index.CompleteMany batches, one call in flight.
//
// Call [Worker.Do] from as many goroutines as you consume messages; it returns once the
// item's completion is written, so a consumer acknowledges the message then, whatever the
// status. [Worker.Stop] ends it. A Worker is safe for concurrent use.
type Worker struct {
	b      *Bridge
	cfg    WorkerConfig // with defaults
	sem    chan struct{}
	starts starter
	writes writer

	mu         sync.Mutex
	stopped    bool
	stopping   chan struct{} // closed by Stop: items waiting for a worker are handed back
	busy       int           // items admitted and not yet queued for their write
	active     int           // items admitted whose outcome is not final
	idle       chan struct{}
	idleClosed bool
	kill       context.Context // ends the items and writes of Do when a Stop runs out of time
	killFn     context.CancelCauseFunc
	drops      *lograte.Limiter     // the lines about items Do did not run; nil: none (RunDueItem returns why)
	paused     map[string]time.Time // tenants a Pushback paused, until when on the items' time line
	anyPaused  atomic.Bool          // paused is not empty: pausedHere need not lock mu
	pauseSig   chan struct{}        // closed, and replaced, when a pause is recorded
	// local holds the claims a Runner on this Worker made for it to start itself (see
	// internal/localstart): every StartClaims, Unclaim and CompleteMany of the Worker's
	// carries it.
	local *localstart.Set
}

// NewWorker returns a Worker that runs items through b. It refuses a nil or incomplete
// Bridge, a knob out of range and a claim margin that cannot cover MaxClockSkew plus
// FlushInterval (see WorkerConfig.ClaimMargin), wrapping [ErrInvalidConfig] and naming
// the field.
func NewWorker(b *Bridge, cfg WorkerConfig) (*Worker, error) {
	if err := errors.Join(b.check(true), cfg.validate()); err != nil {
		return nil, err
	}
	return newWorker(b, cfg.withDefaults()), nil
}

// newWorker returns a Worker with cfg, its defaults already applied.
func newWorker(b *Bridge, cfg WorkerConfig) *Worker {
	w := &Worker{b: b, cfg: cfg, sem: make(chan struct{}, cfg.Workers), stopping: make(chan struct{}), idle: make(chan struct{}),
		paused: map[string]time.Time{}, pauseSig: make(chan struct{})}
	w.kill, w.killFn = context.WithCancelCause(context.Background())
	w.starts.w, w.writes.w = w, w
	w.drops = lograte.New(cfg.Logger, dropLogEvery, cfg.Clock.Now)
	w.local = localstart.New(cfg.Clock.Now)
	return w
}

// close releases a Worker that has no item left, without the ceremony of Stop.
func (w *Worker) close() { w.killFn(context.Canceled) }

// job is one item in a Worker, from its admission to its final outcome.
type job struct {
	item      dispatch.Item
	tc        tenancy.Context
	span      span
	margin    time.Duration
	fromStart bool // the entry advances from the item's given now (a Runner's cycle)
	owner     owner
	i         int             // the item's place in its owner's list
	run       context.Context // the pipeline's parent
	write     context.Context // under which its write is made
	bad       bool            // the item names no valid tenant: ir is its outcome
	read      *watchRead      // the watchlist entry, once read
	reading   chan struct{}   // closed once the batch's GetMany, which reads the entry, returned
	startErr  error           // Index.StartClaims's outcome for the item's claim
	ir        itemRun
	ready     chan struct{} // closed once the starter has started the item's claim
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
	j := &job{item: item, span: sp, margin: w.cfg.ClaimMargin, owner: o, i: i}
	tc, err := tenancy.NewContext(item.Claim.Entry.UserID)
	if err != nil {
		// Such an entry cannot be in an Index, and there is nothing to write back under.
		j.bad, j.ir = true, itemRun{status: StatusError, err: fmt.Errorf("bridge: %s: %w", itemName(item.Claim), err)}
	}
	j.tc = tc
	return j
}

// ended is the instant of the item's time line its entry advances from.
func (j *job) ended() time.Time {
	if j.fromStart {
		return j.span.now
	}
	return j.span.current()
}

// report is j's outcome as its caller sees it.
func (j *job) report() ItemReport {
	return ItemReport{Item: j.item, Status: j.ir.status, Result: j.ir.result, Next: j.ir.next, Err: j.ir.err, Written: j.ir.written, Overrun: j.ir.overrun}
}

// Do runs item on the Worker's pool, taking now as its start on the item's time line
// (the dispatcher's; times the item spends waiting and running are measured on the
// Worker's Clock), and returns once its outcome is final: its completion write has
// returned or finally failed. It refuses nothing: what Do cannot run it hands back or
// leaves to its claim, and the report says which.
//
// The item waits for a free worker, then its claim is started with Index.StartClaims and
// its watchlist entry read with Watchlist.GetMany, each one call for the items that get a
// worker together, so a decoded or forged item runs nothing unless its claim is current
// ([StatusLostClaim]). An item the claim rule does not let start (see RunDueItem, with
// WorkerConfig.ClaimMargin) — at once or when a worker frees — is handed back unstarted
// ([StatusLate]), as is an item whose ctx ends, or whose Worker is stopped, while it
// waits for a worker ([StatusReleased]); ctx is also the pipeline's parent. Writes ignore
// ctx's cancellation. After Stop, Do hands the item back at once and reports
// [ErrWorkerStopped].
func (w *Worker) Do(ctx context.Context, item dispatch.Item, now time.Time) ItemReport {
	o := &doOwner{done: make(chan struct{})}
	j := w.newJob(item, span{now: now, at: w.cfg.Clock.Now(), clock: w.cfg.Clock}, o, 0)
	if !w.admit(1) {
		return w.refuse(ctx, j)
	}
	run, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(w.kill, func() { cancel(context.Cause(w.kill)) })
	j.run, j.write = run, w.kill
	if w.enter(ctx, j) {
		w.start(j)
	}
	<-o.done
	stop()
	cancel(context.Canceled)
	w.noteDropped(ctx, o.rep)
	return o.rep
}

// dropLogEvery is the least time between two lines of one kind about items Do did not
// run: a flood of forged or stale messages costs a line every few seconds.
const dropLogEvery = 10 * time.Second

// noteDropped logs, at most once per dropLogEvery and kind, an item Do did not run
// because its claim was not current — forged, stale from another dispatcher, or replaced
// by the host: a Warn line — or was ending: an Info line.
func (w *Worker) noteDropped(ctx context.Context, rep ItemReport) {
	if w.drops == nil {
		return
	}
	e := rep.Item.Claim.Entry
	attrs := []slog.Attr{slog.String("user_id", e.UserID), slog.String("work_key", e.WorkKey), slog.Time("claim_until", rep.Item.Claim.Until)}
	ctx = context.WithoutCancel(ctx)
	switch {
	case rep.Status == StatusLostClaim && rep.Result == nil:
		w.drops.Log(ctx, "lost", slog.LevelWarn, "rota: item not run, its claim is not current", append(attrs, slog.Any("error", rep.Err))...)
	case rep.Status == StatusLate:
		// A redelivery after its worker died, or a message that waited too long: the
		// entry is dispatched again once the claim ends.
		w.drops.Log(ctx, "late", slog.LevelInfo, "rota: item not run, its claim was ending", attrs...)
	}
}

// doBatch takes jobs, all of one owner and admitted by the caller, to their writes: one
// Watchlist.GetMany reads all their entries while they take workers, in order, each to run
// on a goroutine of its own; those that get a worker at once start their claims in one
// round (see starter), and a job that waits for its worker waits on its goroutine. Jobs
// still waiting when wait ends are handed back.
func (w *Worker) doBatch(wait context.Context, jobs []*job) {
	if wait.Err() == nil && len(jobs) > 0 {
		reading := make(chan struct{})
		for _, j := range jobs {
			j.reading = reading
		}
		go func() {
			w.read(jobs[0].run, jobs, true)
			close(reading)
		}()
	}
	w.starts.hold()
	holding := true
	for i, j := range jobs {
		if holding {
			if w.enterNow(wait, j) {
				continue
			}
			// j waits for a worker: the jobs that have one start meanwhile. (Holding the
			// round while j waits could deadlock: the workers it waits for are held by
			// jobs waiting for that round.)
			w.starts.release()
			holding = false
		}
		if w.enter(wait, j) {
			go w.start(j)
			continue
		}
		if wait.Err() != nil {
			for _, j := range jobs[i+1:] {
				j.release(context.Cause(wait))
				w.queued(j)
			}
			w.writes.flush() // hand them back at once, in one call
			return
		}
	}
	if holding {
		w.starts.release()
	}
}

// enterNow is enter for a job that must not wait, in a batch holding the starter's next
// round: it returns true once j holds a worker and is in that round (which starts it on a
// goroutine of its own once its claim is started), or once j's outcome is queued (bad,
// late, its tenant paused); and false, with nothing done, when no worker is free now or
// wait has ended.
func (w *Worker) enterNow(wait context.Context, j *job) bool {
	if wait.Err() != nil {
		return false
	}
	if w.turnedAway(j) {
		return true
	}
	if err := w.pausedHere(j); err != nil {
		j.release(err)
		w.queued(j)
		return true
	}
	select {
	case w.sem <- struct{}{}:
	default:
		return false
	}
	w.starts.enqueue(j)
	return true
}

// turnedAway queues j's outcome and returns true when j may not take a worker at all: it
// is bad, or late by the claim rule.
func (w *Worker) turnedAway(j *job) bool {
	if j.bad {
		w.queued(j)
		return true
	}
	if left := claimLeft(j.item.Claim, j.span.current(), j.margin); left <= 0 {
		j.late(left, false)
		w.queued(j)
		return true
	}
	return false
}

// enter returns true once j holds a worker, or queues j's outcome and returns false: j is
// bad, late, or its wait ended first.
func (w *Worker) enter(wait context.Context, j *job) bool {
	if w.turnedAway(j) {
		return false
	}
	if err := w.acquire(wait, j); err != nil {
		j.release(err)
		w.queued(j)
		return false
	}
	return true
}

// errTenantPaused is why an item that waited for a worker was handed back: a Pushback of
// its tenant on this Worker paused it.
var errTenantPaused = errors.New("bridge: its tenant was paused by a pushback")

// pauseHere records that userID is paused until until, on the items' time line: none of
// its items starts on this Worker before then, and those waiting for a worker are handed
// back at once. now, the pushback's instant, also clears the pauses that have ended.
func (w *Worker) pauseHere(userID string, now, until time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for u, t := range w.paused {
		if !t.After(now) {
			delete(w.paused, u)
		}
	}
	if until.After(w.paused[userID]) {
		w.paused[userID] = until
	}
	w.anyPaused.Store(len(w.paused) > 0)
	close(w.pauseSig)
	w.pauseSig = make(chan struct{})
}

// pausedHere returns a non-nil error when j's tenant is paused on this Worker at j's time.
func (w *Worker) pausedHere(j *job) error {
	if !w.anyPaused.Load() {
		return nil
	}
	w.mu.Lock()
	until, ok := w.paused[j.tc.UserID()]
	w.mu.Unlock()
	if ok && j.span.current().Before(until) {
		return fmt.Errorf("%w until %v", errTenantPaused, until)
	}
	return nil
}

// start runs j, which waited for the worker it holds, on the goroutine that waited: it
// frees the worker at the end and queues j's write.
//
// The functions an item's goroutine runs keep small frames (each sets j.ir rather than
// returning an itemRun, and the rare outcomes are built in functions of their own), so
// that the goroutine's first stack holds the pipeline's call.
func (w *Worker) start(j *job) {
	w.runHeld(j)
	<-w.sem
	w.queued(j)
}

// begun runs j, which got its worker in a batch's round, on a goroutine of its own once
// the round has started its claim; it frees the worker at the end and queues j's write.
func (w *Worker) begun(j *job) {
	w.runClaimed(j)
	<-w.sem
	w.queued(j)
}

// runHeld runs j, which holds a worker, up to its final write: the claim rule, then the
// claim started, then the item itself. It sets j.ir.
func (w *Worker) runHeld(j *job) {
	if left := claimLeft(j.item.Claim, j.span.current(), j.margin); left <= 0 {
		j.late(left, false)
		return
	}
	if err := w.pausedHere(j); err != nil {
		j.release(err)
		return
	}
	w.starts.start(j)
	w.runClaimed(j)
}

// runClaimed runs j, whose claim the starter has tried to start, up to its final write.
// It sets j.ir.
func (w *Worker) runClaimed(j *job) {
	if j.startErr == nil {
		w.runStarted(j)
		return
	}
	j.notStarted()
}

// notStarted sets the outcome of j, whose claim StartClaims did not start.
func (j *job) notStarted() {
	c := j.item.Claim
	switch err := j.startErr; {
	case errors.Is(err, duework.ErrClaimStarted):
		j.ir = itemRun{status: StatusDuplicate, err: fmt.Errorf("bridge: %s: %w", itemName(c), err)}
	case errors.Is(err, duework.ErrClaimLost):
		j.ir = itemRun{status: StatusLostClaim, err: fmt.Errorf("bridge: %s: %w", itemName(c), err)}
	default:
		// The index could not say: the item is not run, and handed back. Should its claim
		// have been started after all, the hand-back is refused and the claim ends on its
		// own.
		j.ir = itemRun{status: StatusError, write: writeUnclaim, err: fmt.Errorf("bridge: %s: start claim: %w", itemName(c), err)}
	}
}

// refuse hands back an item that came after Stop.
func (w *Worker) refuse(ctx context.Context, j *job) ItemReport {
	if !j.bad {
		c := j.item.Claim
		j.ir = itemRun{status: StatusReleased, err: fmt.Errorf("bridge: %s: %w", itemName(c), ErrWorkerStopped)}
		errs, err := w.b.Index.Unclaim(localstart.With(ctx, w.local), []duework.Unclaim{{Tenant: j.tc, Claim: c}})
		if err == nil && len(errs) == 1 {
			err = errs[0]
		}
		j.ir = j.ir.unclaimed(c, err)
	}
	return j.report()
}

// release sets the outcome of an item handed back unstarted because cause ended the wait
// for a worker. A bad item keeps its own.
func (j *job) release(cause error) {
	if j.bad {
		return
	}
	err := fmt.Errorf("bridge: %s: not started: %w", itemName(j.item.Claim), cause)
	j.ir = itemRun{status: StatusReleased, write: writeUnclaim, err: err}
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

// acquire takes a worker for j, or returns why it could not: wait ended, Stop was
// called, or a Pushback paused j's tenant.
func (w *Worker) acquire(wait context.Context, j *job) error {
	for {
		if wait.Err() != nil {
			return context.Cause(wait)
		}
		if err := w.pausedHere(j); err != nil {
			return err
		}
		w.mu.Lock()
		sig := w.pauseSig
		w.mu.Unlock()
		select {
		case w.sem <- struct{}{}:
			return nil
		case <-wait.Done():
			return context.Cause(wait)
		case <-w.stopping:
			return ErrWorkerStopped
		case <-sig: // a tenant was paused: perhaps j's
		}
	}
}

// queued queues the write of j's outcome so far, j.ir, or settles j when it needs none.
// When no admitted item is left before its write, what waits is written.
func (w *Worker) queued(j *job) {
	write := j.ir.write
	if write != writeNone {
		w.writes.add(j)
	}
	j.owner.queued(j)
	w.mu.Lock()
	w.busy--
	idle := w.busy == 0
	w.mu.Unlock()
	if write == writeNone {
		w.settle(j)
	}
	if idle {
		w.writes.flush()
	}
}

// settle hands j's final outcome to its owner.
func (w *Worker) settle(j *job) {
	w.noteStreak(j)
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

// Stop refuses new items (Do hands them back), hands back the items still waiting for a
// worker, waits for the items running to end and for their completions to be written,
// and returns nil. If ctx ends first, it cancels the running items and the writes in
// flight (cause ErrShutdownTimeout) and returns an error wrapping ErrShutdownTimeout:
// what was not written stays claimed until its claims end, and is then dispatched again.
// A Runner's own Worker is never stopped.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	if !w.stopped {
		w.stopped = true
		close(w.stopping)
	}
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

// noteStreak logs a source whose failures j's written outcome brought to
// AlarmAfterErrors, once per run of failures, and a source that succeeded after one.
func (w *Worker) noteStreak(j *job) {
	n := w.cfg.AlarmAfterErrors
	if n < 0 || !j.ir.written {
		return
	}
	e := j.item.Claim.Entry
	ctx := context.WithoutCancel(j.write)
	switch st := j.ir.status; {
	case st == StatusError && j.ir.next.ErrorStreak == n && e.ErrorStreak < n:
		w.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "rota: source failing", slog.String("user_id", e.UserID),
			slog.String("work_key", e.WorkKey), slog.Int("error_streak", n), slog.Time("next_due", j.ir.next.DueAt), slog.Any("error", j.ir.err))
	case (st == StatusHit || st == StatusMiss) && e.ErrorStreak >= n:
		w.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "rota: source recovered", slog.String("user_id", e.UserID),
			slog.String("work_key", e.WorkKey), slog.Int("error_streak", e.ErrorStreak))
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
