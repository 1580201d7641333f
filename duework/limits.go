package duework

import (
	"fmt"
	"time"

	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/tenancy"
)

// MaxWeight is the largest Limits.Weight an Index stores: 1,000.
const MaxWeight = vocab.MaxWeight

// Limits are one user's flow-control limits, stored with its group by Index.Route and
// enforced by every Index at Claim, whoever claims: they hold across every dispatcher that
// shares the index. The zero value means weight 1, no in-flight cap and no rate.
//
// A user held back by its own limits is not ready until it may be served again: its
// ReadyAt is at least the instant a slot frees (see MaxInFlight) and the instant its next
// item is allowed (see Every), so it waits without being read, and a Complete or Unclaim
// that frees a slot makes it ready at once.
type Limits struct {
	// Weight is the user's share of its lane under contention, in [0, MaxWeight]; 0 means
	// 1. A claim of k items moves a user of weight w > 1 only k/w of the way from its Turn
	// to the claim's now, where a user of weight 1 goes to the back (see Index, Flow
	// control), so that over a long run each continuously ready user gets Weight/ΣWeight of
	// its lane. Index.Ready scales ReadyQuery.PerUser by it.
	Weight int
	// MaxInFlight caps the user's in-flight count, its entries whose claim has not ended
	// and was not completed, unclaimed or replaced, in [0, MaxLimit]; 0 means no cap.
	// A worker that dies frees its slots when its claims end.
	MaxInFlight int
	// Every and Burst limit the rate at which the user is served: with Every > 0, at most
	// b = max(Burst, 1) items at once and then one more per Every (GCRA, one timestamp per
	// user; see Index, Flow control), so that in any window [t, t+T] it is claimed at most
	// b + floor(T/Every) items — at most Burst + ceil(T/Every) in any [t, t+T) — and a
	// user that always has work and is claimed whenever it is ready gets exactly
	// b + floor(T/Every). Every ≥ 0 (0: no rate); Burst in [0, MaxLimit]. Arithmetic on
	// Every saturates: no Every or Burst overflows an Index.
	Every time.Duration
	Burst int
}

// Validate checks l: Weight in [0, MaxWeight], MaxInFlight and Burst in [0, MaxLimit],
// Every not negative. It wraps ErrInvalid and names the field.
func (l Limits) Validate() error {
	if err := vocab.Range(ErrInvalid, "Limits.Weight", l.Weight, 0, MaxWeight); err != nil {
		return err
	}
	if err := vocab.Range(ErrInvalid, "Limits.MaxInFlight", l.MaxInFlight, 0, MaxLimit); err != nil {
		return err
	}
	if l.Every < 0 {
		return fmt.Errorf("%w: Limits.Every must not be negative, got %v", ErrInvalid, l.Every)
	}
	return vocab.Range(ErrInvalid, "Limits.Burst", l.Burst, 0, MaxLimit)
}

// EffectiveWeight is Weight, or 1 when Weight is 0.
func (l Limits) EffectiveWeight() int { return max(l.Weight, 1) }

// UserState is one user's place in its queue, as Index.User reports it to an operator.
type UserState struct {
	// Group is the user's group ("" while unrouted) and Limits its limits.
	Group  string
	Limits Limits
	// LastServed is the now of the last Claim that claimed any of its entries; zero if
	// never.
	LastServed time.Time
	// Turn is the user's place in its queue (see Head.Turn); zero when it has no entries.
	Turn time.Time
	// HeldUntil is the end of the hold a Ready took on the user, when it is after the
	// read's now; zero otherwise.
	HeldUntil time.Time
	// InFlight is the user's in-flight count at the read's now.
	InFlight int
	// PausedUntil is the end of the user's pause when it is paused at the read's now (see
	// Index, Pauses), zero otherwise; PauseReason is its reason, "" whenever PausedUntil
	// is zero.
	PausedUntil time.Time
	PauseReason string
}

// EntryState is one entry as Index.Entries reports it to an operator.
type EntryState struct {
	Entry Entry
	// ClaimedUntil is the Until of the entry's current claim, ended or not; zero when it
	// has none.
	ClaimedUntil time.Time
}

// Unclaim names one claim for Index.Unclaim and Index.StartClaims: Claim, under Tenant.
type Unclaim struct {
	Tenant tenancy.Context
	Claim  Claim
}
