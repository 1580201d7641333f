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
	// ErrClaimLost is returned by Index.Complete (and CompleteMany's outcomes) when the
	// claim it names is no longer the entry's current claim: a later claim replaced it, the
	// host rescheduled or unscheduled the entry, or the entry never had that claim. Nothing
	// is written.
	ErrClaimLost = errors.New("duework: claim lost")
	// ErrInvalid is returned for bad input: an empty or malformed WorkKey or Tier, a zero
	// DueAt, a time outside [MinTime, MaxTime], a MissStreak outside [0, MaxMissStreak], an
	// Entry whose UserID is not the Context's, a limit, Users or PerUser outside [1,
	// MaxLimit], a negative Hold, an until not after now, a malformed group name. The
	// wrapping error names the field and its value.
	ErrInvalid = errors.New("duework: invalid input")
)

// The limits every Index serves. An adapter must accept any value within them; values
// outside are ErrInvalid, so every Index refuses the same input.
var (
	// MinTime is the earliest time an Index stores or takes as now: the zero time.Time,
	// January 1 of year 1, UTC.
	MinTime = time.Time{}
	// MaxTime is the latest time an Index stores or takes as now: the last nanosecond of
	// year 9999, UTC. Times beyond it (which a database driver would silently wrap) are
	// ErrInvalid.
	MaxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
)

// MaxLimit is the largest limit, ReadyQuery.Users and ReadyQuery.PerUser an Index takes.
const MaxLimit = 1 << 20

// ValidateTime checks that t lies in [MinTime, MaxTime], wrapping ErrInvalid and naming
// field otherwise.
func ValidateTime(field string, t time.Time) error {
	if t.Before(MinTime) || t.After(MaxTime) {
		return fmt.Errorf("%w: %s %v is outside [%v, %v]", ErrInvalid, field, t, MinTime.Year(), MaxTime.Year())
	}
	return nil
}

// ValidateLimit checks that n lies in [1, MaxLimit], wrapping ErrInvalid and naming field
// otherwise.
func ValidateLimit(field string, n int) error {
	if n < 1 || n > MaxLimit {
		return fmt.Errorf("%w: %s must be in [1, %d], got %d", ErrInvalid, field, MaxLimit, n)
	}
	return nil
}

// ValidateName checks a Tier or a group name: empty, or a valid ID by tenancy.ValidateID's
// rules (bounded length, valid UTF-8, printable). It wraps ErrInvalid and names field.
func ValidateName(field, name string) error {
	if name == "" {
		return nil
	}
	if err := tenancy.ValidateID(field, name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

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
// tc.UserID(), WorkKey must be a valid ID, Tier empty or a valid name, DueAt non-zero,
// DueAt and LastRunAt within [MinTime, MaxTime] and MissStreak within [0, MaxMissStreak].
// Index implementations call it.
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
	if err := ValidateName("Tier", e.Tier); err != nil {
		return fmt.Errorf("entry %q: %w", e.WorkKey, err)
	}
	if e.DueAt.IsZero() {
		return fmt.Errorf("%w: entry %q has a zero DueAt", ErrInvalid, e.WorkKey)
	}
	if err := ValidateTime("DueAt", e.DueAt); err != nil {
		return fmt.Errorf("entry %q: %w", e.WorkKey, err)
	}
	if err := ValidateTime("LastRunAt", e.LastRunAt); err != nil {
		return fmt.Errorf("entry %q: %w", e.WorkKey, err)
	}
	if e.MissStreak < 0 || e.MissStreak > MaxMissStreak {
		return fmt.Errorf("%w: entry %q has MissStreak %d, outside [0, %d]", ErrInvalid, e.WorkKey, e.MissStreak, MaxMissStreak)
	}
	return nil
}

// ValidateCompletion checks the arguments of Index.Complete: next must be valid for tc (see
// Entry.Validate), and the claim must name tc's user and next's WorkKey.
func ValidateCompletion(tc tenancy.Context, c Claim, next Entry) error {
	if err := next.Validate(tc); err != nil {
		return err
	}
	if c.Entry.UserID != tc.UserID() {
		return fmt.Errorf("%w: claim's UserID %q is not the context's user %q", ErrInvalid, c.Entry.UserID, tc.UserID())
	}
	if next.WorkKey != c.Entry.WorkKey {
		return fmt.Errorf("%w: next WorkKey %q is not the claim's %q", ErrInvalid, next.WorkKey, c.Entry.WorkKey)
	}
	return nil
}

// ValidateEntries checks the arguments of MissingScheduler.ScheduleMissing: tc must be
// valid and every entry valid for it (see Entry.Validate). The error names the first bad
// entry's index.
func ValidateEntries(tc tenancy.Context, entries []Entry) error {
	if err := tc.Check(); err != nil {
		return err
	}
	for i, e := range entries {
		if err := e.Validate(tc); err != nil {
			return fmt.Errorf("entries[%d]: %w", i, err)
		}
	}
	return nil
}

// ValidateRoutes checks the arguments of Index.Route: every group must be a valid name
// (see ValidateName). The error names the first bad route's index.
func ValidateRoutes(routes []Route) error {
	for i, r := range routes {
		if err := ValidateName("Group", r.Group); err != nil {
			return fmt.Errorf("routes[%d]: %w", i, err)
		}
	}
	return nil
}

// ValidateClaimWindow checks the times of Index.Claim: now and until must lie in [MinTime,
// MaxTime], and until must be after now. It wraps ErrInvalid and names the bad time.
func ValidateClaimWindow(now, until time.Time) error {
	if err := ValidateTime("now", now); err != nil {
		return err
	}
	if err := ValidateTime("until", until); err != nil {
		return err
	}
	if !until.After(now) {
		return fmt.Errorf("%w: until %v is not after now %v", ErrInvalid, until, now)
	}
	return nil
}

// ValidateClaim checks the arguments of ClaimGuard's methods: tc must be valid, and the
// claim must name tc's user and a valid WorkKey.
func ValidateClaim(tc tenancy.Context, c Claim) error {
	if err := tc.Check(); err != nil {
		return err
	}
	if c.Entry.UserID != tc.UserID() {
		return fmt.Errorf("%w: claim's UserID %q is not the context's user %q", ErrInvalid, c.Entry.UserID, tc.UserID())
	}
	return ValidateWorkKey(c.Entry.WorkKey)
}

// Validate checks q for Index.Ready: Group empty or a valid name, Now within [MinTime,
// MaxTime], Users and PerUser within [1, MaxLimit], Hold not negative and Now+Hold within
// range.
func (q ReadyQuery) Validate() error {
	if err := ValidateName("Group", q.Group); err != nil {
		return err
	}
	if err := ValidateTime("Now", q.Now); err != nil {
		return err
	}
	if err := ValidateLimit("Users", q.Users); err != nil {
		return err
	}
	if err := ValidateLimit("PerUser", q.PerUser); err != nil {
		return err
	}
	if q.Hold < 0 {
		return fmt.Errorf("%w: Hold must not be negative, got %v", ErrInvalid, q.Hold)
	}
	return ValidateTime("Now+Hold", q.Now.Add(q.Hold))
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

// Head is one user at the front of its group's queue, as Index.Ready returns it.
type Head struct {
	UserID string
	// LastServed is the now of the last Claim that claimed any of this user's entries;
	// zero if never.
	LastServed time.Time
	// Turn is the user's place in its queue: max(ReadyAt, LastServed).
	Turn time.Time
	// Due holds the user's first visible entries, in the order Index.Ready reads them.
	Due []Entry
	// More is true when the user has further visible entries beyond Due.
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

// MaxMissStreak is where Advance stops counting misses, so that the count never overflows,
// and the largest MissStreak an Index stores.
const MaxMissStreak = 1 << 30
