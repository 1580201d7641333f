package bridge

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// ErrInvalidConfig is returned by NewRunner, PlanLanes, SyncWatchlist, SyncTenants and
// RunDueItem when a Bridge, a RunnerConfig or a plan table cannot work; the wrapping error
// names the field and its value. Every problem is reported at once, joined.
var ErrInvalidConfig = errors.New("bridge: invalid config")

// Runner defaults, used for the zero values of [RunnerConfig].
const (
	// DefaultInterval is how often Run starts a cycle.
	DefaultInterval = time.Minute
	// DefaultWorkers is how many pipelines run at once. Pipelines usually wait on the
	// network, so this is not tied to the number of CPUs.
	DefaultWorkers = 8
	// DefaultFlushItems is how many completions the Runner gathers before it writes them
	// in one Index.CompleteMany.
	DefaultFlushItems = 100
	// DefaultFlushInterval is the longest a completion waits for its batch to be written,
	// unless a write of its cycle is in flight then: it goes in the next.
	DefaultFlushInterval = 100 * time.Millisecond
	// DefaultClaimMargin is how long before its claim ends an item's context ends: time
	// for the pipeline to return and its completion to be written, and for the clocks of
	// replicas to disagree, before another dispatch may take the entry.
	DefaultClaimMargin = 5 * time.Second
	// DefaultShutdownTimeout is how long the items in flight may run on after Run's
	// context ends, and then how long the last writes may take.
	DefaultShutdownTimeout = 10 * time.Second
	// DefaultAlarmIntervals is the noisy-neighbour alarm's threshold in Intervals: a lane
	// that keeps a user waiting longer than this many Intervals raises it.
	DefaultAlarmIntervals = 10
)

// RunnerConfig holds the Runner's knobs; the zero value means the defaults.
type RunnerConfig struct {
	// Interval is how often Run starts a cycle; zero means DefaultInterval.
	Interval time.Duration
	// Workers bounds how many items run at once, across all cycles of the Runner; zero
	// means DefaultWorkers.
	Workers int
	// FlushItems and FlushInterval batch completions: a cycle writes them in one
	// Index.CompleteMany once FlushItems are waiting, FlushInterval after the first one
	// waits, and when its last item ends — or, while its previous call is in flight, all
	// together right after it. Zero means DefaultFlushItems and DefaultFlushInterval.
	FlushItems    int
	FlushInterval time.Duration
	// ClaimMargin is how long before its claim ends an item's context is cancelled, and
	// how much of its claim an item must have left to start. Zero means
	// DefaultClaimMargin. The margin applied is at most a quarter of the item's claim,
	// so that a short ClaimFor still leaves items most of it.
	ClaimMargin time.Duration
	// ShutdownTimeout bounds a stop: when the context of Run or Cycle ends, items in
	// flight run on for at most ShutdownTimeout and are then cancelled, and the writes
	// that follow get ShutdownTimeout more. Zero means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// AlarmAfter is the noisy-neighbour alarm's threshold: how long a lane may keep a
	// ready user waiting (see WaitAlarm). Zero means DefaultAlarmIntervals × Interval; a
	// negative value turns the alarm off.
	AlarmAfter time.Duration
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
	orDefault(&c.Interval, DefaultInterval)
	orDefault(&c.Workers, DefaultWorkers)
	orDefault(&c.FlushItems, DefaultFlushItems)
	orDefault(&c.FlushInterval, DefaultFlushInterval)
	orDefault(&c.ClaimMargin, DefaultClaimMargin)
	orDefault(&c.ShutdownTimeout, DefaultShutdownTimeout)
	orDefault(&c.AlarmAfter, DefaultAlarmIntervals*c.Interval)
	orDefault[Clock](&c.Clock, realClock{})
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
	var errs []error
	for _, f := range []struct {
		name     string
		negative bool
		value    any
	}{
		{"Interval", c.Interval < 0, c.Interval},
		{"Workers", c.Workers < 0, c.Workers},
		{"FlushItems", c.FlushItems < 0, c.FlushItems},
		{"FlushInterval", c.FlushInterval < 0, c.FlushInterval},
		{"ClaimMargin", c.ClaimMargin < 0, c.ClaimMargin},
		{"ShutdownTimeout", c.ShutdownTimeout < 0, c.ShutdownTimeout},
	} {
		if f.negative {
			errs = append(errs, fmt.Errorf("%w: RunnerConfig.%s must not be negative, got %v", ErrInvalidConfig, f.name, f.value))
		}
	}
	return errors.Join(errs...)
}
