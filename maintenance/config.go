package maintenance

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults for the zero fields of Config.
const (
	// DefaultHolder names the scheduler on the lease. Schedulers of one fleet should set
	// distinct holders.
	DefaultHolder = "maintenance"
	// DefaultLeaseTTL is how long a grant lasts between renewals.
	DefaultLeaseTTL = 5 * time.Minute
	// DefaultMaxHold is the longest one heavy run may hold the lease.
	DefaultMaxHold = 2 * time.Hour
	// DefaultYieldAfter is how long a waiter waits before fairness promotion.
	DefaultYieldAfter = 30 * time.Minute
	// DefaultDegradeAfter is the wait past which the gauge reads Degraded.
	DefaultDegradeAfter = time.Hour
	// DefaultAlsoDispatchLimit bounds the second pass.
	DefaultAlsoDispatchLimit = 4
	// DefaultPollInterval is how often Run polls.
	DefaultPollInterval = time.Minute
)

// Config holds a Scheduler's collaborators and knobs. Zero values mean the defaults.
type Config struct {
	// Lease is the heavy lease; nil means NewMemoryLease(MaxHold). A shared lease should
	// be built with the same MaxHold.
	Lease Lease
	// StateStore keeps the durable task states; nil means NewMemoryStateStore().
	StateStore StateStore
	// Holder names this scheduler on the lease (DefaultHolder).
	Holder string
	// LeaseTTL is the grant length between renewals (DefaultLeaseTTL); at most MaxHold.
	LeaseTTL time.Duration
	// MaxHold is the longest a heavy run may hold the lease; the scheduler cancels a
	// running task's context at MaxHold (DefaultMaxHold).
	MaxHold time.Duration
	// YieldAfter is the wait after which a waiter is promoted and other schedulers
	// yield to it (DefaultYieldAfter). It is also how recently a waiter of another
	// scheduler must have been deferred to count: an older record is presumed abandoned.
	YieldAfter time.Duration
	// DegradeAfter is the wait past which the gauge reads Degraded (DefaultDegradeAfter).
	DegradeAfter time.Duration
	// AlsoDispatchLimit bounds how many off-lease tasks one poll dispatches
	// (DefaultAlsoDispatchLimit).
	AlsoDispatchLimit int
	// PollInterval is how often Run polls (DefaultPollInterval); Run also polls as soon
	// as a task finishes.
	PollInterval time.Duration
	// Logger receives Run's errors, one Info line per poll and a Warn line when the
	// gauge turns Degraded (see PollReport); nil discards them.
	Logger *slog.Logger
	// Observer, when not nil, is told about every poll (see Observer).
	Observer Observer
	// Clock is Run's clock: its now for Poll, Renew and Complete, its poll and renewal
	// tickers and its MaxHold timer; nil means the real clock. Only Run reads it.
	Clock Clock
}

// withDefaults validates c and fills in its zero fields, reporting every bad field.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	neg := func(field string, d time.Duration) {
		if d < 0 {
			errs = append(errs, fmt.Errorf("maintenance: config: %s %v: negative: %w", field, d, ErrInvalid))
		}
	}
	neg("LeaseTTL", c.LeaseTTL)
	neg("MaxHold", c.MaxHold)
	neg("YieldAfter", c.YieldAfter)
	neg("DegradeAfter", c.DegradeAfter)
	neg("PollInterval", c.PollInterval)
	if c.AlsoDispatchLimit < 0 {
		errs = append(errs, fmt.Errorf("maintenance: config: AlsoDispatchLimit %d: negative: %w", c.AlsoDispatchLimit, ErrInvalid))
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.MaxHold, DefaultMaxHold)
	def(&c.LeaseTTL, min(DefaultLeaseTTL, c.MaxHold))
	def(&c.YieldAfter, DefaultYieldAfter)
	def(&c.DegradeAfter, DefaultDegradeAfter)
	def(&c.PollInterval, DefaultPollInterval)
	if c.AlsoDispatchLimit == 0 {
		c.AlsoDispatchLimit = DefaultAlsoDispatchLimit
	}
	if c.LeaseTTL > c.MaxHold && c.MaxHold > 0 {
		errs = append(errs, fmt.Errorf("maintenance: config: LeaseTTL %v: longer than MaxHold %v: %w", c.LeaseTTL, c.MaxHold, ErrInvalid))
	}
	if c.Holder == "" {
		c.Holder = DefaultHolder
	}
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	if c.Lease == nil {
		c.Lease = NewMemoryLease(c.MaxHold)
	}
	if c.StateStore == nil {
		c.StateStore = NewMemoryStateStore()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	return c, nil
}
