package duework

import (
	"errors"
	"fmt"
	"time"

	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/tenancy"
)

var (
	// ErrNotFound is returned by Index.Get when the tenant has no entry under the work key.
	ErrNotFound = errors.New("duework: not found")
	// ErrClaimLost is returned by Index.Complete when the claim it names is no longer the
	// entry's current claim: a later claim replaced it, the host rescheduled or unscheduled
	// the entry, or the entry never had that claim. Nothing is written.
	ErrClaimLost = errors.New("duework: claim lost")
	// ErrInvalid is returned for bad input: an empty WorkKey, a zero DueAt, an Entry whose
	// UserID is not the Context's, limit < 1, perUser < 1, until not after now. The wrapping
	// error names the field and its value.
	ErrInvalid = errors.New("duework: invalid input")
)

// Entry is one row of the due-work index: when a tenant's unit of work (a watched source,
// named by WorkKey) is next due, and how its cadence stands.
//
// Entry is scheduling metadata only. It has no payload field and must never grow one:
// posting content, credentials and settings cannot travel through the cross-tenant index by
// construction.
type Entry struct {
	UserID     string
	WorkKey    string
	Tier       string    // the cadence tier name, resolved through a cadence.Registry
	DueAt      time.Time // when the work is next due
	LastRunAt  time.Time // when it last ran; zero if never
	MissStreak int       // consecutive runs that found nothing new
}

// Key returns the entry's identity in the index.
func (e Entry) Key() Key { return Key{UserID: e.UserID, WorkKey: e.WorkKey} }

// Validate checks e for Schedule on behalf of tc: tc must be valid, e.UserID must equal
// tc.UserID(), WorkKey must be a valid ID and DueAt non-zero. Index implementations call it.
func (e Entry) Validate(tc tenancy.Context) error {
	if err := tc.Check(); err != nil {
		return err
	}
	if e.UserID != tc.UserID() {
		return fmt.Errorf("%w: entry UserID %q is not the context's user %q", ErrInvalid, e.UserID, tc.UserID())
	}
	if err := ValidateWorkKey(e.WorkKey); err != nil {
		return err
	}
	if e.DueAt.IsZero() {
		return fmt.Errorf("%w: entry %q has a zero DueAt", ErrInvalid, e.WorkKey)
	}
	if e.MissStreak < 0 {
		return fmt.Errorf("%w: entry %q has a negative MissStreak %d", ErrInvalid, e.WorkKey, e.MissStreak)
	}
	return nil
}

// ValidateWorkKey checks a work key the way tenancy checks IDs, wrapping ErrInvalid.
func ValidateWorkKey(workKey string) error {
	if err := tenancy.ValidateID("WorkKey", workKey); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// Key identifies an entry across tenants: the dispatcher's handle for claiming it.
type Key struct {
	UserID  string
	WorkKey string
}

// Claim is the right to run one entry until Until. Token is unique among the claims ever
// made of that entry, so a stale claimant cannot complete over a newer one.
type Claim struct {
	Entry Entry
	Token uint64
	Until time.Time
}

// Head is one user's front of the due queue, as DueHeads returns it.
type Head struct {
	UserID string
	// LastServed is the now of the last Claim that claimed any of this user's entries;
	// zero if never.
	LastServed time.Time
	// Due holds the user's first due entries in (DueAt, WorkKey) order.
	Due []Entry
	// More is true when the user has further due entries beyond Due.
	More bool
}

// Advance returns e rescheduled after a run that ended at now. It is pure.
//
// A hit resets MissStreak to 0 and schedules now + p.NextInterval(0); a miss increments
// MissStreak and schedules now + p.NextInterval(streak). The next due time counts from now,
// never from the old DueAt, so after an outage a source runs once, not once per missed
// interval. LastRunAt becomes now. If the policy returns a non-positive interval, the entry
// is scheduled one nanosecond after now, so DueAt is always after now. A negative
// MissStreak (which Validate refuses) counts as 0, and the streak stops growing at
// MaxMissStreak, so that counting misses can never overflow.
func Advance(e Entry, p cadence.Policy, hit bool, now time.Time) Entry {
	if hit || e.MissStreak < 0 {
		e.MissStreak = 0
	}
	if !hit && e.MissStreak < MaxMissStreak {
		e.MissStreak++
	}
	d := p.NextInterval(e.MissStreak)
	if d <= 0 {
		d = 1
	}
	e.LastRunAt = now
	e.DueAt = now.Add(d)
	return e
}

// MaxMissStreak is where Advance stops counting misses, so that the count never overflows.
const MaxMissStreak = 1 << 30
