package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/internal/clock"
)

// ErrInvalidConfig is returned by NewRunner, NewWorker, NewFeeder, PlanLanes, PlanLimits
// and the Bridge's methods when a Bridge, a config or a plan table cannot work; the
// wrapping error names the field and its value. Every problem is reported at once, joined.
var ErrInvalidConfig = errors.New("bridge: invalid config")

// Runner defaults, used for the zero values of [RunnerConfig].
const (
	// defaultInterval is how often Run starts a cycle.
	defaultInterval = time.Minute
	// defaultMinInterval is the least time from one cycle's start to the next when Run
	// drains a backlog or is woken (see RunnerConfig.MinInterval).
	defaultMinInterval = minCycleInterval
	// minCycleInterval is the floor of RunnerConfig.Interval, RunnerConfig.MinInterval
	// and FeederConfig.Interval: a dispatch costs a few index calls per lane even when
	// nothing is due, and more than a hundred a second buy no promptness that
	// Runner.Wake and draining do not.
	minCycleInterval = 10 * time.Millisecond
	// defaultWorkers is how many pipelines run at once. Pipelines usually wait on the
	// network, so this is not tied to the number of CPUs.
	defaultWorkers = 8
	// defaultFlushItems is how many completions the Runner gathers before it writes them
	// in one Index.CompleteMany.
	defaultFlushItems = 100
	// defaultFlushInterval is the longest a completion waits for its batch to be written,
	// unless a write of its cycle is in flight then: it goes in the next.
	defaultFlushInterval = 100 * time.Millisecond
	// DefaultClaimMargin is how long before its claim ends an item's context ends: time
	// for the pipeline to return and its completion to be written, and for the clocks of
	// replicas to disagree, before another dispatch may take the entry. It is the margin
	// of a zero Bridge.ClaimMargin, WorkerConfig.ClaimMargin and RunnerConfig.ClaimMargin.
	DefaultClaimMargin = 5 * time.Second
	// DefaultShutdownTimeout is how long the items in flight may run on after Run's
	// context ends, and then how long the last writes may take.
	DefaultShutdownTimeout = 10 * time.Second
	// defaultAlarmIntervals is the noisy-neighbour alarm's threshold in Intervals: a lane
	// that keeps a user waiting longer than this many Intervals raises it.
	defaultAlarmIntervals = 10
	// DefaultAlarmAfterErrors is the ErrorStreak at which a source is reported failing.
	DefaultAlarmAfterErrors = 5
)

// RunnerConfig holds the Runner's knobs; the zero value means the defaults.
type RunnerConfig struct {
	// Interval is how often Run starts a cycle; zero means one minute. It must be at
	// least 10 ms.
	Interval time.Duration
	// MinInterval is the least time from one cycle's start to the next when Run starts
	// one before Interval has passed: after a cycle that left ready work it could not
	// dispatch (a backlog drains at the speed of the workers), or after Runner.Wake. Zero
	// means 10 ms; it must lie in [10 ms, Interval].
	MinInterval time.Duration
	// Workers bounds how many items run at once, across all cycles of the Runner; zero
	// means 8.
	Workers int
	// FlushItems and FlushInterval batch completions: a cycle writes them in one
	// Index.CompleteMany once FlushItems are waiting, FlushInterval after the first one
	// waits, and when its last item ends — or, while its previous call is in flight, all
	// together right after it. Zero means 100 items and 100 ms.
	FlushItems    int
	FlushInterval time.Duration
	// ClaimMargin is the margin of the claim rule for the Runner's items (see
	// WorkerConfig.ClaimMargin); zero means DefaultClaimMargin. The margin applied is
	// min(ClaimMargin, ClaimFor/4), ClaimFor being the Dispatcher's, so that a short
	// ClaimFor still leaves items most of it; it must cover the Dispatcher's MaxClockSkew
	// plus FlushInterval, or NewRunner refuses the configuration.
	ClaimMargin time.Duration
	// ShutdownTimeout bounds a stop: when the context of Run or Cycle ends, items in
	// flight run on for at most ShutdownTimeout and are then cancelled, and the writes
	// that follow get ShutdownTimeout more. Zero means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// AlarmAfter is the threshold of the alarms: how long a lane may keep a ready user
	// waiting (see WaitAlarm), and how late a tenant's work may be (see LateAlarm). Zero
	// means ten Intervals; a negative value turns both off.
	AlarmAfter time.Duration
	// AlarmAfterErrors is the Runner's Worker's (see WorkerConfig.AlarmAfterErrors).
	AlarmAfterErrors int
	// Clock is the Runner's clock; nil means the real clock.
	Clock Clock
	// Logger receives one Info line per cycle and one line per failure or alarm; nil
	// means slog.Default() at the time NewRunner is called.
	Logger *slog.Logger
	// Observer, when not nil, is told about every cycle (see Observer).
	Observer Observer
}

// withDefaults returns c with every zero knob set to its default.
func (c RunnerConfig) withDefaults() RunnerConfig {
	orDefault(&c.Interval, defaultInterval)
	orDefault(&c.MinInterval, defaultMinInterval)
	orDefault(&c.Workers, defaultWorkers)
	orDefault(&c.FlushItems, defaultFlushItems)
	orDefault(&c.FlushInterval, defaultFlushInterval)
	orDefault(&c.ClaimMargin, DefaultClaimMargin)
	orDefault(&c.ShutdownTimeout, DefaultShutdownTimeout)
	orDefault(&c.AlarmAfter, defaultAlarmIntervals*c.Interval)
	orDefault(&c.AlarmAfterErrors, DefaultAlarmAfterErrors)
	orDefault[Clock](&c.Clock, clock.Real)
	orDefault(&c.Logger, slog.Default())
	return c
}

// orDefault sets *v to d when *v is the zero value.
func orDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// validate reports every knob of c that is out of range, joined.
func (c RunnerConfig) validate() error {
	errs := []error{negatives("RunnerConfig", []knob{
		{"Interval", c.Interval}, {"MinInterval", c.MinInterval}, {"Workers", c.Workers}, {"FlushItems", c.FlushItems},
		{"FlushInterval", c.FlushInterval}, {"ClaimMargin", c.ClaimMargin}, {"ShutdownTimeout", c.ShutdownTimeout},
	})}
	d := c.withDefaults()
	if c.Interval > 0 && c.Interval < minCycleInterval {
		errs = append(errs, fmt.Errorf("%w: RunnerConfig.Interval must be at least %v, got %v", ErrInvalidConfig, minCycleInterval, c.Interval))
	}
	if c.MinInterval > 0 && c.MinInterval < minCycleInterval {
		errs = append(errs, fmt.Errorf("%w: RunnerConfig.MinInterval must be at least %v, got %v", ErrInvalidConfig, minCycleInterval, c.MinInterval))
	}
	if d.MinInterval > d.Interval && c.Interval >= 0 && c.MinInterval >= 0 {
		errs = append(errs, fmt.Errorf("%w: RunnerConfig.MinInterval must not exceed Interval %v, got %v", ErrInvalidConfig, d.Interval, d.MinInterval))
	}
	return errors.Join(errs...)
}

// knob is one config field, by name, for negatives.
type knob struct {
	name  string
	value any // an int or a time.Duration
}

// negatives reports every knob of the config named what that is negative, joined.
func negatives(what string, knobs []knob) error {
	var errs []error
	for _, k := range knobs {
		neg := false
		switch v := k.value.(type) {
		case int:
			neg = v < 0
		case time.Duration:
			neg = v < 0
		}
		if neg {
			errs = append(errs, fmt.Errorf("%w: %s.%s must not be negative, got %v", ErrInvalidConfig, what, k.name, k.value))
		}
	}
	return errors.Join(errs...)
}

// worker is the configuration of the Runner's Worker, for a Dispatcher configured with
// dc: the Runner's worker knobs, its margin bounded by a quarter of ClaimFor, and the
// Dispatcher's MaxClockSkew. It refuses a margin that cannot cover them.
func (c RunnerConfig) worker(dc dispatch.Config) (WorkerConfig, error) {
	d := c.withDefaults()
	wc := WorkerConfig{Workers: d.Workers, FlushItems: d.FlushItems, FlushInterval: d.FlushInterval,
		ClaimMargin: min(d.ClaimMargin, dc.ClaimFor/4), MaxClockSkew: dc.MaxClockSkew, AlarmAfterErrors: d.AlarmAfterErrors,
		Clock: d.Clock, Logger: d.Logger}
	how := fmt.Sprintf("min(ClaimMargin %v, ClaimFor/4 %v)", d.ClaimMargin, dc.ClaimFor/4)
	return wc, wc.checkMargin("RunnerConfig", how, "the Dispatcher's MaxClockSkew")
}

// WorkerConfig holds a Worker's knobs; the zero value means the Runner's defaults.
type WorkerConfig struct {
	// Workers bounds how many items run at once; zero means 8.
	Workers int
	// FlushItems and FlushInterval batch completions as RunnerConfig's do: the Worker
	// writes them in one Index.CompleteMany once FlushItems are waiting, FlushInterval
	// after the first one waits, and whenever no item is left running. Zero means
	// 100 items and 100 ms.
	FlushItems    int
	FlushInterval time.Duration
	// ClaimMargin is the margin of the claim rule, the one setting for it: an item may
	// start only while its claim has more than ClaimMargin left, and its pipeline's
	// context ends ClaimMargin before the claim does. Zero means DefaultClaimMargin. It
	// must cover MaxClockSkew plus FlushInterval, or NewWorker refuses it: past the
	// claim's end on the fastest clock of the fleet another dispatcher may take the entry
	// again, so a run must have ended and its completion been written by then.
	ClaimMargin time.Duration
	// MaxClockSkew is the most this process's clock may differ from the dispatchers'
	// (their dispatch.Config.MaxClockSkew); zero means dispatch.DefaultMaxClockSkew.
	MaxClockSkew time.Duration
	// AlarmAfterErrors is the ErrorStreak at which a source is reported failing: the
	// item whose failed run brings its entry's streak to it logs one Warn line, "rota:
	// source failing", and the next that succeeds logs "rota: source recovered". Zero
	// means DefaultAlarmAfterErrors; a negative value turns the lines off. The streak
	// lives in the entry, so the lines come from whichever process ran the item.
	AlarmAfterErrors int
	// Clock is the Worker's clock: items' start times move on it; nil means the real
	// clock.
	Clock Clock
	// Logger receives one line per failed call; nil means slog.Default() at the time
	// NewWorker is called.
	Logger *slog.Logger
}

func (c WorkerConfig) withDefaults() WorkerConfig {
	orDefault(&c.Workers, defaultWorkers)
	orDefault(&c.FlushItems, defaultFlushItems)
	orDefault(&c.FlushInterval, defaultFlushInterval)
	orDefault(&c.ClaimMargin, DefaultClaimMargin)
	orDefault(&c.MaxClockSkew, dispatch.DefaultMaxClockSkew)
	orDefault(&c.AlarmAfterErrors, DefaultAlarmAfterErrors)
	orDefault[Clock](&c.Clock, clock.Real)
	orDefault(&c.Logger, slog.Default())
	return c
}

func (c WorkerConfig) validate() error {
	err := negatives("WorkerConfig", []knob{
		{"Workers", c.Workers}, {"FlushItems", c.FlushItems}, {"FlushInterval", c.FlushInterval},
		{"ClaimMargin", c.ClaimMargin}, {"MaxClockSkew", c.MaxClockSkew},
	})
	if err != nil {
		return err
	}
	return c.withDefaults().checkMargin("WorkerConfig", "ClaimMargin", "MaxClockSkew")
}

// checkMargin is the one check of a claim margin, c's with its defaults: it must cover
// the clock skew and the wait for the completion write. what names the config, how the
// margin and skew the skew's source, for the error.
func (c WorkerConfig) checkMargin(what, how, skew string) error {
	if need := c.MaxClockSkew + c.FlushInterval; c.ClaimMargin < need {
		return fmt.Errorf("%w: %s.ClaimMargin: the margin %s = %v must cover %s %v plus FlushInterval %v = %v: "+
			"raise the margin (or ClaimFor), or lower the skew or FlushInterval",
			ErrInvalidConfig, what, how, c.ClaimMargin, skew, c.MaxClockSkew, c.FlushInterval, need)
	}
	return nil
}

// logIdleSettings logs, once at the start of a Runner or Feeder, each setting of dc that
// can never take effect because another caps it first: a lane's PerUserLimit or
// PerUserBurst above its PerCycleLimit, or a PerCycleLimit above GlobalBatchLimit. They
// are valid — dispatch.New takes them — but they promise capacity the dispatcher will
// never give, so each gets a Warn line "rota: setting has no effect" naming it.
func logIdleSettings(ctx context.Context, log *slog.Logger, dc dispatch.Config) {
	idle := func(lane dispatch.Lane, field string, v int, capField string, c int) {
		log.LogAttrs(ctx, slog.LevelWarn, "rota: setting has no effect", slog.String("lane", string(lane)),
			slog.String("setting", field), slog.Int("value", v), slog.String("capped_by", capField), slog.Int("cap", c))
	}
	for _, lc := range dc.Lanes {
		if lc.PerUserLimit > lc.PerCycleLimit {
			idle(lc.Lane, "PerUserLimit", lc.PerUserLimit, "PerCycleLimit", lc.PerCycleLimit)
		}
		if lc.PerUserBurst > lc.PerCycleLimit {
			idle(lc.Lane, "PerUserBurst", lc.PerUserBurst, "PerCycleLimit", lc.PerCycleLimit)
		}
		if lc.PerCycleLimit > dc.GlobalBatchLimit {
			idle(lc.Lane, "PerCycleLimit", lc.PerCycleLimit, "GlobalBatchLimit", dc.GlobalBatchLimit)
		}
	}
}

// weightWatch logs, once per lane in a Runner's or Feeder's life, that the lane read users
// whose weight it cannot hold (dispatch.LaneReport.WeightCapped): their weight times the
// lane's PerUserLimit exceeds its PerCycleLimit. The weights come from LimitsFor, per user,
// so this shows only once such a user is read, not at the start.
type weightWatch struct {
	mu     sync.Mutex
	warned map[dispatch.Lane]bool
}

// check logs the first batch b in which each lane reports a weight it cannot hold.
func (w *weightWatch) check(ctx context.Context, log *slog.Logger, d interface{ Config() dispatch.Config }, b dispatch.Batch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, l := range b.Lanes {
		if l.WeightCapped == 0 || w.warned[l.Lane] {
			continue
		}
		if w.warned == nil {
			w.warned = map[dispatch.Lane]bool{}
		}
		w.warned[l.Lane] = true
		lc := d.Config().Lanes[i] // a Batch's lanes are the Dispatcher's, in order
		log.LogAttrs(ctx, slog.LevelWarn, "rota: setting has no effect", slog.String("lane", string(l.Lane)),
			slog.String("setting", "Weight"), slog.Int("users", l.WeightCapped), slog.Int("per_user_limit", lc.PerUserLimit),
			slog.String("capped_by", "PerCycleLimit"), slog.Int("cap", lc.PerCycleLimit))
	}
}
