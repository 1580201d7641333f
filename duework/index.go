package duework

import (
	"context"
	"time"

	"github.com/rotaworks/rota/tenancy"
)

// Index stores the due-work entries of every tenant and keeps, for each group of users, the
// queue in which they take turns. Most code never calls it directly: bridge schedules, the
// dispatch.Dispatcher reads and claims, and bridge's Worker (or Runner) completes.
//
// Writes and single-entry reads are tenant-scoped: they take a validated tenancy.Context
// (the zero Context is tenancy.ErrNoTenant) and touch only that tenant's rows. DueBefore,
// Ready, Route, Groups, Release and Claim are the dispatcher's cross-tenant calls, and User
// and Entries an operator's — the narrow exception — and can only ever expose scheduling
// metadata, because an Entry carries no payload.
//
// # Visibility and turns
//
// An entry is visible at now when DueAt <= now and it is unclaimed or its claim has ended
// (Until <= now). A claim is current from the Claim that made it until a Complete, Unclaim,
// UnscheduleClaimed, Schedule or Unschedule of its entry, or a later Claim, ends it —
// whether or not its Until has passed. A user's in-flight count at now is the number of its
// current claims whose Until is after now.
//
// A user's ReadyAt is the earliest instant at which one of its entries is visible and its
// limits let it be served: the greatest of
//   - the least, over its entries, of DueAt (unclaimed) or max(DueAt, Until) (claimed);
//   - with Limits.MaxInFlight = M > 0 and at least M current claims, the M-th latest Until
//     among them (ended or not): the instant its in-flight count falls below M;
//   - with Limits.Every = E > 0, R − (b−1)·E for its rate mark R (below) and b =
//     max(Burst, 1): the instant its next item is allowed;
//   - while its pause counts (see Pauses below), its PausedUntil.
//
// It changes only when the user's entries, limits or pause are written (Schedule,
// ScheduleMissing, Unschedule, Claim, Complete, Unclaim, UnscheduleClaimed, Route, Pause,
// Resume). A
// user's Turn is max(ReadyAt, pass), pass its stride position (below): a user joins the
// back of its queue when it becomes ready, and again each time a Claim serves it. Queues
// are ordered by (Turn, UserID), user IDs compared bytewise. A user is ready at now when
// it has entries and Turn <= now. Every read depends only on the stored state and its own
// now.
//
// Every user belongs to one group, a string the dispatcher sets with Route; a user's first
// Schedule puts it in the unrouted group "" with zero Limits. Users are never deleted: a
// user's group, limits, LastServed, pass, rate mark and hold survive the removal of its last
// entry, so memory grows with tenant churn.
//
// # Flow control
//
// A Claim at now that claims k ≥ 1 entries of a user applies its Limits atomically, as if
// the claims of one call were made one after another in the order of its keys:
//   - MaxInFlight: the user's keys beyond M − (in-flight count at now) are skipped, so no
//     Claim leaves its in-flight count at its now, or at any later instant, above M;
//   - rate: with Every = E > 0, b = max(Burst, 1) and rate mark R (the zero time until the
//     first claim under a rate), the user may be claimed a = b items at now when R <= now,
//     else max(0, b − ceil((R − now)/E)), and its keys beyond a are skipped; after the
//     call R becomes max(R, now) + k·E (saturating at the last nanosecond of year 9999).
//     A claim with Every = 0 leaves R as it is, and Unclaim refunds nothing. So in any
//     closed window [t, t+T] the user is claimed at most b + floor(T/E) items, and a user
//     claimed whenever it is ready, with work always visible and R <= t, exactly that
//     many;
//   - pass: with w = Limits.EffectiveWeight() and T the user's Turn before the call —
//     raised, when w > 1, k < w and the user was served before now, to at least
//     now − 3·w·(now − LastServed) (LastServed before the call; at least the zero time), so that
//     a user whose Turn fell far behind does not take serve after serve while it catches
//     up — pass becomes max(pass, now) when k ≥ w or T is not before now, and otherwise
//     max(pass, T + s), s = floor(L·k/w) microseconds for L = now − T in whole
//     microseconds (rounded down). It starts at the zero time. With weight 1 every claim
//     sets it to max(pass, now), so a user whose claims were all at weight 1 has pass =
//     LastServed and Turn = max(ReadyAt, LastServed), exactly as with no limits.
//
// # Pauses
//
// Pause keeps a user from being served before an instant, whoever dispatches: the index
// stores one pause per user, its PausedUntil and reason. The pause counts while PausedUntil
// is after the user's LastServed, and the user is paused at now while it counts and
// PausedUntil is after now. A Claim skips the keys of a user paused at its now, so a paused
// user is never served and a pause counts until its end; it stops counting once the user is
// served at or after that end, and a Pause whose until is not after the user's LastServed
// changes nothing a read sees. While the pause counts, ReadyAt is at least PausedUntil: a
// paused user is not ready and costs a Ready nothing, and when its pause ends it joins the
// back of its queue at PausedUntil, as a user that has just become ready does. DueBefore
// ignores pauses, as it ignores limits.
//
// Index.Ready returns no more Due entries for a user than its limits allow at Now (the
// least of its free slots and its rate allowance a) and never more than PerUser × weight;
// More is set whenever the user has visible entries beyond Due. Head carries the user's
// Limits and InFlight. A ready user is always allowed at least one entry.
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
// nothing. Stored times and every now lie in years 1 to 9999 UTC: from the zero time
// (January 1 of year 1) to the last nanosecond of 9999, both included. An implementation
// checks its arguments with Entry.Validate, Done.Validate, Unclaim.Validate,
// Route.Validate, ReadyQuery.Validate and UserPause.Validate, and the rest by the same
// rules, wrapping
// ErrInvalid: a work key or user ID is a valid ID by tenancy.ValidateID's rule, a limit
// lies in [1, MaxLimit]. Returned slices belong to the caller. ctx must not be nil.
// Implementations must be safe for concurrent use; the conformance suite duework/indextest
// checks all of this.
type Index interface {
	// Schedule inserts or replaces the tenant's entry e.WorkKey; e.UserID must equal
	// tc.UserID(). Replacing a claimed entry ends the claim: the claimant's Complete then
	// gets ErrClaimLost. O(log n).
	Schedule(ctx context.Context, tc tenancy.Context, e Entry) error
	// ScheduleMissing inserts each of entries (all tc's) whose WorkKey tc does not have
	// yet and leaves the others exactly as they are, claims included; it returns how many
	// it inserted. Invalid input is ErrInvalid and writes nothing; a WorkKey given twice
	// is inserted at most once, the first one winning. O(len(entries) · log n).
	ScheduleMissing(ctx context.Context, tc tenancy.Context, entries []Entry) (added int, err error)
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
	// StartClaims marks claims started, each under its own Context, with CompleteMany's
	// rules for errs and err, so that each claim runs at most once however many copies of
	// its item reach workers: for a claim that is current, with its token and its Until
	// both the claim's (as Claim returned them), and not yet started, it marks the claim
	// started and the outcome is nil; a current claim already started gets
	// ErrClaimStarted (the second of one claim given twice in a call too), and one that is
	// not current ErrClaimLost. Started is a property of the claim: a later Claim of the
	// entry starts unstarted. When err is not nil, any subset may have been marked, and a
	// retry reports those as ErrClaimStarted. It does nothing else: Complete, CompleteMany
	// and UnscheduleClaimed take started and unstarted claims alike. One round trip for the
	// batch on a database.
	StartClaims(ctx context.Context, claims []Unclaim) (errs []error, err error)
	// UnscheduleClaimed removes tc's entry c.Entry.WorkKey while c is its current claim,
	// and otherwise returns ErrClaimLost and removes nothing.
	UnscheduleClaimed(ctx context.Context, tc tenancy.Context, c Claim) error
	// Unclaim hands claims back unrun, each under its own Context, with CompleteMany's
	// rules for errs and err: it ends each claim that is still current and leaves its
	// entry exactly as it is, so it is visible at once (its DueAt was at most the Claim's
	// now). It frees the in-flight slot, refunds no rate allowance and keeps LastServed
	// and the stride position: the user's Turn moves only as its ReadyAt does. A claim
	// that is no longer current gets ErrClaimLost, and a started one (see StartClaims)
	// ErrClaimStarted; neither is written: a claim that ran is completed, not handed back.
	Unclaim(ctx context.Context, claims []Unclaim) (errs []error, err error)

	// Pause keeps tc's user from being served before until (see Pauses above): its stored
	// pause becomes the later of the stored one and until, with the reason of the later
	// (reason on a tie), so a short pause never shortens a longer one. A user the index
	// does not store yet is stored, in the unrouted group with zero limits, so entries
	// scheduled later wait too. until must be within years 1 to 9999 UTC and not the zero
	// time, and reason a valid name (tenancy.ValidateID's rules), else ErrInvalid naming
	// the field. Claims already made run on. O(log n).
	Pause(ctx context.Context, tc tenancy.Context, until time.Time, reason string) error
	// Resume ends tc's user's pause at once: its ReadyAt is recomputed without it. A user
	// that has no pause that counts, or is not stored, is not an error and nothing is
	// written. O(log n).
	Resume(ctx context.Context, tc tenancy.Context) error
	// Paused returns, in UserID order (bytewise), up to limit of the users paused at now
	// whose IDs sort after after ("" for the first), each with its pause, so that passing
	// the last UserID returned pages through them all. An invalid now, an after that is
	// neither "" nor a valid user ID, or a limit outside [1, MaxLimit] is ErrInvalid. It
	// costs what it returns, plus the pauses it passes over that have ended at now.
	Paused(ctx context.Context, now time.Time, after string, limit int) ([]UserPause, error)

	// DueBefore returns at most limit entries visible at now, ordered by (DueAt, UserID,
	// WorkKey), whatever the users' limits.
	DueBefore(ctx context.Context, now time.Time, limit int) ([]Entry, error)
	// Ready returns up to q.Users users of q.Group that are ready and not held at q.Now,
	// in turn order, each with its first visible entries in (DueAt, WorkKey) order, as many
	// as its limits allow and at most q.PerUser × its weight. With q.Hold > 0 it holds
	// every user it returns until q.Now+q.Hold. It costs what it returns and the held
	// users it skips, never the number of ready users of the group nor any user's
	// backlog, and a limited user costs no more to read than an unlimited one.
	Ready(ctx context.Context, q ReadyQuery) (ReadyPage, error)
	// Route moves each named user to its group and stores its limits, one route after
	// another (a user named twice ends as the last route says), keeping its hold,
	// LastServed, stride position and rate mark; its Turn changes only as the new limits
	// change its ReadyAt. Users the index does not store are ignored. A route with an
	// invalid group or limits is ErrInvalid naming the route and field, and nothing of the
	// call is written.
	Route(ctx context.Context, routes []Route) error
	// Groups returns, sorted bytewise, the groups that hold a user ready at now.
	Groups(ctx context.Context, now time.Time) ([]string, error)
	// Release ends the holds of the named users that end exactly at heldUntil (the
	// reader's Now+Hold, at the index's time precision), so a reader whose hold lapsed and
	// was taken by another cannot end the other's. Turns stay as they were.
	Release(ctx context.Context, userIDs []string, heldUntil time.Time) error
	// Claim claims, atomically, those of keys that are visible at now and that the users'
	// limits allow (see Flow control above), until until (which must be after now), and
	// returns their claims in the order of keys. Keys that are absent, invalid, not
	// visible, beyond a limit or given twice are skipped. Each claim gets a token that no
	// earlier claim of that entry had. For every user it claims an entry of, it sets
	// LastServed to the later of LastServed and now, moves its stride position and rate
	// mark, and ends the user's hold.
	Claim(ctx context.Context, keys []Key, now, until time.Time) ([]Claim, error)

	// User returns userID's place in its queue at now (see UserState), or ErrNotFound for
	// a user the index does not store (one only routed is not stored). An invalid userID
	// or now is ErrInvalid. O(log n).
	User(ctx context.Context, userID string, now time.Time) (UserState, error)
	// Entries returns up to limit of userID's entries whose WorkKey sorts after after
	// ("" for the first), in WorkKey order (bytewise), each with its current claim's
	// Until, so that passing the last WorkKey returned pages through them all. A user the
	// index does not store has none. An invalid userID, an after that is neither "" nor a
	// valid WorkKey, and a limit outside [1, MaxLimit] are ErrInvalid. It costs what it
	// returns.
	Entries(ctx context.Context, userID, after string, limit int) ([]EntryState, error)
}

// UserPause is one paused user, as Index.Paused reports it: paused until Until, for
// Reason.
type UserPause struct {
	UserID string
	Reason string
	Until  time.Time
}

// Done is one item of Index.CompleteMany: complete Claim with Next under Tenant.
type Done struct {
	Tenant tenancy.Context
	Claim  Claim
	Next   Entry
}

// Route moves one user to a group and sets its limits (see Index.Route).
type Route struct {
	UserID string
	Group  string
	Limits Limits
}

// ReadyQuery asks Index.Ready for the next users of one group.
type ReadyQuery struct {
	// Group is the group to read; "" is the unrouted group.
	Group string
	// Now is the time of the read.
	Now time.Time
	// Users is the most heads to return, at least 1 and at most MaxLimit.
	Users int
	// PerUser is the most Due entries per head of weight 1, at least 1 and at most
	// MaxLimit; a head of weight w gets at most PerUser × w.
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
