package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/clock"
	"github.com/rotaworks/rota/tenancy"
)

// DefaultFeederInterval is how often a Feeder's Run asks its Sink for room and dispatches
// when FeederConfig.Interval is zero.
const DefaultFeederInterval = time.Second

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
	// DefaultFeederInterval. It must be at least MinCycleInterval. A round that left ready
	// work its Dispatcher's caps held back, with room to spare, is followed by the next
	// DefaultMinInterval after it began.
	Interval time.Duration
	// Clock is the Feeder's clock, nil meaning the real one: rounds' now and the loop's
	// timers.
	Clock Clock
	// Logger receives one line per round that dispatched or failed; nil means
	// slog.Default() at the time NewFeeder is called.
	Logger *slog.Logger
}

// feedDispatcher is what a Feeder needs of a *dispatch.Dispatcher.
type feedDispatcher interface {
	DispatchAtMost(ctx context.Context, now time.Time, t dispatch.Take) (dispatch.Batch, error)
	Index() duework.Index
}

// Feeder hands dispatched items to a host's queue with backpressure: each round it asks
// its [Sink] for room, dispatches at most that (dispatch.Dispatcher.DispatchAtMost, by the
// Dispatcher's fairness rules and lane priority), sends each lane's items, and hands back
// with Index.Unclaim the items a Send fails. So items sent and not yet acknowledged never
// exceed the room the Sink last reported. Run it in one process or several; the
// Dispatcher's guarantees hold across them.
type Feeder struct {
	d    feedDispatcher
	idx  duework.Index
	sink Sink
	cfg  FeederConfig // with defaults
}

// NewFeeder returns a Feeder that dispatches with d into sink. It refuses a nil
// Dispatcher or Sink and an Interval out of range, wrapping [ErrInvalidConfig] and naming
// the field.
func NewFeeder(d *dispatch.Dispatcher, sink Sink, cfg FeederConfig) (*Feeder, error) {
	var fd feedDispatcher
	if d != nil {
		fd = d
	}
	return newFeeder(fd, sink, cfg)
}

func newFeeder(d feedDispatcher, sink Sink, cfg FeederConfig) (*Feeder, error) {
	var errs []error
	if d == nil {
		errs = append(errs, fmt.Errorf("%w: NewFeeder: the Dispatcher must not be nil", ErrInvalidConfig))
	}
	if sink == nil {
		errs = append(errs, fmt.Errorf("%w: NewFeeder: the Sink must not be nil", ErrInvalidConfig))
	}
	if cfg.Interval < 0 || (cfg.Interval > 0 && cfg.Interval < MinCycleInterval) {
		errs = append(errs, fmt.Errorf("%w: FeederConfig.Interval must be 0 or at least %v, got %v", ErrInvalidConfig, MinCycleInterval, cfg.Interval))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	orDefault(&cfg.Interval, DefaultFeederInterval)
	orDefault[Clock](&cfg.Clock, clock.Real)
	orDefault(&cfg.Logger, slog.Default())
	return &Feeder{d: d, idx: d.Index(), sink: sink, cfg: cfg}, nil
}

// Run feeds a round now and then every Interval until ctx ends, and returns nil after a
// clean stop. When ctx ends, a round under way finishes: its dispatch claims, and the
// claimed items are sent, or handed back if ctx had ended before the dispatch returned,
// within DefaultShutdownTimeout; Run returns an error wrapping ErrShutdownTimeout if
// that ran out.
func (f *Feeder) Run(ctx context.Context) error {
	clk := f.cfg.Clock
	f.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "rota: feeder started", slog.Duration("interval", f.cfg.Interval))
	st := newStopper(ctx, clk, DefaultShutdownTimeout)
	ticks, stopTicker := clk.NewTicker(f.cfg.Interval)
	for ctx.Err() == nil {
		started := clk.Now()
		if f.round(ctx, st, started) {
			if d := DefaultMinInterval - clk.Now().Sub(started); d > 0 {
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

// round is one round at now. It reports whether the next should follow at once: the
// dispatch left ready work its caps held back, with room to spare.
func (f *Feeder) round(ctx context.Context, st *stopper, now time.Time) (again bool) {
	log := f.cfg.Logger
	take, err := f.sink.Room(st.drain)
	if err != nil {
		log.LogAttrs(context.WithoutCancel(ctx), slog.LevelWarn, "rota: sink room failed", slog.Any("error", err))
		return false
	}
	if take.Total <= 0 {
		log.LogAttrs(context.WithoutCancel(ctx), slog.LevelDebug, "rota: feed", slog.Int("room", take.Total))
		return false
	}
	b, err := f.d.DispatchAtMost(st.drain, now, take)
	if err != nil {
		log.LogAttrs(context.WithoutCancel(ctx), slog.LevelError, "rota: dispatch failed", slog.Any("error", err))
		return false
	}
	sent, back := 0, 0
	for lo := 0; lo < len(b.Items); {
		hi := lo + 1
		for hi < len(b.Items) && b.Items[hi].Lane == b.Items[lo].Lane {
			hi++
		}
		items := b.Items[lo:hi]
		lo = hi
		if err := ctx.Err(); err != nil {
			back += f.handBack(st.write, items, err)
			continue
		}
		if err := f.sink.Send(st.drain, items[0].Lane, items); err != nil {
			back += f.handBack(st.write, items, err)
			continue
		}
		sent += len(items)
	}
	level := slog.LevelInfo
	if len(b.Items) == 0 {
		level = slog.LevelDebug
	}
	log.LogAttrs(context.WithoutCancel(ctx), level, "rota: feed", slog.Time("now", now), slog.Int("room", take.Total),
		slog.Int("dispatched", len(b.Items)), slog.Int("sent", sent), slog.Int("handed_back", back),
		slog.Int("shed", len(b.ShedUserIDs)), slog.Int("unrouted", len(b.Unrouted)),
		slog.Any("lateness", lateness(CycleReport{Now: now, Lanes: b.Lanes})))
	return drains(b, nil) && len(b.Items) < take.Total && ctx.Err() == nil
}

// handBack hands back items that were not sent because of cause, in one Index.Unclaim,
// and returns how many. A hand-back that fails leaves the claims to end.
func (f *Feeder) handBack(ctx context.Context, items []dispatch.Item, cause error) int {
	claims := make([]duework.Unclaim, 0, len(items))
	for _, it := range items {
		tc, err := tenancy.NewContext(it.Claim.Entry.UserID)
		if err != nil {
			continue // no Index holds such an entry
		}
		claims = append(claims, duework.Unclaim{Tenant: tc, Claim: it.Claim})
	}
	f.cfg.Logger.LogAttrs(context.WithoutCancel(ctx), slog.LevelWarn, "rota: items handed back unsent",
		slog.String("lane", string(items[0].Lane)), slog.Int("items", len(items)), slog.Any("error", cause))
	if _, err := f.idx.Unclaim(ctx, claims); err != nil {
		f.cfg.Logger.LogAttrs(context.WithoutCancel(ctx), slog.LevelWarn, "rota: write failed", slog.String("call", "Unclaim"),
			slog.Int("items", len(claims)), slog.Bool("retry", false), slog.Any("error", err))
	}
	return len(claims)
}
