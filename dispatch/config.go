package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rotaworks/rota/duework"
)

// Lane names a priority lane, such as "pro", "plus" or "free".
type Lane string

// LaneCapacity bounds one lane's share of a dispatch cycle.
type LaneCapacity struct {
	Lane Lane
	// PerUserLimit is the most items one user gets from this lane in a cycle.
	PerUserLimit int
	// PerCycleLimit is the most items the lane dispatches in a cycle.
	PerCycleLimit int
	// MinShare reserves that many of the global batch slots for this lane before higher
	// lanes take the rest. Zero (the default) is strict priority.
	MinShare int
}

// LaneFor resolves a user's lane, typically from the user's plan (see bridge.PlanLanes).
// A Dispatcher calls it only for the users a cycle routes or serves, and recovers a panic
// as an error ([ErrLaneForPanic]).
type LaneFor func(ctx context.Context, userID string) (Lane, error)

// The defaults of a zero Config field.
const (
	// DefaultHoldFor is the HoldFor of a zero Config.HoldFor.
	DefaultHoldFor = 10 * time.Second
	// DefaultRetryAfter is the RetryAfter of a zero Config.RetryAfter.
	DefaultRetryAfter = time.Minute
)

// Config configures a Dispatcher. Lanes, GlobalBatchLimit, LaneFor and ClaimFor are
// required; a zero HoldFor, RetryAfter or RouteLimit means its default. Every limit is at
// most duework.MaxLimit, what every Index serves.
type Config struct {
	// Lanes lists the lanes, highest priority first.
	Lanes []LaneCapacity
	// GlobalBatchLimit is the most items one cycle dispatches across all lanes.
	GlobalBatchLimit int
	// LaneFor resolves a user's lane.
	LaneFor LaneFor
	// ClaimFor is how long a dispatched item stays claimed: the worker's deadline, after
	// which the entry is due again and may be dispatched elsewhere.
	ClaimFor time.Duration
	// HoldFor is how long a cycle hides the users it reads from other dispatchers until
	// it claims or hands them back. It must exceed the time from a cycle's read to its
	// claim plus the clock skew between dispatchers. Zero means DefaultHoldFor.
	HoldFor time.Duration
	// RetryAfter is how long a user whose lane could not be resolved waits before it is
	// tried again; it must be longer than HoldFor. Zero means DefaultRetryAfter.
	RetryAfter time.Duration
	// RouteLimit is the most users one cycle routes: new users, and users of lanes that
	// Lanes no longer names. When both kinds wait, new users get at most half, rounded up,
	// and the others the rest. Zero means GlobalBatchLimit.
	RouteLimit int
	// Observer, when not nil, is told about every cycle (see Observer). Nil reports
	// nothing and costs nothing.
	Observer Observer
}

// ErrInvalidConfig is returned by New when the Index is nil or the Config breaks a rule;
// the wrapping error names the field and its value, every problem joined.
var ErrInvalidConfig = errors.New("dispatch: invalid config")

// withDefaults returns c with its zero durations and limits replaced by their defaults.
func (c Config) withDefaults() Config {
	if c.HoldFor == 0 {
		c.HoldFor = DefaultHoldFor
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.RouteLimit == 0 && c.GlobalBatchLimit >= 1 && c.GlobalBatchLimit <= duework.MaxLimit {
		c.RouteLimit = c.GlobalBatchLimit // a bad GlobalBatchLimit is reported once, as itself
	}
	return c
}

// validate reports every rule c (with its defaults) breaks, joined.
func (c Config) validate() error {
	var errs []error
	bad := func(field, must string, got any) {
		errs = append(errs, fmt.Errorf("%w: Config.%s must %s, got %v", ErrInvalidConfig, field, must, got))
	}
	limit := func(field string, n int) {
		if n < 1 || n > duework.MaxLimit {
			bad(field, fmt.Sprintf("be in [1, %d]", duework.MaxLimit), n)
		}
	}
	if len(c.Lanes) == 0 {
		bad("Lanes", "hold at least one lane", "none")
	}
	limit("GlobalBatchLimit", c.GlobalBatchLimit)
	seen := make(map[Lane]int, len(c.Lanes))
	shares := 0
	for i, lc := range c.Lanes {
		field := fmt.Sprintf("Lanes[%d].", i)
		if j, dup := seen[lc.Lane]; dup {
			bad(field+"Lane", fmt.Sprintf("differ from Lanes[%d].Lane", j), fmt.Sprintf("%q", lc.Lane))
		} else if lc.Lane == "" {
			bad(field+"Lane", "not be empty", `""`)
		} else if err := duework.ValidateName(field+"Lane", string(lc.Lane)); err != nil {
			// The lane is the index group its users are routed to: a name no index can
			// hold would fail every Dispatch.
			bad(field+"Lane", "be a valid group name ("+err.Error()+")", fmt.Sprintf("%q", lc.Lane))
		} else {
			seen[lc.Lane] = i
		}
		limit(field+"PerUserLimit", lc.PerUserLimit)
		limit(field+"PerCycleLimit", lc.PerCycleLimit)
		if lc.MinShare < 0 || lc.MinShare > c.GlobalBatchLimit {
			bad(field+"MinShare", fmt.Sprintf("be in [0, GlobalBatchLimit %d]", c.GlobalBatchLimit), lc.MinShare)
		} else {
			shares += lc.MinShare
		}
	}
	if shares > c.GlobalBatchLimit && c.GlobalBatchLimit >= 1 {
		bad("Lanes", fmt.Sprintf("have MinShares that add up to at most GlobalBatchLimit %d", c.GlobalBatchLimit), shares)
	}
	if c.LaneFor == nil {
		bad("LaneFor", "not be nil", "nil")
	}
	if c.ClaimFor <= 0 {
		bad("ClaimFor", "be > 0", c.ClaimFor)
	}
	if c.HoldFor < 0 {
		bad("HoldFor", "be ≥ 0", c.HoldFor)
	}
	if c.RetryAfter <= c.HoldFor {
		bad("RetryAfter", fmt.Sprintf("be longer than HoldFor %v", c.HoldFor), c.RetryAfter)
	}
	if c.RouteLimit < 0 || c.RouteLimit > duework.MaxLimit {
		bad("RouteLimit", fmt.Sprintf("be in [0, %d] (0: GlobalBatchLimit)", duework.MaxLimit), c.RouteLimit)
	}
	return errors.Join(errs...)
}
