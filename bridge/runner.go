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

// ErrClaimEnded is the cause (see context.Cause) of an item's context when the item's
// claim is about to end: past it, the entry may be dispatched again elsewhere.
var ErrClaimEnded = errors.New("bridge: the item's claim is ending")

// ErrShutdownTimeout is the cause of an item's context when the context of Run or Cycle
// ended RunnerConfig.ShutdownTimeout ago and the item still ran. Run returns it, wrapped,
// after such a stop.
var ErrShutdownTimeout = errors.New("bridge: shutdown timeout")

// dispatcher is what the Runner needs of a *dispatch.Dispatcher.
type dispatcher interface {
	Dispatch(ctx context.Context, now time.Time) (dispatch.Batch, error)
}

// Runner drives the cycle: every interval one dispatch and one read of the items'
// watchlist entries, then each item through the Bridge on a bounded pool of workers, its
// completion written in a batch. [Runner.Run] is the long-running loop of a daemon;
// [Runner.Cycle] runs exactly one cycle, for a serverless handler on a timer or a test on
// a simulated clock. A Runner is safe for concurrent use; Cycle and Run calls share its
// pool of workers.
type Runner struct {
	b               *Bridge
	d               dispatcher
	cfg             RunnerConfig // with defaults
	intervalDefault bool
	sem             chan struct{} // one slot per worker
	alarms          alarmState
}

// NewRunner returns a Runner that dispatches with d and runs items through b, whose Index
// should be the one d dispatches from. It refuses a nil or incomplete Bridge, a nil
// Dispatcher and a knob out of range, wrapping [ErrInvalidConfig] and naming the field.
func NewRunner(b *Bridge, d *dispatch.Dispatcher, cfg RunnerConfig) (*Runner, error) {
	var dd dispatcher
	if d != nil {
		dd = d
	}
	return newRunner(b, dd, cfg)
}

func newRunner(b *Bridge, d dispatcher, cfg RunnerConfig) (*Runner, error) {
	errs := []error{b.check(true), cfg.validate()}
	if d == nil {
		errs = append(errs, fmt.Errorf("%w: the Dispatcher must not be nil", ErrInvalidConfig))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	r := &Runner{b: b, d: d, cfg: cfg.withDefaults(), intervalDefault: cfg.Interval == 0}
	r.sem = make(chan struct{}, r.cfg.Workers)
	return r, nil
}

// Cycle runs exactly one cycle at now: one dispatch, then every dispatched item on the
// Runner's workers. It returns when every item has ended and its completion is written,
// with the report and [CycleReport.Err]. Items advance from now, so a simulation can
// drive it on simulated time. When ctx ends, Cycle stops as Run does.
func (r *Runner) Cycle(ctx context.Context, now time.Time) (CycleReport, error) {
	st := r.newStopper(ctx)
	rep := r.finish(r.start(ctx, st, now))
	st.close()
	return rep, rep.Err()
}

// Run starts a cycle now and then every Interval until ctx ends, and returns nil after a
// clean stop. When ctx ends, a dispatch under way still finishes its claim, items waiting
// for a worker are handed back at once, and items in flight run on for up to
// ShutdownTimeout before their contexts are cancelled; Run returns an error wrapping
// [ErrShutdownTimeout] if it had to. Cycles overlap when items are slow, sharing the
// Workers; a dispatch waits until the previous cycle's items have all started.
func (r *Runner) Run(ctx context.Context) error {
	r.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "rota: runner started",
		slog.Duration("interval", r.cfg.Interval), slog.Bool("interval_default", r.intervalDefault),
		slog.Int("workers", r.cfg.Workers), slog.Duration("alarm_after", r.cfg.AlarmAfter))
	st := r.newStopper(ctx)
	ticks, stopTicker := r.cfg.Clock.NewTicker(r.cfg.Interval)
	var cycles sync.WaitGroup
	for ctx.Err() == nil {
		c := r.start(ctx, st, r.cfg.Clock.Now())
		cycles.Go(func() { r.finish(c) })
		select {
		case <-ctx.Done():
		case <-ticks:
		}
	}
	stopTicker()
	cycles.Wait()
	if st.close() {
		err := fmt.Errorf("bridge: Run: items cancelled or writes cut short after %v: %w", r.cfg.ShutdownTimeout, ErrShutdownTimeout)
		r.cfg.Logger.LogAttrs(context.WithoutCancel(ctx), slog.LevelWarn, "rota: runner stopped", slog.Any("error", err))
		return err
	}
	r.cfg.Logger.LogAttrs(context.WithoutCancel(ctx), slog.LevelInfo, "rota: runner stopped")
	return nil
}

// cycle is one cycle in progress.
type cycle struct {
	r       *Runner
	st      *stopper
	now     time.Time // the cycle's now, the claims' time
	started time.Time // on the Runner's Clock
	report  CycleReport
	wg      sync.WaitGroup // one per item, until its outcome is final
	batch   batcher

	mu       sync.Mutex
	running  int  // items started whose write is not queued yet
	starting bool // start is still handing out items
}

// start dispatches and starts every item on a worker, waiting for free workers. Items
// still waiting when ctx ends are handed back in one write, items whose claim would end
// before they start are handed back as late.
func (r *Runner) start(ctx context.Context, st *stopper, now time.Time) *cycle {
	c := &cycle{r: r, st: st, now: now, started: r.cfg.Clock.Now(), starting: true}
	c.batch.c = c
	c.report.Now = now
	batch, err := r.d.Dispatch(st.drain, now)
	c.report.DispatchDuration = r.cfg.Clock.Now().Sub(c.started)
	r.dispatched(&c.report, batch, err)
	items := batch.Items
	c.wg.Add(len(items))
	var reads []watchRead
	if ctx.Err() == nil { // else every item is handed back unstarted
		reads = r.readEntries(st.drain, items)
	}
	for i, it := range items {
		if !r.acquire(ctx) {
			c.write(handBacks(items[i:], i, StatusReleased))
			break
		}
		end := c.claimEnd(it.Claim)
		if !r.cfg.Clock.Now().Before(end) {
			<-r.sem
			c.queue(handBacks(items[i:i+1], i, StatusLate)[0])
			continue
		}
		c.mu.Lock()
		c.running++
		c.mu.Unlock()
		var read *watchRead
		if reads != nil {
			read = &reads[i]
		}
		go r.runItem(c, i, it, end, read)
	}
	c.mu.Lock()
	c.starting = false
	last := c.running == 0
	c.mu.Unlock()
	if last {
		c.batch.flush()
	}
	return c
}

// dispatched fills the report with the dispatch's outcome and the alarms it raises.
func (r *Runner) dispatched(rep *CycleReport, b dispatch.Batch, err error) {
	if err != nil {
		rep.DispatchErr = fmt.Errorf("bridge: dispatch at %v: %w", rep.Now, err)
	} else {
		rep.Alarms, rep.Recovered = r.alarms.update(r.cfg.AlarmAfter, rep.Now, b)
	}
	// The Dispatcher hands out nothing with an error; should a batch come with one, its
	// items are run all the same, not lost.
	rep.Dispatched = len(b.Items)
	rep.Shed = b.ShedUserIDs
	rep.Unrouted = b.Unrouted
	rep.Lanes = b.Lanes
	rep.Items = make([]ItemReport, len(b.Items))
}

// acquire takes a worker slot, or reports false once ctx has ended.
func (r *Runner) acquire(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	select {
	case r.sem <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// claimEnd is when, on the Runner's Clock, an item claimed until c.Until must end: the
// claim's length counted from the cycle's start, less the margin.
func (c *cycle) claimEnd(cl duework.Claim) time.Time {
	length := cl.Until.Sub(c.now)
	return c.started.Add(length - min(c.r.cfg.ClaimMargin, length/4))
}

// watchRead is an item's watchlist entry as read, or the read's error.
type watchRead struct {
	entry tenancy.WatchlistEntry
	err   error
}

// readEntries reads the watchlist entries of items in one tenancy.BatchGetter.GetMany, each
// under its own tenant, when the Bridge's Watchlist has it. It returns nil without it, or
// when the call fails as a whole (one Warn line): the items then read their entries one
// by one.
func (r *Runner) readEntries(ctx context.Context, items []dispatch.Item) []watchRead {
	g, ok := r.b.Watchlist.(tenancy.BatchGetter)
	if !ok || len(items) == 0 {
		return nil
	}
	lookups := make([]tenancy.Lookup, len(items))
	for i, it := range items {
		// An invalid user ID leaves the zero Context: that lookup is refused, and the item
		// fails on the ID before it looks at its read.
		tc, _ := tenancy.NewContext(it.Claim.Entry.UserID)
		lookups[i] = tenancy.Lookup{Tenant: tc, Slug: it.Claim.Entry.WorkKey}
	}
	es, errs, err := g.GetMany(ctx, lookups)
	if err == nil && (len(es) != len(items) || len(errs) != len(items)) {
		err = fmt.Errorf("Watchlist.GetMany returned %d entries and %d outcomes for %d lookups", len(es), len(errs), len(items))
	}
	if err != nil {
		r.cfg.Logger.LogAttrs(context.WithoutCancel(ctx), slog.LevelWarn, "rota: watchlist read failed",
			slog.Int("items", len(items)), slog.Bool("read_each", true), slog.Any("error", err))
		return nil
	}
	reads := make([]watchRead, len(items))
	for i, l := range lookups {
		e, err := es[i], errs[i]
		if err == nil && (e.UserID != l.Tenant.UserID() || e.Slug != l.Slug) {
			// Never run one tenant's pipeline with another's entry.
			e, err = tenancy.WatchlistEntry{}, fmt.Errorf("Watchlist.GetMany answered lookup %d with user %q entry %q", i, e.UserID, e.Slug)
		}
		reads[i] = watchRead{entry: e, err: err}
	}
	return reads
}

// runItem runs one item on the worker slot it holds, under a context that ends at end,
// and queues its write. read is the item's pre-read watchlist entry, or nil.
func (r *Runner) runItem(c *cycle, i int, it dispatch.Item, end time.Time, read *watchRead) {
	ctx, cancel := r.itemContext(c.st.drain, end)
	ir := r.b.runClaimed(ctx, it, c.now, read)
	if cause := context.Cause(ctx); ir.status == StatusError && ctx.Err() != nil && !errors.Is(ir.err, cause) {
		ir.err = fmt.Errorf("%w (%w)", ir.err, cause)
	}
	cancel()
	<-r.sem
	c.queue(pending{i: i, item: it, ir: ir})
	c.mu.Lock()
	c.running--
	last := c.running == 0 && !c.starting
	c.mu.Unlock()
	if last {
		c.batch.flush()
	}
}

// itemContext returns a context under parent that ends at end on the Runner's Clock,
// with ErrClaimEnded as its cause. On the real clock it carries end as its deadline.
func (r *Runner) itemContext(parent context.Context, end time.Time) (context.Context, context.CancelFunc) {
	d := end.Sub(r.cfg.Clock.Now())
	if _, ok := r.cfg.Clock.(realClock); ok {
		return context.WithDeadlineCause(parent, time.Now().Add(d), ErrClaimEnded)
	}
	ctx, cancel := context.WithCancelCause(parent)
	stop := r.cfg.Clock.AfterFunc(d, func() { cancel(ErrClaimEnded) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}

// handBacks returns the writes that hand back the claims of items not run, the first
// being item first of the cycle.
func handBacks(items []dispatch.Item, first int, st ItemStatus) []pending {
	ps := make([]pending, len(items))
	for k, it := range items {
		c := it.Claim
		ir := itemRun{status: st, next: c.Entry, write: true}
		tc, err := tenancy.NewContext(c.Entry.UserID)
		if err != nil {
			ir = itemRun{status: StatusError, err: fmt.Errorf("bridge: %s: %w", itemName(c), err)}
		}
		ir.tc = tc
		ps[k] = pending{i: first + k, item: it, ir: ir}
	}
	return ps
}

// queue hands p's write to the cycle's batch, or settles it when there is none.
func (c *cycle) queue(p pending) {
	if !p.ir.write {
		c.settle(p)
		return
	}
	c.batch.add(p)
}

// settle records p's final outcome.
func (c *cycle) settle(p pending) {
	it := p.item
	c.report.Items[p.i] = ItemReport{Item: it, Status: p.ir.status, Next: p.ir.next, Err: p.ir.err}
	c.wg.Done()
}

// finish waits for the cycle's items, counts them, logs the cycle and tells the Observer.
func (r *Runner) finish(c *cycle) CycleReport {
	c.wg.Wait()
	c.mu.Lock()
	rep := c.report
	c.mu.Unlock()
	rep.Duration = r.cfg.Clock.Now().Sub(c.started)
	for _, it := range rep.Items {
		switch it.Status {
		case StatusHit:
			rep.Hits++
		case StatusMiss:
			rep.Misses++
		case StatusRemoved:
			rep.Removed++
		case StatusError:
			rep.Errors++
		case StatusLostClaim:
			rep.LostClaims++
		case StatusReleased:
			rep.Released++
		case StatusLate:
			rep.Late++
		}
	}
	r.logReport(rep)
	if r.cfg.Observer != nil {
		r.cfg.Observer.ObserveCycle(rep)
	}
	return rep
}
