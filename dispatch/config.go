package dispatch

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig is returned by New (and Config.Validate) when the index is nil or the
// Config breaks a rule; the wrapping error names the field and its value. Every problem is
// reported at once, joined with errors.Join.
var ErrInvalidConfig = errors.New("dispatch: invalid config")

// ErrUnknownLane is the reason in Unrouted when LaneFor returns a lane that Config.Lanes
// does not hold.
var ErrUnknownLane = errors.New("dispatch: unknown lane")

// Validate reports every rule c breaks, joined, each wrapping ErrInvalidConfig and naming the
// field: Lanes must not be empty; each lane needs a non-empty, unique Lane name,
// PerUserLimit ≥ 1, PerCycleLimit ≥ 1 and 0 ≤ MinShare ≤ GlobalBatchLimit; the MinShares
// together must not exceed GlobalBatchLimit; GlobalBatchLimit ≥ 1; LaneFor non-nil;
// ClaimFor > 0. New calls it.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if len(c.Lanes) == 0 {
		bad("Config.Lanes must hold at least one lane")
	}
	if c.GlobalBatchLimit < 1 {
		bad("Config.GlobalBatchLimit must be ≥ 1, got %d", c.GlobalBatchLimit)
	}
	seen := make(map[Lane]int, len(c.Lanes))
	shares := 0
	for i, lc := range c.Lanes {
		if lc.Lane == "" {
			bad("Config.Lanes[%d].Lane must not be empty", i)
		} else if j, dup := seen[lc.Lane]; dup {
			bad("Config.Lanes[%d].Lane %q duplicates Config.Lanes[%d]", i, lc.Lane, j)
		} else {
			seen[lc.Lane] = i
		}
		if lc.PerUserLimit < 1 {
			bad("Config.Lanes[%d].PerUserLimit must be ≥ 1, got %d", i, lc.PerUserLimit)
		}
		if lc.PerCycleLimit < 1 {
			bad("Config.Lanes[%d].PerCycleLimit must be ≥ 1, got %d", i, lc.PerCycleLimit)
		}
		switch {
		case lc.MinShare < 0:
			bad("Config.Lanes[%d].MinShare must be ≥ 0, got %d", i, lc.MinShare)
		case lc.MinShare > c.GlobalBatchLimit:
			bad("Config.Lanes[%d].MinShare %d exceeds Config.GlobalBatchLimit %d", i, lc.MinShare, c.GlobalBatchLimit)
		default:
			shares += lc.MinShare
		}
	}
	if shares > c.GlobalBatchLimit && c.GlobalBatchLimit >= 1 {
		bad("Config.Lanes MinShares add up to %d, more than Config.GlobalBatchLimit %d", shares, c.GlobalBatchLimit)
	}
	if c.LaneFor == nil {
		bad("Config.LaneFor must not be nil")
	}
	if c.ClaimFor <= 0 {
		bad("Config.ClaimFor must be > 0, got %v", c.ClaimFor)
	}
	return errors.Join(errs...)
}
