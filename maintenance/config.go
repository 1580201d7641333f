package maintenance

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rotaworks/rota/internal/clock"
	"github.com/rotaworks/rota/internal/vocab"
)

// Defaults for the zero fields of Config.
const (
	// DefaultHolder names the scheduler on the lease. Schedulers of one fleet set
	// distinct holders.
	DefaultHolder = "maintenance"
	// defaultLeaseTTL is how long a grant, or a run's claim, lasts between renewals.
	defaultLeaseTTL = 5 * time.Minute
	// DefaultMaxHold is the longest one heavy run may hold the lease.
	DefaultMaxHold = 2 * time.Hour
	// defaultYieldAfter is how long a waiter waits before fairness promotion.
	defaultYieldAfter = 30 * time.Minute
	// DefaultDegradeAfter is the wait past which the gauge reads PostureDegraded.
	DefaultDegradeAfter = time.Hour
	// defaultAlsoDispatchLimit bounds the second pass.
	defaultAlsoDispatchLimit = 4
	// defaultPollInterval is how often Run polls.
	defaultPollInterval = time.Minute
)

// Config holds a Scheduler's collaborators and knobs. The zero value of each field means
// its default; most callers set only Lease, StateStore and Holder.
type Config struct {
	// Lease is the heavy lease; nil means NewMemoryLease(MaxHold). A shared lease is
	// built with the same MaxHold by every scheduler.
	Lease Lease
	// StateStore keeps the durable task states; nil means a MemoryStateStore, fenced
	// with Lease when that is a *MemoryLease.
	StateStore StateStore
	// Holder names this scheduler on the lease (DefaultHolder); it must be a valid name
	// (see Names and times in the package documentation).
	Holder string
	// LeaseTTL is the grant length between renewals (5 minutes, or MaxHold if
	// shorter); at most MaxHold. An off-lease run's claim lasts as long between its
	// extensions, so a run whose scheduler stopped, or whose outcome could not be
	// written, blocks its task for at most LeaseTTL.
	LeaseTTL time.Duration
	// MaxHold is the longest a heavy run may hold the lease (DefaultMaxHold): Run
	// cancels a task's context at MaxHold.
	MaxHold time.Duration
	// YieldAfter is the wait after which a waiter is promoted and other schedulers
	// yield to it (30 minutes). A waiter of another scheduler not deferred within
	// YieldAfter is presumed abandoned.
	YieldAfter time.Duration
	// DegradeAfter is the wait past which the gauge reads PostureDegraded
	// (DefaultDegradeAfter).
	DegradeAfter time.Duration
	// AlsoDispatchLimit bounds how many off-lease tasks one poll dispatches
	// (4).
	AlsoDispatchLimit int
	// PollInterval is how often Run polls (one minute); Run also polls as soon
	// as a task ends.
	PollInterval time.Duration
	// Logger receives one line per poll and Run's warnings; nil means slog.Default() at
	// the time NewScheduler is called.
	Logger *slog.Logger
	// Observer, when not nil, is told about every poll.
	Observer Observer
	// Clock is the only clock Run reads; nil means the time package. Its methods are the
	// time package's: Now is time.Now; NewTicker(d) returns a channel that receives the
	// time every d, dropping ticks a slow reader misses, and its stop; AfterFunc(d, f) runs
	// f in its own goroutine once d has passed unless stop, which reports whether it
	// prevented that, is called first. It is bridge.Clock's method set, so one fake serves
	// both: tests pass one they step by hand, or run Run inside a testing/synctest bubble
	// with the real one. Poll, Renew and Complete take now and read no clock.
	Clock interface {
		Now() time.Time
		NewTicker(d time.Duration) (c <-chan time.Time, stop func())
		AfterFunc(d time.Duration, f func()) (stop func() bool)
	}
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.MaxHold, DefaultMaxHold)
	def(&c.LeaseTTL, min(defaultLeaseTTL, c.MaxHold))
	def(&c.YieldAfter, defaultYieldAfter)
	def(&c.DegradeAfter, DefaultDegradeAfter)
	def(&c.PollInterval, defaultPollInterval)
	if c.AlsoDispatchLimit == 0 {
		c.AlsoDispatchLimit = defaultAlsoDispatchLimit
	}
	if c.Holder == "" {
		c.Holder = DefaultHolder
	}
	if c.Lease == nil && c.MaxHold > 0 {
		c.Lease = NewMemoryLease(c.MaxHold)
	}
	if c.StateStore == nil {
		store := NewMemoryStateStore()
		if l, ok := c.Lease.(*MemoryLease); ok {
			store.FenceWith(l)
		}
		c.StateStore = store
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clock.Real
	}
	return c
}

// validate reports every bad field of c, defaults filled in.
func (c Config) validate() error {
	var errs []error
	bad := func(field, must string, got any) {
		errs = append(errs, fmt.Errorf("%w: Config.%s must %s, got %v", ErrInvalidConfig, field, must, got))
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"LeaseTTL", c.LeaseTTL}, {"MaxHold", c.MaxHold}, {"YieldAfter", c.YieldAfter}, {"DegradeAfter", c.DegradeAfter}, {"PollInterval", c.PollInterval}} {
		if f.d < 0 {
			bad(f.name, "not be negative", f.d)
		}
	}
	if c.AlsoDispatchLimit < 0 {
		bad("AlsoDispatchLimit", "not be negative", c.AlsoDispatchLimit)
	}
	if c.MaxHold > 0 && c.LeaseTTL > c.MaxHold {
		bad("LeaseTTL", fmt.Sprintf("not exceed MaxHold %v", c.MaxHold), c.LeaseTTL)
	}
	if !vocab.ValidName(c.Holder) {
		bad("Holder", "be "+vocab.NameRule, quote(c.Holder))
	}
	return errors.Join(errs...)
}
