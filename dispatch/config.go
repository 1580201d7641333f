package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/vocab"
)

// Lane names a priority lane, such as "pro", "plus" or "free".
type Lane string

// LaneCapacity bounds one lane's share of a dispatch cycle.
type LaneCapacity struct {
	Lane Lane
	// PerUserLimit is the most items one user of weight 1 gets from this lane in a cycle
	// in its fair part; a user of weight w gets up to PerUserLimit × w.
	PerUserLimit int
	// PerCycleLimit is the most items the lane dispatches in a cycle.
	PerCycleLimit int
	// MinShare reserves that many of the global batch slots for this lane before higher
	// lanes take the rest. Zero (the default) is strict priority.
	MinShare int
	// PerUserBurst is the most items one user gets from this lane in a cycle once every
	// user the lane read has had its fair part (PerUserLimit): the lane's room left under
	// PerCycleLimit goes on in rounds, from the first user in turn order, one more item per
	// user per round, to the users with more visible work, so that a lone tenant in an
	// idle lane is not held to PerUserLimit. The global slots left once every lane's fair
	// part is served go to the bursts, highest lane first. Zero means PerUserLimit (no
	// burst); a positive value must be in [PerUserLimit, duework.MaxLimit]. Both are
	// scaled by the user's weight. It costs reads: the lane reads each user's first
	// max(PerUserLimit, PerUserBurst) × weight entries.
	PerUserBurst int
}

// LaneFor resolves a user's lane, typically from the user's plan (see bridge.PlanLanes).
// A Dispatcher calls it only for the users a cycle routes or serves, and recovers a panic
// as an error.
type LaneFor func(ctx context.Context, userID string) (Lane, error)

// LimitsFor resolves a user's flow-control limits, typically from the user's plan (see
// bridge.PlanLimits). A Dispatcher calls it right after each LaneFor call that resolved a
// configured lane (routing a user, re-resolving a served one, Reroute), and at no other
// time; its error, a panic or limits that fail
// duework.Limits.Validate make the user Unrouted as a LaneFor failure does, and such
// limits are never routed.
type LimitsFor func(ctx context.Context, userID string) (duework.Limits, error)

// The defaults of a zero Config field.
const (
	// DefaultHoldFor is the HoldFor of a zero Config.HoldFor.
	DefaultHoldFor = 10 * time.Second
	// defaultRetryAfter is the RetryAfter of a zero Config.RetryAfter.
	defaultRetryAfter = time.Minute
	// DefaultMaxClockSkew is the MaxClockSkew of a zero Config.MaxClockSkew.
	DefaultMaxClockSkew = time.Second
)

// minClaimFor is the shortest Config.ClaimFor New accepts: a shorter claim cannot cover a
// database round trip between claiming an item and starting it, let alone the clocks'
// skew, so its item would be due again, and handed out elsewhere, before it ran.
const minClaimFor = time.Second

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
	// LimitsFor resolves a user's limits, stored with its lane: its weight in the lane,
	// its in-flight cap and its rate, which every Index enforces at Claim across every
	// dispatcher. It is called right after each LaneFor call that resolved a configured
	// lane — one more call per user routed or served — and at no other time. Nil gives
	// every user zero limits: weight 1, no cap, no rate.
	LimitsFor LimitsFor
	// ClaimFor is how long a dispatched item stays claimed: the worker's deadline, after
	// which the entry is due again and may be dispatched elsewhere. It must be at least
	// one second and longer than MaxClockSkew, or a dispatcher whose clock runs ahead
	// would find the claim ended at once.
	ClaimFor time.Duration
	// HoldFor is how long a cycle hides the users it reads from other dispatchers until
	// it claims or hands them back. It must exceed the time from a cycle's read to its
	// claim plus the clock skew between dispatchers, and New refuses a HoldFor not longer
	// than MaxClockSkew. Zero means DefaultHoldFor.
	HoldFor time.Duration
	// MaxClockSkew is the most the clocks of the processes sharing the index (dispatchers
	// and workers) may disagree; it must not be negative. HoldFor and ClaimFor must exceed
	// it, and a worker's claim margin must cover it and the completion write (see
	// bridge.NewRunner, which reads it from Dispatcher.Config). Zero means
	// DefaultMaxClockSkew.
	MaxClockSkew time.Duration
	// RetryAfter is how long a user whose lane could not be resolved waits before it is
	// tried again; it must be longer than HoldFor. Zero means one minute.
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
		c.RetryAfter = defaultRetryAfter
	}
	if c.MaxClockSkew == 0 {
		c.MaxClockSkew = DefaultMaxClockSkew
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
		} else if p := vocab.Problem(field+"Lane", string(lc.Lane)); p != "" {
			// The lane is the index group its users are routed to: a name no index can
			// hold would fail every Dispatch.
			bad(field+"Lane", "be a valid group name ("+p+")", fmt.Sprintf("%q", lc.Lane))
		} else {
			seen[lc.Lane] = i
		}
		limit(field+"PerUserLimit", lc.PerUserLimit)
		limit(field+"PerCycleLimit", lc.PerCycleLimit)
		if lc.PerUserBurst != 0 && (lc.PerUserBurst < max(lc.PerUserLimit, 1) || lc.PerUserBurst > duework.MaxLimit) {
			bad(field+"PerUserBurst", fmt.Sprintf("be 0 (no burst) or in [PerUserLimit %d, %d]", lc.PerUserLimit, duework.MaxLimit), lc.PerUserBurst)
		}
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
	if c.MaxClockSkew < 0 {
		bad("MaxClockSkew", "be ≥ 0", c.MaxClockSkew)
	}
	if c.ClaimFor < minClaimFor {
		bad("ClaimFor", fmt.Sprintf("be at least %v", minClaimFor), c.ClaimFor)
	} else if c.ClaimFor <= c.MaxClockSkew {
		bad("ClaimFor", fmt.Sprintf("be longer than MaxClockSkew %v", c.MaxClockSkew), c.ClaimFor)
	}
	if c.HoldFor < 0 {
		bad("HoldFor", "be ≥ 0", c.HoldFor)
	} else if c.HoldFor <= c.MaxClockSkew {
		bad("HoldFor", fmt.Sprintf("be longer than MaxClockSkew %v", c.MaxClockSkew), c.HoldFor)
	}
	if c.RetryAfter <= c.HoldFor {
		bad("RetryAfter", fmt.Sprintf("be longer than HoldFor %v", c.HoldFor), c.RetryAfter)
	}
	if c.RouteLimit < 0 || c.RouteLimit > duework.MaxLimit {
		bad("RouteLimit", fmt.Sprintf("be in [0, %d] (0: GlobalBatchLimit)", duework.MaxLimit), c.RouteLimit)
	}
	return errors.Join(errs...)
}
