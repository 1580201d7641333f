package cadence

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Policy decides how long to wait before polling a source again.
//
// NextInterval is pure: it depends only on missStreak, the number of consecutive polls that
// found nothing new. A streak of 0 means the last poll was a hit. Implementations must return
// a positive duration for every missStreak ≥ 0 and must be safe for concurrent use.
type Policy interface {
	NextInterval(missStreak int) time.Duration
}

// ErrInvalidPolicy is returned by [Backoff.Validate] and [Registry.Register] when a policy's
// parameters cannot describe a cadence. The wrapping error names the field.
var ErrInvalidPolicy = errors.New("cadence: invalid policy")

// Backoff is a multiplicative backoff Policy: a hit (streak 0) waits Base, and each further
// miss multiplies the wait by Factor, clamped at Max:
//
//	NextInterval(n) = min(Base · Factorⁿ, Max)
//
// The computation saturates at Max without overflowing for every n ≥ 0. A Backoff is a plain
// value: copy it, tweak it, and check it with [Backoff.Validate] before use.
type Backoff struct {
	// Base is the interval after a hit. It must be positive.
	Base time.Duration
	// Max clamps the interval after a long run of misses. It must be at least Base.
	Max time.Duration
	// Factor multiplies the interval per consecutive miss. It must be finite and at least 1;
	// 1 means a fixed cadence.
	Factor float64
}

var _ Policy = Backoff{}

// Validate reports every way b cannot serve as a Policy, each wrapped in ErrInvalidPolicy
// and naming the field, joined with errors.Join. It returns nil for a usable Backoff.
func (b Backoff) Validate() error {
	var errs []error
	for _, p := range b.problems() {
		errs = append(errs, fmt.Errorf("%w: %s", ErrInvalidPolicy, p))
	}
	return errors.Join(errs...)
}

// problems lists what Validate reports, one line per bad field.
func (b Backoff) problems() []string {
	var out []string
	if b.Base <= 0 {
		out = append(out, fmt.Sprintf("Base must be positive, got %v", b.Base))
	}
	if b.Max < b.Base {
		out = append(out, fmt.Sprintf("Max (%v) must be at least Base (%v)", b.Max, b.Base))
	}
	switch {
	case math.IsNaN(b.Factor):
		out = append(out, "Factor must be a number, got NaN")
	case math.IsInf(b.Factor, 0):
		out = append(out, fmt.Sprintf("Factor must be finite, got %v", b.Factor))
	case b.Factor < 1:
		out = append(out, fmt.Sprintf("Factor must be at least 1, got %v", b.Factor))
	}
	return out
}

// NextInterval returns min(Base·Factor^missStreak, Max). A negative streak counts as 0.
//
// For a valid Backoff the result lies in [Base, Max] for every streak, never decreases as
// the streak grows, and saturates at Max without overflowing however large the streak is.
// It costs one math.Pow: O(1) whatever the streak.
//
// On an invalid Backoff (see Validate) the result is still defined and bounded — it lies in
// [0, max(Base, Max, 0)] and does not panic — but it is not meaningful; validate first.
func (b Backoff) NextInterval(missStreak int) time.Duration {
	if missStreak <= 0 || !(b.Factor > 1) || b.Base <= 0 || b.Base >= b.Max {
		return max(b.Base, 0)
	}
	if math.IsInf(b.Factor, 1) {
		return b.Max
	}
	// Work in float64 and compare against Max before converting back, so that huge streaks
	// saturate instead of overflowing int64 nanoseconds. float64(b.Max) is at most 2⁶³, so a
	// d below it converts to a Duration no greater than Max.
	d := float64(b.Base) * math.Pow(b.Factor, float64(missStreak))
	if math.IsNaN(d) || d >= float64(b.Max) {
		return b.Max
	}
	// The clamps keep the result in [Base, Max] whatever float rounding does at the edges:
	// a Factor just above 1 can land a hair under Base.
	return min(max(time.Duration(d), b.Base), b.Max)
}
