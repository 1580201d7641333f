package duework

import (
	"context"
	"time"

	"github.com/rotaworks/rota/tenancy"
)

// Index stores the due-work entries of every tenant and keeps, for each group of users, the
// queue in which they take turns. Most code never calls it directly: bridge schedules, the
// dispatch.Dispatcher reads and claims, and bridge's Runner completes.
//
// Writes and single-entry reads are tenant-scoped: they take a validated tenancy.Context
// (the zero Context is tenancy.ErrNoTenant) and touch only that tenant's rows. DueBefore,
// Ready, Route, Groups, Release and Claim are the dispatcher's cross-tenant calls — the
// narrow exception — and can only ever expose scheduling metadata, because an Entry carries
// no payload.
//
// # Visibility and turns
//
// An entry is visible at now when DueAt <= now and it is unclaimed or its claim has ended
// (Until <= now). A user's ReadyAt is the earliest instant at which one of its entries is
// visible, and its Turn is max(ReadyAt, LastServed): a user joins the back of its group's
// queue when it becomes ready, and again each time a Claim serves it. Queues are ordered by
// (Turn, UserID), user IDs compared bytewise. A user is ready at now when it has entries
// and Turn <= now. Every read depends only on the stored state and its own now.
//
// Every user belongs to one group, a string the dispatcher sets with Route; a user's first
// Schedule puts it in the unrouted group "". Users are never deleted: a user's group,
// LastServed and hold survive the removal of its last entry, so memory grows with tenant
// churn.
//
// # Holds
//
// Ready with a Hold hides the users it returns from other Ready calls until Now+Hold, so
// several dispatchers sharing one Index read disjoint users. Claim ends the hold of every
// user it serves; Release ends the holds a reader took and did not use.
//
// # Errors and ownership
//
// Bad input wraps ErrInvalid and names the field; a call that fails with it changes
// nothing. Stored times must lie in [MinTime, MaxTime]. Returned slices belong to the
// caller. ctx must not be nil. Implementations must be safe for concurrent use; the
// conformance suite duework/indextest checks all of this.
type Index interface {
	// Schedule inserts or replaces the tenant's entry e.WorkKey; e.UserID must equal
	// tc.UserID(). Replacing a claimed entry ends the claim: the claimant's Complete then
	// gets ErrClaimLost. O(log n).
	Schedule(ctx context.Context, tc tenancy.Context, e Entry) error
	// Unschedule removes the tenant's entry workKey whatever its claim; an absent entry is
	// not an error. O(log n).
	Unschedule(ctx context.Context, tc tenancy.Context, workKey string) error
	// Get returns the tenant's entry workKey, claimed or not, or ErrNotFound.
	Get(ctx context.Context, tc tenancy.Context, workKey string) (Entry, error)
	// Complete writes next (same WorkKey as the claim, both tc's) and ends the claim while
	// c is still the entry's current claim — also past c.Until, as long as no later claim,
	// Schedule or Unschedule replaced it — or returns ErrClaimLost and writes nothing.
	Complete(ctx context.Context, tc tenancy.Context, c Claim, next Entry) error
	// CompleteMany is Complete for many items at once, each under its own Context. When
	// err is nil, errs has one outcome per item (nil, ErrClaimLost, ErrInvalid, …), applied
	// as if one after another: a key given twice gets ErrClaimLost the second time. When
	// err is not nil (ctx, connection), errs is nil and any subset may have been written; a
	// retry reports those as ErrClaimLost and never writes them twice.
	CompleteMany(ctx context.Context, done []Done) (errs []error, err error)

	// DueBefore returns at most limit entries visible at now, ordered by (DueAt, UserID,
	// WorkKey).
	DueBefore(ctx context.Context, now time.Time, limit int) ([]Entry, error)
	// Ready returns up to q.Users users of q.Group that are ready and not held at q.Now,
	// in turn order, each with its first q.PerUser visible entries in (DueAt, WorkKey)
	// order. With q.Hold > 0 it holds every user it returns until q.Now+q.Hold.
	// It costs what it returns and the held users it skips, never the number of ready
	// users of the group nor any user's backlog.
	Ready(ctx context.Context, q ReadyQuery) (ReadyPage, error)
	// Route moves each named user to its group, keeping its Turn and hold; users the index
	// does not store are ignored.
	Route(ctx context.Context, routes []Route) error
	// Groups returns, sorted bytewise, the groups that hold a user ready at now.
	Groups(ctx context.Context, now time.Time) ([]string, error)
	// Release ends the holds of the named users that end exactly at heldUntil (the
	// reader's Now+Hold, at the index's time precision), so a reader whose hold lapsed and
	// was taken by another cannot end the other's. Turns stay as they were.
	Release(ctx context.Context, userIDs []string, heldUntil time.Time) error
	// Claim claims, atomically, those of keys that are visible at now, until until (which
	// must be after now), and returns their claims in the order of keys. Keys that are
	// absent, invalid, not visible or given twice are skipped. Each claim gets a token that
	// no earlier claim of that entry had. For every user it claims an entry of, it sets
	// LastServed to the later of LastServed and now and ends the user's hold.
	Claim(ctx context.Context, keys []Key, now, until time.Time) ([]Claim, error)
}

// Done is one item of Index.CompleteMany: complete Claim with Next under Tenant.
type Done struct {
	Tenant tenancy.Context
	Claim  Claim
	Next   Entry
}

// Route moves one user to a group (see Index.Route).
type Route struct {
	UserID string
	Group  string
}

// ReadyQuery asks Index.Ready for the next users of one group.
type ReadyQuery struct {
	// Group is the group to read; "" is the unrouted group.
	Group string
	// Now is the time of the read.
	Now time.Time
	// Users is the most heads to return, at least 1 and at most MaxLimit.
	Users int
	// PerUser is the most Due entries per head, at least 1 and at most MaxLimit.
	PerUser int
	// Hold hides the returned users from other Ready calls until Now+Hold; 0 holds nothing.
	Hold time.Duration
}

// ReadyPage is what Index.Ready returns.
type ReadyPage struct {
	// Heads are the users read, in turn order.
	Heads []Head
	// Next is the Turn of the first ready, unheld user of the group that the read left
	// unread; zero if there is none.
	Next time.Time
}

// MissingScheduler is an optional Index capability: scheduling a batch of a tenant's
// entries without touching those it already has. bridge.SyncWatchlist uses it when the
// Index has it, so that concurrent syncs neither race nor end running claims.
type MissingScheduler interface {
	// ScheduleMissing inserts each of entries (all tc's) whose WorkKey tc does not have
	// yet and leaves the others exactly as they are, claims included; it returns how many
	// it inserted. Invalid input is ErrInvalid and writes nothing; a WorkKey given twice
	// is inserted at most once, the first one winning.
	ScheduleMissing(ctx context.Context, tc tenancy.Context, entries []Entry) (added int, err error)
}

// ClaimGuard is an optional Index capability: acting on a claim without completing it.
// bridge uses it when the Index has it, so that a forged or stale item can neither run a
// tenant's pipeline nor remove its entry.
type ClaimGuard interface {
	// CheckClaim returns nil while c is the current claim of tc's entry c.Entry.WorkKey,
	// and ErrClaimLost otherwise. It writes nothing.
	CheckClaim(ctx context.Context, tc tenancy.Context, c Claim) error
	// UnscheduleClaimed removes tc's entry c.Entry.WorkKey while c is its current claim,
	// and otherwise returns ErrClaimLost and removes nothing.
	UnscheduleClaimed(ctx context.Context, tc tenancy.Context, c Claim) error
}
