package duework

import (
	"context"
	"time"

	"github.com/rotaworks/rota/tenancy"
)

// Index stores the due-work entries of every tenant and hands them out to dispatchers.
//
// Writes and single-entry reads are tenant-scoped: they take a validated tenancy.Context
// (the zero Context is tenancy.ErrNoTenant) and touch only that tenant's rows. DueBefore,
// DueHeads and Claim are the dispatcher's cross-tenant reads — the narrow, documented
// exception — and can only ever expose scheduling metadata, because an Entry carries no
// payload.
//
// Ordering: DueBefore returns unclaimed entries with DueAt <= now ordered by (DueAt,
// UserID, WorkKey), at most limit. DueHeads returns one Head per user with such entries, in
// UserID order: the user's first perUser of them in (DueAt, WorkKey) order, More when it
// has further due entries, and LastServed.
//
// Claims: an entry whose claim has not ended (Until > now) is invisible to both reads.
// Claim claims, atomically, those of keys that are still due and unclaimed and skips the
// rest. Complete writes next only while the claim it names is still the entry's current
// claim — also past Until, as long as no later claim replaced it — else ErrClaimLost.
// Schedule on a claimed entry replaces it and ends the claim; Unschedule removes an entry
// whatever its claim.
//
// Bad input wraps ErrInvalid and names the field; the zero tenancy.Context is
// tenancy.ErrNoTenant. A call that fails changes nothing. Returned slices belong to the
// caller. Implementations must be safe for concurrent use; the conformance suite
// duework/indextest checks all of this.
type Index interface {
	// Schedule inserts or replaces the tenant's entry e.WorkKey; e.UserID must equal
	// tc.UserID(). Replacing a claimed entry ends the claim.
	Schedule(ctx context.Context, tc tenancy.Context, e Entry) error
	// Unschedule removes the tenant's entry workKey; an absent entry is not an error.
	Unschedule(ctx context.Context, tc tenancy.Context, workKey string) error
	// Get returns the tenant's entry workKey, claimed or not, or ErrNotFound.
	Get(ctx context.Context, tc tenancy.Context, workKey string) (Entry, error)

	// DueBefore returns at most limit unclaimed entries with DueAt <= now, ordered by
	// (DueAt, UserID, WorkKey).
	DueBefore(ctx context.Context, now time.Time, limit int) ([]Entry, error)
	// DueHeads returns, in UserID order, one Head per user with unclaimed entries due at
	// now. Its cost grows with what it returns, not with any user's backlog.
	DueHeads(ctx context.Context, now time.Time, perUser int) ([]Head, error)

	// Claim claims, atomically, those of keys that are due at now and unclaimed, until
	// until (which must be after now), and returns their claims in the order of keys.
	// Keys that are absent, not due or claimed are skipped, and a key given twice is
	// claimed once. Each claim gets a token that no earlier claim of that entry had. It
	// stamps LastServed = now for every user it claimed an entry of.
	Claim(ctx context.Context, keys []Key, now, until time.Time) ([]Claim, error)
	// Complete replaces the claimed entry with next (same UserID and WorkKey as the claim,
	// which must be tc's) and ends the claim, or returns ErrClaimLost and writes nothing.
	Complete(ctx context.Context, tc tenancy.Context, c Claim, next Entry) error
}
