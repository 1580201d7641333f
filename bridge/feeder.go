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
	"github.com/rotaworks/rota/internal/clock"
	"github.com/rotaworks/rota/tenancy"
)

// defaultFeederInterval is how often a Feeder's Run asks its Sink for room and dispatches
// when FeederConfig.Interval is zero.
const defaultFeederInterval = time.Second

// Sink is a host's queue between a [Feeder] and the workers that run its items elsewhere
// (NATS JetStream, SQS, RabbitMQ, a job table): usually one stream or subject per lane,
// whose consumers decode each message ([DecodeItem]), run it with [Worker.Do] and
// acknowledge it once Do returns.
type Sink interface {
	// Room says how many more items the sink's consumers can start before the claims of
	// items sent now end: Total in all and, for each lane in PerLane, that many of the
	// lane's (a lane absent from PerLane has no cap of its own). It must count against
	// that every item sent and not yet acknowledged — stale ones too, until they are
	// dropped — and say 0 while no consumer is taking items, so that a worker outage stops
	// the claiming instead of filling the queue. A Sink should first drop the items it
	// still holds whose claims have ended or end within the workers' claim margin: no
	// worker would run them, their entries are due again, and a newer claim of the same
	// entry could otherwise sit in the queue beside them.
	Room(ctx context.Context) (dispatch.Take, error)
	// Send enqueues items, all of lane, in their order. An error means none was sent: the
	// Feeder hands them back. Should some have been sent after all, their claims are no
	// longer current, and a Worker runs none of them.
	Send(ctx context.Context, lane dispatch.Lane, items []dispatch.Item) error
}

// FeederConfig holds a Feeder's knobs; the zero value means the defaults.
type FeederConfig struct {
	// Interval is how often Run asks for room and dispatches; zero means
	// one second. It must be at least 10 ms. A round that left ready
	// work its Dispatcher's caps held back, with room to spare, is followed by the next
	// 10 ms after it began.
	Interval time.Duration
	// Clock is the Feeder's clock, nil meaning the real one: rounds' now and the loop's
	// timers.
	Clock Clock
	// Logger receives one line per round that dispatched or failed; nil means
	// slog.Default() at the time NewFeeder is called.
	Logger *slog.Logger
}

// noWorkerRounds is how many rounds in a row, at the least, a lane's room must be zero
// while work waits in it before a Feeder says that no worker is taking the lane.
const noWorkerRounds = 3

// Feeder hands dispatched items to a host's queue with backpressure: each round it asks
// its [Sink] for room, dispatches at most that (dispatch.Dispatcher.DispatchAtMost, by the
// Dispatcher's fairness rules and lane priority), sends each lane's items, and hands back
// with Index.Unclaim the items a Send fails. So items sent and not yet acknowledged never
// exceed the room the Sink last reported. [Feeder.Run] is the loop of a dispatcher
// process; [Feeder.Feed] runs one round, for a serverless handler on a timer. Run it in
// one process or several; the Dispatcher's guarantees hold across them. A Feeder is safe
// for concurrent use.
//
// A lane whose room stays zero while work waits in it — for three rounds in a row and the
// Dispatcher's ClaimFor, long enough for every item in flight to have been acknowledged or
// dropped had any worker been taking the lane — makes one Warn line "rota: no worker is
// taking lane" per episode, and an Info line "rota: lane taken again" ends the episode in
// the first round that finds room in the lane. Rounds at zero room still dispatch, with a
// Take of zero: that claims nothing, and reads one user per lane to see whether work
// waits.
type Feeder struct {
	d        *dispatch.Dispatcher
	idx      duework.Index
	claimFor time.Duration
	sink     Sink
	cfg      FeederConfig // with defaults

	mu      sync.Mutex
	stalled map[dispatch.Lane]*laneStall
	weights weightWatch
}

// laneStall is a lane's run of rounds at zero room with work waiting.
type laneStall struct {
	rounds int
	since  time.Time // the now of the run's first round
	warned bool
}

// NewFeeder returns a Feeder that dispatches with d into sink. It refuses a nil
// Dispatcher or Sink and an Interval out of range, wrapping [ErrInvalidConfig] and naming
// the field.
func NewFeeder(d *dispatch.Dispatcher, sink Sink, cfg FeederConfig) (*Feeder, error) {
	var errs []error
	if d == nil {
		errs = append(errs, fmt.Errorf("%w: NewFeeder: the Dispatcher must not be nil", ErrInvalidConfig))
	}
	if sink == nil {
		errs = append(errs, fmt.Errorf("%w: NewFeeder: the Sink must not be nil", ErrInvalidConfig))
	}
	if cfg.Interval < 0 || (cfg.Interval > 0 && cfg.Interval < minCycleInterval) {
		errs = append(errs, fmt.Errorf("%w: FeederConfig.Interval must be 0 or at least %v, got %v", ErrInvalidConfig, minCycleInterval, cfg.Interval))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	orDefault(&cfg.Interval, defaultFeederInterval)
	orDefault[Clock](&cfg.Clock, clock.Real)
	orDefault(&cfg.Logger, slog.Default())
	return &Feeder{d: d, idx: d.Index(), claimFor: d.Config().ClaimFor, sink: sink, cfg: cfg, stalled: map[dispatch.Lane]*laneStall{}}, nil
}

// Run feeds a round now and then every Interval until ctx ends, and returns nil after a
// clean stop. When ctx ends, a round under way finishes: its dispatch claims, and the
// claimed items are sent, or handed back if ctx had ended before the dispatch returned,
// within DefaultShutdownTimeout; Run returns an error wrapping ErrShutdownTimeout if
// that ran out. A clean stop logs nothing above Info.
func (f *Feeder) Run(ctx context.Context) error {
	clk := f.cfg.Clock
	f.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "rota: feeder started", slog.Duration("interval", f.cfg.Interval))
	logIdleSettings(ctx, f.cfg.Logger, f.d.Config())
	st := newStopper(ctx, clk, DefaultShutdownTimeout)
	ticks, stopTicker := clk.NewTicker(f.cfg.Interval)
	for ctx.Err() == nil {
		started := clk.Now()
		if r := f.round(st.drain, ctx, st.write, started); r.again() && ctx.Err() == nil {
			if d := defaultMinInterval - clk.Now().Sub(started); d > 0 {
				clock.Sleep(ctx, clk, d)
			}
			continue
		}
		select {
		case <-ctx.Done():
		case <-ticks:
		}
	}
	stopTicker()
	if st.close() {
		err := fmt.Errorf("bridge: Feeder.Run: a round cut short after %v: %w", DefaultShutdownTimeout, ErrShutdownTimeout)
		f.cfg.Logger.LogAttrs(context.WithoutCancel(ctx), slog.LevelWarn, "rota: feeder stopped", slog.Any("error", err))
		return err
	}
	f.cfg.Logger.LogAttrs(context.WithoutCancel(ctx), slog.LevelInfo, "rota: feeder stopped")
	return nil
}

// Feed runs one round at now, the claims' time: it asks the Sink for room, dispatches at
// most that with DispatchAtMost, sends each lane's items, and returns the dispatch's
// batch — every item it claimed, sent or not — with the round's failures joined: Room's,
// the dispatch's, and each failed Send's. The items of a lane whose Send failed, or that
// were not sent because ctx ended first, are handed back with one Index.Unclaim per lane,
// which outlives ctx by up to DefaultShutdownTimeout; the error names them. A Room that
// fails ends the round before the dispatch, claiming nothing.
//
// ctx bounds the round's calls: Room, the dispatch and every Send. A serverless handler
// that a scheduler invokes every minute calls Feed once per invocation, with now from its
// clock; a long-running process calls Run instead. A round costs one Room, one dispatch —
// a zero room still reads one user per lane, to tell whether work waits — and one Send per
// lane with items.
func (f *Feeder) Feed(ctx context.Context, now time.Time) (dispatch.Batch, error) {
	st := newStopper(ctx, f.cfg.Clock, DefaultShutdownTimeout)
	defer st.close()
	r := f.round(ctx, ctx, st.drain, now)
	return r.batch, r.err
}

// roundResult is what one round did.
type roundResult struct {
	take       dispatch.Take
	batch      dispatch.Batch
	sent, back int
	err        error // Room's, the dispatch's, and each lane's that was handed back
}

// again reports whether the next round should follow at once: the dispatch left ready
// work its caps held back, with room to spare.
func (r roundResult) again() bool {
	return r.err == nil && drains(r.batch, nil) && len(r.batch.Items) < r.take.Total
}

// round is one round at now. It makes its calls under ctx; a lane's items not yet sent
// when stop ends are handed back unsent, under write. Failures are logged at Warn or
// above, unless stop has ended: a round cut short by a stop logs at Info.
func (f *Feeder) round(ctx, stop, write context.Context, now time.Time) roundResult {
	log, lctx := f.cfg.Logger, context.WithoutCancel(ctx)
	var r roundResult
	take, err := f.sink.Room(ctx)
	if err != nil {
		r.err = fmt.Errorf("bridge: Feeder: Sink.Room: %w", err)
		log.LogAttrs(lctx, failLevel(stop, slog.LevelWarn), "rota: sink room failed", slog.Any("error", err))
		return r
	}
	r.take = take
	b, err := f.d.DispatchAtMost(ctx, now, take)
	if err != nil {
		r.err = fmt.Errorf("bridge: Feeder: dispatch at %v: %w", now, err)
		log.LogAttrs(lctx, failLevel(stop, slog.LevelError), "rota: dispatch failed", slog.Any("error", err))
		return r
	}
	r.batch = b
	f.watchStalls(lctx, now, take, b)
	f.weights.check(lctx, log, f.d, b)
	var errs []error
	for lo := 0; lo < len(b.Items); {
		hi := lo + 1
		for hi < len(b.Items) && b.Items[hi].Lane == b.Items[lo].Lane {
			hi++
		}
		items := b.Items[lo:hi]
		lo = hi
		err := context.Cause(stop)
		if err == nil {
			if err = f.sink.Send(ctx, items[0].Lane, items); err == nil {
				r.sent += len(items)
				continue
			}
			log.LogAttrs(lctx, failLevel(stop, slog.LevelWarn), "rota: send failed", slog.String("lane", string(items[0].Lane)),
				slog.Int("items", len(items)), slog.Any("error", err))
		}
		r.back += f.handBack(write, items)
		errs = append(errs, fmt.Errorf("bridge: Feeder: %d items of lane %q handed back unsent: %w", len(items), items[0].Lane, err))
	}
	r.err = errors.Join(errs...)
	level := slog.LevelInfo
	if len(b.Items) == 0 {
		level = slog.LevelDebug
	}
	log.LogAttrs(lctx, level, "rota: feed", slog.Time("now", now), slog.Int("room", take.Total),
		slog.Int("dispatched", len(b.Items)), slog.Int("sent", r.sent), slog.Int("handed_back", r.back),
		slog.Int("shed", len(b.ShedUserIDs)), slog.Int("unrouted", len(b.Unrouted)),
		slog.Any("lateness", lateness(CycleReport{Now: now, Lanes: b.Lanes})))
	return r
}

// failLevel is the level of a failure in a round: level, or Info once stop has ended, since
// a failure that a stop causes is no fault.
func failLevel(stop context.Context, level slog.Level) slog.Level {
	if stop.Err() != nil {
		return slog.LevelInfo
	}
	return level
}

// handBack hands back items in one Index.Unclaim under ctx and returns how many. A
// hand-back that fails leaves the claims to end.
func (f *Feeder) handBack(ctx context.Context, items []dispatch.Item) int {
	claims := make([]duework.Unclaim, 0, len(items))
	for _, it := range items {
		tc, err := tenancy.NewContext(it.Claim.Entry.UserID)
		if err != nil {
			continue // no Index holds such an entry
		}
		claims = append(claims, duework.Unclaim{Tenant: tc, Claim: it.Claim})
	}
	if _, err := f.idx.Unclaim(ctx, claims); err != nil {
		f.cfg.Logger.LogAttrs(context.WithoutCancel(ctx), slog.LevelWarn, "rota: write failed", slog.String("call", "Unclaim"),
			slog.Int("items", len(claims)), slog.Bool("retry", false), slog.Any("error", err))
	}
	return len(claims)
}

// watchStalls follows, per lane, the rounds at zero room with work waiting (the lane's
// WaitingSince set), and logs the start and the end of each episode in which no worker
// takes the lane.
func (f *Feeder) watchStalls(ctx context.Context, now time.Time, take dispatch.Take, b dispatch.Batch) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range b.Lanes {
		room := max(take.Total, 0)
		if n, ok := take.PerLane[l.Lane]; ok {
			room = min(room, max(n, 0))
		}
		s := f.stalled[l.Lane]
		switch {
		case room > 0:
			if s != nil && s.warned {
				f.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "rota: lane taken again", slog.String("lane", string(l.Lane)),
					slog.Int("room", room), slog.Duration("after", now.Sub(s.since)))
			}
			delete(f.stalled, l.Lane)
		case l.WaitingSince.IsZero():
			if s != nil && !s.warned {
				delete(f.stalled, l.Lane) // nothing waits: no worker was needed
			}
		default:
			if s == nil {
				s = &laneStall{since: now}
				f.stalled[l.Lane] = s
			}
			s.rounds++
			if !s.warned && s.rounds >= noWorkerRounds && now.Sub(s.since) >= f.claimFor {
				s.warned = true
				f.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "rota: no worker is taking lane", slog.String("lane", string(l.Lane)),
					slog.Int("rounds", s.rounds), slog.Duration("for", now.Sub(s.since)), slog.Time("waiting_since", l.WaitingSince))
			}
		}
	}
}
