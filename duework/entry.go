package duework

import (
	"errors"
	"fmt"
	"time"

	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/internal/vocab"
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
	// ErrClaimStarted is returned by Index.StartClaims (as an item's outcome) for a claim
	// already started, and by Index.Unclaim for a started claim: it ran, so complete it.
	// Nothing is written.
	ErrClaimStarted = errors.New("duework: claim already started")
	// ErrInvalid is returned for bad input: an empty or malformed WorkKey or Tier, a zero
	// DueAt, a time outside years 1 to 9999 UTC, a MissStreak or ErrorStreak outside [0,
	// MaxMissStreak], an Entry whose UserID is not the Context's, a limit, Users or PerUser
	// outside [1, MaxLimit], a negative Hold, an until not after now, a malformed group
	// name, a pause's zero until or malformed reason. The wrapping error names the field
	// and its value.
	ErrInvalid = errors.New("duework: invalid input")
)

// MaxLimit is the largest limit, ReadyQuery.Users and ReadyQuery.PerUser an Index takes:
// 1,048,576.
const MaxLimit = vocab.MaxLimit

// validName checks a Tier or a group name: empty, or a valid name by tenancy.ValidateID's
// rules. It wraps ErrInvalid and names field.
func validName(field, name string) error {
	if name == "" {
		return nil
	}
	return vocab.Name(ErrInvalid, field, name)
}

// validTime checks that t lies in years 1 to 9999 UTC, wrapping ErrInvalid and naming
// field.
func validTime(field string, t time.Time) error { return vocab.Time(ErrInvalid, field, t) }

// validWorkKey checks a work key by tenancy.ValidateID's rules, wrapping ErrInvalid.
func validWorkKey(workKey string) error { return vocab.Name(ErrInvalid, "WorkKey", workKey) }

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
	// ErrorStreak counts the consecutive runs that failed; 0 after any hit or miss.
	ErrorStreak int
}

// Key returns the entry's identity in the index.
func (e Entry) Key() Key { return Key{UserID: e.UserID, WorkKey: e.WorkKey} }

// Validate checks e for Schedule on behalf of tc: tc must be valid, e.UserID must equal
// tc.UserID(), WorkKey must be a valid ID (tenancy.ValidateID's rules), Tier empty or a
// valid ID, DueAt non-zero, DueAt and LastRunAt within years 1 to 9999 UTC, and MissStreak
// and ErrorStreak within [0, MaxMissStreak]. Index implementations call it.
func (e Entry) Validate(tc tenancy.Context) error { return e.validate(tc, "", "") }

// validate is Validate, but takes e's WorkKey as valid when it is known, and its Tier
// when it is tier: an index that stores the entry already validated both, and
// completing it need not walk those strings again.
func (e Entry) validate(tc tenancy.Context, known, tier string) error {
	if err := tc.Check(); err != nil {
		return err
	}
	if e.UserID != tc.UserID() {
		return fmt.Errorf("%w: entry UserID %q is not the context's user %q", ErrInvalid, e.UserID, tc.UserID())
	}
	if e.WorkKey != known || known == "" {
		if err := validWorkKey(e.WorkKey); err != nil {
			return err
		}
	}
	if e.Tier != tier {
		if err := validName("Tier", e.Tier); err != nil {
			return fmt.Errorf("entry %q: %w", e.WorkKey, err)
		}
	}
	if e.DueAt.IsZero() {
		return fmt.Errorf("%w: entry %q has a zero DueAt", ErrInvalid, e.WorkKey)
	}
	if err := validTime("DueAt", e.DueAt); err != nil {
		return fmt.Errorf("entry %q: %w", e.WorkKey, err)
	}
	if err := validTime("LastRunAt", e.LastRunAt); err != nil {
		return fmt.Errorf("entry %q: %w", e.WorkKey, err)
	}
	if e.MissStreak < 0 || e.MissStreak > MaxMissStreak {
		return fmt.Errorf("%w: entry %q has MissStreak %d, outside [0, %d]", ErrInvalid, e.WorkKey, e.MissStreak, MaxMissStreak)
	}
	if e.ErrorStreak < 0 || e.ErrorStreak > MaxMissStreak {
		return fmt.Errorf("%w: entry %q has ErrorStreak %d, outside [0, %d]", ErrInvalid, e.WorkKey, e.ErrorStreak, MaxMissStreak)
	}
	return nil
}

// Validate checks d for Index.Complete and Index.CompleteMany: Next must be valid for
// Tenant (see Entry.Validate), and Claim must name Tenant's user and Next's WorkKey.
func (d Done) Validate() error { return d.validate("", "") }

// validate is Validate, taking Next's WorkKey and Tier as valid as Entry.validate does.
func (d Done) validate(known, tier string) error {
	if err := d.Next.validate(d.Tenant, known, tier); err != nil {
		return err
	}
	if d.Claim.Entry.UserID != d.Tenant.UserID() {
		return fmt.Errorf("%w: claim's UserID %q is not the context's user %q", ErrInvalid, d.Claim.Entry.UserID, d.Tenant.UserID())
	}
	if d.Next.WorkKey != d.Claim.Entry.WorkKey {
		return fmt.Errorf("%w: next WorkKey %q is not the claim's %q", ErrInvalid, d.Next.WorkKey, d.Claim.Entry.WorkKey)
	}
	return nil
}

// validEntries checks the arguments of Index.ScheduleMissing: tc must be valid and every
// entry valid for it (see Entry.Validate). The error names the first bad entry's index.
func validEntries(tc tenancy.Context, entries []Entry) error {
	if err := tc.Check(); err != nil {
		return err
	}
	return vocab.Each("entries", entries, func(e Entry) error { return e.Validate(tc) })
}

// Validate checks r for Index.Route: Group empty or a valid ID (tenancy.ValidateID's
// rules) and Limits valid (see Limits.Validate). The error wraps ErrInvalid and names the
// field and, for bad limits, the user.
func (r Route) Validate() error {
	if err := validName("Group", r.Group); err != nil {
		return err
	}
	if err := r.Limits.Validate(); err != nil {
		return fmt.Errorf("user %q: %w", r.UserID, err)
	}
	return nil
}

// Validate checks u for Index.Unclaim, Index.StartClaims and Index.UnscheduleClaimed:
// Tenant must be valid, and Claim must name Tenant's user and a valid WorkKey.
func (u Unclaim) Validate() error {
	if err := u.Tenant.Check(); err != nil {
		return err
	}
	if u.Claim.Entry.UserID != u.Tenant.UserID() {
		return fmt.Errorf("%w: claim's UserID %q is not the context's user %q", ErrInvalid, u.Claim.Entry.UserID, u.Tenant.UserID())
	}
	return validWorkKey(u.Claim.Entry.WorkKey)
}

// Validate checks p, the pause Index.Pause is asked to store for tc's user (p.UserID =
// tc.UserID()): UserID a valid ID, Until within years 1 to 9999 UTC and not the zero time,
// and Reason a valid name (tenancy.ValidateID's rules). It wraps ErrInvalid and names the
// field.
func (p UserPause) Validate() error {
	if err := vocab.Name(ErrInvalid, "UserID", p.UserID); err != nil {
		return err
	}
	if p.Until.IsZero() {
		return fmt.Errorf("%w: until must not be the zero time", ErrInvalid)
	}
	if err := validTime("until", p.Until); err != nil {
		return err
	}
	return vocab.Name(ErrInvalid, "reason", p.Reason)
}

// Validate checks q for Index.Ready: Group empty or a valid ID (tenancy.ValidateID's
// rules), Now within years 1 to 9999 UTC, Users and PerUser within [1, MaxLimit], Hold not
// negative and Now+Hold within those years.
func (q ReadyQuery) Validate() error {
	if err := validName("Group", q.Group); err != nil {
		return err
	}
	if err := validTime("Now", q.Now); err != nil {
		return err
	}
	if err := vocab.Limit(ErrInvalid, "Users", q.Users); err != nil {
		return err
	}
	if err := vocab.Limit(ErrInvalid, "PerUser", q.PerUser); err != nil {
		return err
	}
	if q.Hold < 0 {
		return fmt.Errorf("%w: Hold must not be negative, got %v", ErrInvalid, q.Hold)
	}
	return validTime("Now+Hold", q.Now.Add(q.Hold))
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
	// Turn is the user's place in its queue: max(ReadyAt, pass), pass its stride
	// position, which is LastServed for a user whose claims were all at weight 1 (see
	// Index).
	Turn time.Time
	// Due holds the user's first visible entries, in (DueAt, WorkKey) order: as many as
	// its limits allow at the read's now, and at most ReadyQuery.PerUser × its weight.
	Due []Entry
	// More is true when the user has further visible entries beyond Due. A head with More
	// whose Due is shorter than PerUser × its weight was cut by its own limits.
	More bool
	// Limits are the user's stored limits, and InFlight its in-flight count at the read's
	// now.
	Limits   Limits
	InFlight int
}

// Advance returns e rescheduled after a run that ended at now. It is pure.
//
// A hit resets MissStreak to 0 and schedules now + p.NextInterval(0); a miss increments
// MissStreak and schedules now + p.NextInterval(streak); either way ErrorStreak becomes 0.
// The next due time counts from now, never from the old DueAt, so after an outage a source
// runs once, not once per missed interval. LastRunAt becomes now. If the policy returns a non-positive interval, the entry
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
	e.ErrorStreak = 0
	return rescheduled(e, p.NextInterval(e.MissStreak), now)
}

// Fail returns e rescheduled after a run that failed at now. It is pure, the retry beside
// Advance: ErrorStreak grows by one and the entry is due at now + p.NextInterval(ErrorStreak
// − 1), so the first failure waits p.NextInterval(0) and each further one backs off as a
// miss would; MissStreak stays as it was, and LastRunAt becomes now. As in Advance, the next
// due time counts from now and is always after it, a negative ErrorStreak counts as 0, and
// the streak stops growing at MaxMissStreak.
func Fail(e Entry, p cadence.Policy, now time.Time) Entry {
	if e.ErrorStreak < 0 {
		e.ErrorStreak = 0
	}
	if e.ErrorStreak < MaxMissStreak {
		e.ErrorStreak++
	}
	return rescheduled(e, p.NextInterval(e.ErrorStreak-1), now)
}

// rescheduled returns e run at now and due d later; a non-positive d counts as a nanosecond.
func rescheduled(e Entry, d time.Duration, now time.Time) Entry {
	if d <= 0 {
		d = 1
	}
	e.LastRunAt = now
	e.DueAt = now.Add(d)
	return e
}

// MaxMissStreak is where Advance stops counting misses and Fail failures, so that neither
// count overflows, and the largest MissStreak and ErrorStreak an Index stores.
const MaxMissStreak = 1 << 30
