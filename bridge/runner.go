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

// Runner defaults, used for the zero values of [RunnerConfig].
const (
	// DefaultInterval is how often Run starts a cycle.
	DefaultInterval = time.Minute
	// DefaultWorkers is how many pipelines run at once. Pipelines usually wait on the
	// network, so this is not tied to the number of CPUs.
	DefaultWorkers = 8
)

// ErrInvalidConfig is returned by [NewRunner] for a nil Bridge or Dispatcher or a negative
// Interval or Workers. The wrapping error names the field.
var ErrInvalidConfig = errors.New("bridge: invalid runner config")

// Clock is the Runner's only source of time: the narrowest interface that a loop needs.
// A nil Clock in [RunnerConfig] means the real one; tests pass a fake or run the Runner
// inside a testing/synctest bubble.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTicker returns a channel that receives a value every d, and a function that
	// stops the ticker. Like time.Ticker, it drops ticks for a slow receiver.
	NewTicker(d time.Duration) (c <-chan time.Time, stop func())
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// RunnerConfig holds the Runner's knobs; the zero value means the defaults.
type RunnerConfig struct {
	// Interval is how often Run starts a cycle; zero means DefaultInterval.
	Interval time.Duration
	// Workers bounds how many items run at once, across all cycles of the Runner; zero
	// means DefaultWorkers.
	Workers int
	// Clock is the Runner's clock; nil means the real clock.
	Clock Clock
	// Logger receives one Info line per cycle, a Warn or Error line per failure and a
	// Warn line per noisy-neighbour alarm; nil means slog.Default() at the time NewRunner
	// is called.
	Logger *slog.Logger
	// Observer, when not nil, is told about every cycle (see Observer).
	Observer Observer
	// ShedAlarmAfter is the noisy-neighbour alarm's threshold: a user shed for this many
	// consecutive cycles is named in CycleReport.ShedAlarms and a Warn line, once per
	// streak. Zero means DefaultShedAlarmAfter; a negative value turns the alarm off.
	ShedAlarmAfter int
}

// batcher is what the Runner needs of a *dispatch.Dispatcher.
type batcher interface {
	Cycle(ctx context.Context, now time.Time) (dispatch.CycleInfo, error)
}

// Runner drives the cycle: every interval one dispatch, then each dispatched item through
// [Bridge.RunDueItem] on a bounded pool of workers. [Runner.Run] is the long-running loop of
// a daemon; [Runner.Cycle] runs exactly one cycle, for a serverless handler on a timer or a
// test on a simulated clock. A Runner is safe for concurrent use; Cycle and Run calls share
// its pool of workers.
type Runner struct {
	b        *Bridge
	d        batcher
	interval time.Duration
	clock    Clock
	log      *slog.Logger
	sem      chan struct{} // one slot per worker
	obs      Observer

	shedMu sync.Mutex
	shed   dispatch.ShedTracker // Threshold 0: the alarm is off
}

// NewRunner returns a Runner that dispatches with d and runs items through b. It refuses a
// nil or incomplete Bridge (see [ErrInvalidBridge]), a nil Dispatcher and a negative
// Interval or Workers, wrapping [ErrInvalidConfig] and naming the field; zero values mean
// [DefaultInterval], [DefaultWorkers], the real clock and slog.Default().
//
// b's Index should be the one d dispatches from: the Runner completes d's claims in it.
func NewRunner(b *Bridge, d *dispatch.Dispatcher, cfg RunnerConfig) (*Runner, error) {
	var bt batcher
	if d != nil {
		bt = d
	}
	return newRunner(b, bt, cfg)
}

func newRunner(b *Bridge, d batcher, cfg RunnerConfig) (*Runner, error) {
	var errs []error
	if b == nil {
		errs = append(errs, fmt.Errorf("%w: Bridge is nil", ErrInvalidConfig))
	} else if err := b.check(); err != nil {
		errs = append(errs, err)
	}
	if d == nil {
		errs = append(errs, fmt.Errorf("%w: Dispatcher is nil", ErrInvalidConfig))
	}
	if cfg.Interval < 0 {
		errs = append(errs, fmt.Errorf("%w: Interval must not be negative, got %v", ErrInvalidConfig, cfg.Interval))
	}
	if cfg.Workers < 0 {
		errs = append(errs, fmt.Errorf("%w: Workers must not be negative, got %d", ErrInvalidConfig, cfg.Workers))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	r := &Runner{b: b, d: d, interval: cfg.Interval, clock: cfg.Clock, log: cfg.Logger, obs: cfg.Observer}
	switch {
	case cfg.ShedAlarmAfter == 0:
		r.shed.Threshold = DefaultShedAlarmAfter
	case cfg.ShedAlarmAfter > 0:
		r.shed.Threshold = cfg.ShedAlarmAfter
	}
	if r.interval == 0 {
		r.interval = DefaultInterval
	}
	workers := cfg.Workers
	if workers == 0 {
		workers = DefaultWorkers
	}
	r.sem = make(chan struct{}, workers)
	if r.clock == nil {
		r.clock = realClock{}
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	return r, nil
}

// CycleReport is what one cycle did. Counts are of items; lists are in dispatch order.
type CycleReport struct {
	// Now is the cycle's time.
	Now time.Time
	// Dispatched is the number of items the dispatch handed out.
	Dispatched int
	// Hits, Misses and Removed count the items that ended so (see ItemStatus).
	Hits, Misses, Removed int
	// Errors counts the items that failed (StatusError); their errors are in Items and
	// in the error Cycle returns.
	Errors int
	// LostClaims counts items whose claim was gone when they completed: they ran past
	// their claim, or the host rescheduled them meanwhile. Nothing of theirs was written.
	// Claims lost to another dispatcher at dispatch time are in Lanes instead.
	LostClaims int
	// Released counts items that were never started because ctx ended first.
	Released int
	// Shed names the users who had due work this cycle and did not get all of it
	// dispatched (dispatch.Batch.ShedUserIDs); their work stays due.
	Shed []string
	// Unrouted lists the users whose lane could not be resolved; their work stays due.
	Unrouted []dispatch.Unrouted
	// Lanes reports each lane of the dispatch.
	Lanes []dispatch.LaneReport
	// Items reports every dispatched item, in dispatch order.
	Items []ItemReport
	// DispatchErr is the dispatch's error, if it failed.
	DispatchErr error
	// ShedAlarms are this cycle's noisy-neighbour alarms, one per lane with a user whose
	// shed streak reached RunnerConfig.ShedAlarmAfter in this cycle (see ShedAlarm).
	ShedAlarms []ShedAlarm
	// DispatchDuration is how long the dispatch took and Duration how long the whole
	// cycle took, dispatch to the last item's end, both on the Runner's Clock.
	DispatchDuration, Duration time.Duration
}

// ItemReport is how one dispatched item ended.
type ItemReport struct {
	Item   dispatch.Item
	Status ItemStatus
	// Next is the due-work entry as written back, for hits, misses and failed items that
	// were rescheduled for a retry; zero when nothing was written.
	Next duework.Entry
	// Err is the item's error, for StatusError and StatusLostClaim.
	Err error
}

// Err returns the cycle's failures joined: the dispatch error and every failed item's
// error. Lost claims are not failures (the entry was handled elsewhere) and are left out;
// they are in Items.
func (r CycleReport) Err() error {
	var errs []error
	if r.DispatchErr != nil {
		errs = append(errs, r.DispatchErr)
	}
	for _, it := range r.Items {
		if it.Status == StatusError && it.Err != nil {
			errs = append(errs, it.Err)
		}
	}
	return errors.Join(errs...)
}

// cycle is one cycle in progress.
type cycle struct {
	report  CycleReport
	wg      sync.WaitGroup // the cycle's started items
	started time.Time      // on the Runner's Clock
}

// Cycle runs exactly one cycle at now: one dispatch, then every dispatched item on the
// Runner's pool of workers, each item under a context that ends with its claim. It returns
// when every item has finished, with the report and [CycleReport.Err].
//
// Items are advanced from now, so a test or simulation can drive the Runner on a
// simulated clock. If ctx ends while items wait for a worker, those items are released:
// their claims are handed back with the entries unchanged, so they are due again at once.
// Running items see ctx end through their own context.
func (r *Runner) Cycle(ctx context.Context, now time.Time) (CycleReport, error) {
	c := r.start(ctx, ctx, now)
	rep := r.finish(c)
	return rep, rep.Err()
}

// Run starts a cycle now and then every Interval, until ctx ends. Then it stops
// dispatching, releases the items of the current cycle that have not started (see Cycle),
// and waits for the items in flight before it returns ctx.Err(). Items in flight are not
// cancelled when ctx ends — a shutdown drains — but each item's context ends with its
// claim, so a pipeline that honours its context finishes within ClaimFor.
//
// Cycles may overlap: a cycle starts on schedule while slow items of the previous one are
// still running, and the pool of Workers bounds them together. When every worker is busy,
// the dispatch of the next cycle waits, so work is not claimed faster than it is done.
func (r *Runner) Run(ctx context.Context) error {
	ticks, stop := r.clock.NewTicker(r.interval)
	defer stop()
	var cycles sync.WaitGroup
	defer cycles.Wait()
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c := r.start(ctx, context.WithoutCancel(ctx), r.clock.Now())
		cycles.Add(1)
		go func() {
			defer cycles.Done()
			r.finish(c)
		}()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticks:
		}
	}
}

// start dispatches and starts every item on a worker, waiting for free workers; items
// still waiting when ctx ends are released. Items run under itemBase.
func (r *Runner) start(ctx, itemBase context.Context, now time.Time) *cycle {
	c := &cycle{report: CycleReport{Now: now}, started: r.clock.Now()}
	info, err := r.d.Cycle(ctx, now)
	c.report.DispatchDuration = r.clock.Now().Sub(c.started)
	batch := info.Batch
	if err != nil {
		c.report.DispatchErr = fmt.Errorf("bridge: dispatch at %v: %w", now, err)
	} else {
		c.report.ShedAlarms = r.recordShed(info)
	}
	// A failed dispatch may still have claimed items; run whatever it handed out.
	c.report.Dispatched = len(batch.Items)
	c.report.Shed = batch.ShedUserIDs
	c.report.Unrouted = batch.Unrouted
	c.report.Lanes = batch.Lanes
	c.report.Items = make([]ItemReport, len(batch.Items))
	for i, it := range batch.Items {
		c.report.Items[i].Item = it
		if !r.acquire(ctx) {
			for j := i; j < len(batch.Items); j++ {
				c.report.Items[j] = r.release(ctx, batch.Items[j])
			}
			break
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer func() { <-r.sem }()
			ictx, cancel := context.WithTimeout(itemBase, it.Claim.Until.Sub(now))
			defer cancel()
			ir := r.b.run(ictx, it, now)
			c.report.Items[i] = ItemReport{Item: it, Status: ir.status, Next: ir.next, Err: ir.err}
		}()
	}
	return c
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

// release hands an unstarted item's claim back with its entry unchanged, so that it is due
// again at once instead of when the claim ends.
func (r *Runner) release(ctx context.Context, it dispatch.Item) ItemReport {
	rep := ItemReport{Item: it, Status: StatusReleased}
	e := it.Claim.Entry
	tc, err := tenancy.NewContext(e.UserID)
	if err == nil {
		err = r.b.Index.Complete(context.WithoutCancel(ctx), tc, it.Claim, e)
	}
	if err != nil {
		rep.Status = StatusError
		if errors.Is(err, duework.ErrClaimLost) {
			rep.Status = StatusLostClaim
		}
		rep.Err = fmt.Errorf("bridge: user %q entry %q: release unstarted item: %w", e.UserID, e.WorkKey, err)
	}
	return rep
}

// finish waits for the cycle's items, counts them and logs the cycle.
func (r *Runner) finish(c *cycle) CycleReport {
	c.wg.Wait()
	rep := c.report
	rep.Duration = r.clock.Now().Sub(c.started)
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
		}
	}
	r.logReport(rep)
	if r.obs != nil {
		r.obs.ObserveCycle(rep)
	}
	return rep
}

func (r *Runner) logReport(rep CycleReport) {
	ctx := context.Background()
	if rep.DispatchErr != nil {
		r.log.LogAttrs(ctx, slog.LevelError, "rota: dispatch failed", slog.Any("error", rep.DispatchErr))
	}
	for _, u := range rep.Unrouted {
		r.log.LogAttrs(ctx, slog.LevelWarn, "rota: user unrouted",
			slog.String("user", u.UserID), slog.Any("error", u.Err))
	}
	for _, it := range rep.Items {
		if it.Err == nil {
			continue
		}
		r.log.LogAttrs(ctx, slog.LevelWarn, "rota: item failed",
			slog.String("user", it.Item.Claim.Entry.UserID),
			slog.String("work_key", it.Item.Claim.Entry.WorkKey),
			slog.String("lane", string(it.Item.Lane)),
			slog.String("status", it.Status.String()),
			slog.Any("error", it.Err))
	}
	r.logShedAlarms(rep)
	r.log.LogAttrs(ctx, slog.LevelInfo, "rota: cycle",
		slog.Time("now", rep.Now),
		slog.Int("dispatched", rep.Dispatched),
		slog.Int("hits", rep.Hits),
		slog.Int("misses", rep.Misses),
		slog.Int("removed", rep.Removed),
		slog.Int("errors", rep.Errors),
		slog.Int("lost_claims", rep.LostClaims),
		slog.Int("released", rep.Released),
		slog.Int("shed", len(rep.Shed)),
		slog.Int("unrouted", len(rep.Unrouted)),
		slog.Int("dispatch_lost_claims", dispatchLostClaims(rep.Lanes)),
		slog.Int("shed_alarms", len(rep.ShedAlarms)),
		slog.Duration("dispatch_duration", rep.DispatchDuration),
		slog.Duration("duration", rep.Duration))
}
