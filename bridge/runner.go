package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/internal/clock"
	"github.com/rotaworks/rota/internal/localstart"
)

// ErrShutdownTimeout is the cause of an item's context when the context of Run or Cycle
// ended RunnerConfig.ShutdownTimeout ago and the item still ran, or when Worker.Stop ran
// out of time. Run and Stop return it, wrapped, after such a stop.
var ErrShutdownTimeout = errors.New("bridge: shutdown timeout")

// dispatcher is what the Runner needs of a *dispatch.Dispatcher.
type dispatcher interface {
	Dispatch(ctx context.Context, now time.Time) (dispatch.Batch, error)
	Config() dispatch.Config
}

// Runner drives the cycle: every interval one dispatch and one read of the items'
// watchlist entries, then each item through the Bridge on a bounded pool of workers, its
// completion written in a batch. It is built on a [Worker] of its own. [Runner.Run] is
// the long-running loop of a daemon; [Runner.Cycle] runs exactly one cycle, for a
// serverless handler on a timer or a test on a simulated clock. A Runner is safe for
// concurrent use; Cycle and Run calls share its pool of workers.
type Runner struct {
	b               *Bridge
	d               dispatcher
	cfg             RunnerConfig // with defaults
	intervalDefault bool
	holdFor         time.Duration // the dispatcher's HoldFor
	w               *Worker
	wake            chan struct{}
	cycles          cycleSet // cycles started whose items have not all settled
	alarms          alarmState
	weights         weightWatch
	late            lateState
	skew            skewState
}

// NewRunner returns a Runner that dispatches with d and runs items through b, whose Index
// should be the one d dispatches from. It refuses a nil or incomplete Bridge, a nil
// Dispatcher, a knob out of range (an Interval or MinInterval below 10 ms
// among them) and a claim margin that cannot cover d's MaxClockSkew plus FlushInterval
// (see RunnerConfig.ClaimMargin), wrapping [ErrInvalidConfig] and naming the field.
func NewRunner(b *Bridge, d *dispatch.Dispatcher, cfg RunnerConfig) (*Runner, error) {
	var dd dispatcher
	if d != nil {
		dd = d
	}
	return newRunner(b, dd, cfg)
}

func newRunner(b *Bridge, d dispatcher, cfg RunnerConfig) (*Runner, error) {
	errs := []error{b.check(true), cfg.validate()}
	var wc WorkerConfig
	var holdFor time.Duration
	if d == nil {
		errs = append(errs, fmt.Errorf("%w: the Dispatcher must not be nil", ErrInvalidConfig))
	} else {
		var err error
		dc := d.Config()
		wc, err = cfg.worker(dc)
		holdFor = dc.HoldFor
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	r := &Runner{b: b, d: d, cfg: cfg.withDefaults(), intervalDefault: cfg.Interval == 0, holdFor: holdFor, wake: make(chan struct{}, 1)}
	r.w = newWorker(b, wc)
	return r, nil
}

// Cycle runs exactly one cycle at now: one dispatch, then every dispatched item on the
// Runner's workers. It returns when every item has ended and its completion is written,
// with the report and [CycleReport.Err]. Items advance from now, so a simulation can
// drive it on simulated time; the claim rule measures how long they wait and run on the
// Runner's Clock. When ctx ends, Cycle stops as Run does.
func (r *Runner) Cycle(ctx context.Context, now time.Time) (CycleReport, error) {
	st := newStopper(ctx, r.cfg.Clock, r.cfg.ShutdownTimeout)
	rep := r.finish(r.start(ctx, st, now))
	st.close()
	return rep, rep.Err()
}

// Run starts a cycle now and then every Interval until ctx ends, and returns nil after a
// clean stop. A cycle that left ready work it could not dispatch is followed by the next
// as soon as its items have all started on a worker, at least MinInterval after it began,
// so a backlog drains at the speed of the workers; so is a cycle that dispatched nothing
// while ready users waited and an earlier cycle's items were still running or being
// written (an index such as PostgreSQL's passes over the users a concurrent write holds,
// and the Runner's own completions are such writes). Any other cycle whose dispatch ran
// while the Runner wrote completions, which may have held users it passed over, is
// followed by the next once the cycles open when it began have all ended, their writes
// with them, at least MinInterval after it began, rather than an Interval later.
// [Runner.Wake] starts a cycle early the same way. When ctx ends, a dispatch under way
// still finishes its claim, items waiting for a worker are handed back at once, and items
// in flight run on for up to ShutdownTimeout before their contexts are cancelled; Run
// returns an error wrapping [ErrShutdownTimeout] if it had to. Cycles overlap when items
// are slow, sharing the Workers; a dispatch waits until the previous cycle's items have
// all started.
func (r *Runner) Run(ctx context.Context) error {
	r.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "rota: runner started",
		slog.Duration("interval", r.cfg.Interval), slog.Bool("interval_default", r.intervalDefault),
		slog.Duration("min_interval", r.cfg.MinInterval), slog.Int("workers", r.cfg.Workers),
		slog.Duration("claim_margin", r.w.cfg.ClaimMargin), slog.Duration("alarm_after", r.cfg.AlarmAfter))
	logIdleSettings(ctx, r.cfg.Logger, r.d.Config())
	st := newStopper(ctx, r.cfg.Clock, r.cfg.ShutdownTimeout)
	ticks, stopTicker := r.cfg.Clock.NewTicker(r.cfg.Interval)
	var cycles sync.WaitGroup
	for ctx.Err() == nil {
		select {
		case <-r.wake: // this cycle's dispatch serves it
		default:
		}
		c := r.start(ctx, st, r.cfg.Clock.Now())
		cycles.Go(func() { r.finish(c) })
		r.pause(ctx, ticks, c)
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

// Wake makes Run start its next cycle without waiting for Interval, MinInterval after the
// last one began: a host calls it after scheduling work due now, or from a notification
// that such work was scheduled elsewhere. It never blocks; wakes that come before the
// next cycle's dispatch count as one.
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// pause waits until Run may start the next cycle: the next tick, or MinInterval after c
// began when c drains a backlog or Wake was called, or when c dispatched while the
// Worker wrote and the cycles open when c began have all ended since.
func (r *Runner) pause(ctx context.Context, ticks <-chan time.Time, c *cycle) {
	for !c.drain {
		var ended chan struct{}
		if c.besideWrites {
			var done bool
			if ended, done = r.cycles.before(c.seq); done {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticks:
			return
		case <-r.wake:
		case <-ended:
			continue
		}
		break
	}
	if d := r.cfg.MinInterval - r.cfg.Clock.Now().Sub(c.started); d > 0 {
		clock.Sleep(ctx, r.cfg.Clock, d)
	}
}

// cycleSet is the Runner's open cycles, by the order they began, so that a cycle can wait
// for those that began before it to end.
type cycleSet struct {
	mu    sync.Mutex
	next  uint64
	open  map[uint64]bool
	ended chan struct{} // closed, and replaced, when a cycle ends
}

// begin opens a cycle and returns its place, and whether an earlier cycle is still open.
func (s *cycleSet) begin() (seq uint64, others bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open == nil {
		s.open, s.ended = map[uint64]bool{}, make(chan struct{})
	}
	others = len(s.open) > 0
	s.next++
	s.open[s.next] = true
	return s.next, others
}

// end ends the cycle at seq.
func (s *cycleSet) end(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.open, seq)
	close(s.ended)
	s.ended = make(chan struct{})
}

// before reports whether every cycle that began before seq has ended and, if not, returns
// a channel closed when a cycle next ends.
func (s *cycleSet) before(seq uint64) (ended chan struct{}, done bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for o := range s.open {
		if o < seq {
			return s.ended, false
		}
	}
	return nil, true
}

// cycle is one cycle in progress: the owner of its items' jobs.
type cycle struct {
	r       *Runner
	st      *stopper
	now     time.Time // the cycle's now, the claims' time
	started time.Time // on the Runner's Clock
	drain   bool      // the dispatch left ready work it could not dispatch, or passed it over
	// besideWrites: the Worker was writing completions or hand-backs while it
	// dispatched, so its dispatch may have passed over users whose rows those writes held.
	besideWrites bool
	seq          uint64 // the cycle's place in the order cycles began
	wg           sync.WaitGroup

	mu       sync.Mutex
	report   CycleReport
	unqueued int  // items whose write is not queued yet
	starting bool // start is still handing out items
}

func (c *cycle) queued(*job) {
	c.mu.Lock()
	c.unqueued--
	last := c.unqueued == 0 && !c.starting
	c.mu.Unlock()
	if last {
		c.r.w.writes.flush()
	}
}

func (c *cycle) settled(j *job) {
	c.mu.Lock()
	c.report.Items[j.i] = j.report()
	c.mu.Unlock()
	c.wg.Done()
}

func (c *cycle) flushFailed(err error) {
	c.mu.Lock()
	c.report.FlushErrs = append(c.report.FlushErrs, err)
	c.mu.Unlock()
}

// start dispatches and hands the batch to the Runner's Worker, which reads the items'
// watchlist entries in one call and starts every item on a worker, in dispatch order,
// waiting for free workers. Items still waiting when ctx ends are handed back at once,
// and items the claim rule does not let start are handed back as late.
func (r *Runner) start(ctx context.Context, st *stopper, now time.Time) *cycle {
	c := &cycle{r: r, st: st, now: now, started: r.cfg.Clock.Now(), starting: true}
	c.report.Now = now
	var overlaps bool // an earlier cycle's items still run or are being written
	c.seq, overlaps = r.cycles.begin()
	writes := r.w.writes.calls()
	// Claimed for the Worker to start itself: the items never leave this process.
	batch, err := r.d.Dispatch(localstart.With(st.drain, r.w.local), now)
	c.besideWrites = r.w.writes.overlapped(writes)
	c.report.DispatchDuration = r.cfg.Clock.Now().Sub(c.started)
	r.dispatched(st.drain, &c.report, batch, err)
	c.drain = drains(batch, err) || overlaps && passedOver(batch, err)
	sp := span{now: now, at: c.started, clock: r.cfg.Clock}
	jobs := make([]*job, len(batch.Items))
	for i, it := range batch.Items {
		j := r.w.newJob(it, sp, c, i)
		j.fromStart = true
		j.run, j.write = st.drain, st.write
		jobs[i] = j
	}
	c.unqueued = len(jobs)
	c.wg.Add(len(jobs))
	r.w.admit(len(jobs)) // a Runner's Worker is never stopped
	r.w.doBatch(ctx, jobs)
	c.mu.Lock()
	c.starting = false
	last := c.unqueued == 0
	c.mu.Unlock()
	if last {
		r.w.writes.flush()
	}
	return c
}

// dispatched fills the report with the dispatch's outcome and the alarms it raises.
func (r *Runner) dispatched(ctx context.Context, rep *CycleReport, b dispatch.Batch, err error) {
	if err != nil {
		rep.DispatchErr = fmt.Errorf("bridge: dispatch at %v: %w", rep.Now, err)
	} else {
		rep.Alarms, rep.Recovered = r.alarms.update(r.cfg.AlarmAfter, rep.Now, b)
		rep.LateAlarms, rep.LateRecovered = r.late.update(r.cfg.AlarmAfter, rep.Now, b)
		r.weights.check(ctx, r.cfg.Logger, r.d, b)
	}
	r.watchSkew(ctx, rep, b, err)
	// The Dispatcher hands out nothing with an error; should a batch come with one, its
	// items are run all the same, not lost.
	rep.Dispatched = len(b.Items)
	rep.Shed = b.ShedUserIDs
	rep.Unrouted = b.Unrouted
	rep.Lanes = b.Lanes
	rep.Items = make([]ItemReport, len(b.Items))
}

// drains reports whether the dispatch of b handed out all its lanes could give while
// ready work was left waiting: a user shed, or a lane keeping a ready user waiting.
func drains(b dispatch.Batch, err error) bool {
	return err == nil && len(b.Items) > 0 && (len(b.ShedUserIDs) > 0 || keepsWaiting(b))
}

// passedOver reports whether the dispatch of b handed out nothing while a lane had a ready
// user waiting: one the index passed over, such as a user whose row a concurrent write
// held. Run tries again MinInterval later only while an earlier cycle is unfinished, so an
// index that keeps passing a user over costs one dispatch per Interval, not a busy loop.
func passedOver(b dispatch.Batch, err error) bool {
	return err == nil && len(b.Items) == 0 && keepsWaiting(b)
}

// keepsWaiting reports whether a lane of b kept a ready user waiting.
func keepsWaiting(b dispatch.Batch) bool {
	return slices.ContainsFunc(b.Lanes, func(l dispatch.LaneReport) bool { return !l.WaitingSince.IsZero() })
}

// finish waits for the cycle's items, counts them, logs the cycle and tells the Observer.
func (r *Runner) finish(c *cycle) CycleReport {
	c.wg.Wait()
	r.cycles.end(c.seq)
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
		case StatusDuplicate:
			rep.Duplicates++
		case StatusPaused:
			rep.Paused++
		}
	}
	r.logReport(rep)
	if r.cfg.Observer != nil {
		r.cfg.Observer.ObserveCycle(rep)
	}
	return rep
}
