package bridge

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// DefaultRetryDelay is how long after a failed run an entry comes due again when
// [Bridge.RetryDelay] is zero.
const DefaultRetryDelay = time.Minute

// SyncJitterFraction is the share of a tier's base interval over which [Bridge.SyncWatchlist]
// spreads new entries: 1 means a new entry comes due anywhere in [now, now + base), so that
// many sources added at once do not all come due in the same second.
const SyncJitterFraction = 1.0

var (
	// ErrInvalidBridge is returned by SyncWatchlist, RunDueItem and NewRunner when a
	// Bridge lacks a collaborator (Index, Watchlist, Pipeline) or has a negative
	// RetryDelay. The wrapping error names the field.
	ErrInvalidBridge = errors.New("bridge: invalid bridge")
	// ErrPipelinePanic is returned by RunDueItem when the pipeline panicked. The panic is
	// recovered so that one bad source cannot take down the other items of a cycle; the
	// entry is retried like after any other pipeline error. The wrapping error holds the
	// panic value and the stack.
	ErrPipelinePanic = errors.New("bridge: pipeline panicked")
)

// presets resolves tiers for a Bridge whose Tiers is nil. It is never registered into.
var presets = cadence.NewRegistry()

// Bridge connects the watchlist, the due-work index and the host's pipeline: it keeps a
// tenant's watchlist scheduled ([Bridge.SyncWatchlist]) and runs one dispatched item
// through the pipeline and back into the index ([Bridge.RunDueItem]). It adds no decisions
// of its own. A Bridge is safe for concurrent use when its collaborators are; do not change
// its fields while it is in use.
type Bridge struct {
	// Index holds the due-work entries. Required.
	Index duework.Index
	// Watchlist holds what each tenant watches. Required.
	Watchlist tenancy.Watchlist
	// Pipeline does the host's work for one source. Required.
	Pipeline Pipeline
	// Tiers resolves a watchlist entry's tier to its cadence. Nil means the presets of
	// cadence.NewRegistry.
	Tiers *cadence.Registry
	// RetryDelay is how long after a failed run (pipeline error, unknown tier, watchlist
	// read error) the entry comes due again. Zero means DefaultRetryDelay; it must not be
	// negative.
	RetryDelay time.Duration
}

func (b *Bridge) check() error {
	var errs []error
	if b == nil {
		return fmt.Errorf("%w: the Bridge is nil", ErrInvalidBridge)
	}
	if b.Index == nil {
		errs = append(errs, fmt.Errorf("%w: Index is nil", ErrInvalidBridge))
	}
	if b.Watchlist == nil {
		errs = append(errs, fmt.Errorf("%w: Watchlist is nil", ErrInvalidBridge))
	}
	if b.Pipeline == nil {
		errs = append(errs, fmt.Errorf("%w: Pipeline is nil", ErrInvalidBridge))
	}
	if b.RetryDelay < 0 {
		errs = append(errs, fmt.Errorf("%w: RetryDelay must not be negative, got %v", ErrInvalidBridge, b.RetryDelay))
	}
	return errors.Join(errs...)
}

func (b *Bridge) tiers() *cadence.Registry {
	if b.Tiers == nil {
		return presets
	}
	return b.Tiers
}

func (b *Bridge) retryDelay() time.Duration {
	if b.RetryDelay == 0 {
		return DefaultRetryDelay
	}
	return b.RetryDelay
}

// jitterKey is the key a new entry's jitter hashes: user and slug, separated by a byte no
// valid ID can hold, so that no two distinct pairs collide.
func jitterKey(userID, slug string) string { return userID + "\x00" + slug }

// SyncWatchlist makes sure every watchlist entry of the tenant has a due-work entry, and
// returns how many it added.
//
// It is idempotent and additive: an entry that is already scheduled is left exactly as it
// is — its DueAt, streak and tier are never reset — so a host can call SyncWatchlist on
// every watchlist change. A new entry comes due within its tier's base interval (the
// policy's NextInterval(0)), at now + cadence.Jitter(user and slug, now, base,
// [SyncJitterFraction]), so a burst of additions is spread out. Entries whose watchlist
// row is gone are not touched here: [Bridge.RunDueItem] unschedules them when they come due.
//
// An entry with an unknown tier (wrapping cadence.ErrUnknownTier) or whose index calls fail
// is skipped with an error naming it; the others are still synced, and all errors are
// returned joined, together with the count of entries that were added. Calling it again
// retries what failed. Cost: one Index.Get per watchlist entry, one Schedule per new one.
func (b *Bridge) SyncWatchlist(ctx context.Context, tc tenancy.Context, now time.Time) (added int, err error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	if err := tc.Check(); err != nil {
		return 0, err
	}
	entries, err := b.Watchlist.List(ctx, tc)
	if err != nil {
		return 0, fmt.Errorf("bridge: sync user %q: list watchlist: %w", tc.UserID(), err)
	}
	var errs []error
	for _, we := range entries {
		_, err := b.Index.Get(ctx, tc, we.Slug)
		if err == nil {
			continue // already scheduled: leave its cadence alone
		}
		if !errors.Is(err, duework.ErrNotFound) {
			errs = append(errs, fmt.Errorf("bridge: sync user %q entry %q: %w", tc.UserID(), we.Slug, err))
			continue
		}
		p, err := b.tiers().Lookup(we.Tier)
		if err != nil {
			errs = append(errs, fmt.Errorf("bridge: sync user %q entry %q: %w", tc.UserID(), we.Slug, err))
			continue
		}
		base := p.NextInterval(0)
		e := duework.Entry{
			UserID:  tc.UserID(),
			WorkKey: we.Slug,
			Tier:    we.Tier,
			DueAt:   now.Add(cadence.Jitter(jitterKey(tc.UserID(), we.Slug), now, base, SyncJitterFraction)),
		}
		if err := b.Index.Schedule(ctx, tc, e); err != nil {
			errs = append(errs, fmt.Errorf("bridge: sync user %q entry %q: %w", tc.UserID(), we.Slug, err))
			continue
		}
		added++
	}
	return added, errors.Join(errs...)
}

// ItemStatus says how one dispatched item ended.
type ItemStatus int

// The ways an item ends.
const (
	// StatusError: the item failed — a pipeline error, an unknown tier, a failing
	// watchlist or index — and was rescheduled after the retry delay where the index
	// allowed it. If even that write failed, the entry stays claimed until its claim ends
	// and is then dispatched again: it is never lost.
	StatusError ItemStatus = iota
	// StatusHit: the pipeline found something new; the cadence snapped back to its base.
	StatusHit
	// StatusMiss: the pipeline found nothing new; the cadence backed off.
	StatusMiss
	// StatusRemoved: the watchlist entry was gone, so the due work was unscheduled.
	StatusRemoved
	// StatusLostClaim: the claim was no longer the entry's current one when the run
	// ended (it ran past its claim and was dispatched again, or the host rescheduled it);
	// nothing was written.
	StatusLostClaim
	// StatusReleased: the item was never started because the cycle's context ended first;
	// its claim was handed back with the entry unchanged, so it is due again at once.
	StatusReleased
)

var statusNames = [...]string{"error", "hit", "miss", "removed", "lost_claim", "released"}

// String returns the status in lower case: "hit", "miss", "lost_claim", ...
func (s ItemStatus) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("ItemStatus(%d)", int(s))
}

// itemRun is everything RunDueItem learned about one item.
type itemRun struct {
	status ItemStatus
	result *Result
	next   duework.Entry // what was written, for hits, misses and retries
	err    error
}

// RunDueItem runs one dispatched item: it resolves the watchlist entry by the item's
// UserID and WorkKey, runs the pipeline, advances the cadence with the watchlist entry's
// own tier (writing that tier into the due entry if it changed) and completes the claim.
// All times count from now, which should be the time the run ended (the Runner passes its
// cycle's now).
//
// Outcomes, in full:
//   - A hit ([Result.FoundNew]) resets the streak and schedules now + the tier's base
//     interval; a miss increments the streak and backs off (see duework.Advance). The
//     result is returned.
//   - A removed watchlist entry (tenancy.ErrNotFound) unschedules the due work and returns
//     (nil, nil): there is nothing to retry.
//   - A pipeline error, a pipeline panic ([ErrPipelinePanic]), an unknown tier (wrapping
//     cadence.ErrUnknownTier; the pipeline is not run) or a failing watchlist read loses
//     nothing: the entry is rescheduled at now + RetryDelay with its streak, tier and
//     LastRunAt unchanged, and the error is returned.
//   - If completing the claim fails — duework.ErrClaimLost because the item ran past its
//     claim and was dispatched again, or an index error — nothing is written and the error
//     is returned wrapped, together with the pipeline's result. An entry whose completion
//     failed stays claimed until its claim ends and is then dispatched again.
//
// The writes after the pipeline ran (Complete, Unschedule) use ctx's values but not its
// cancellation, so that a shutdown that cancels a running pipeline still records the
// retry instead of leaving the entry claimed until its claim ends.
func (b *Bridge) RunDueItem(ctx context.Context, item dispatch.Item, now time.Time) (*Result, error) {
	r := b.run(ctx, item, now)
	return r.result, r.err
}

func (b *Bridge) run(ctx context.Context, item dispatch.Item, now time.Time) itemRun {
	if err := b.check(); err != nil {
		return itemRun{status: StatusError, err: err}
	}
	claim := item.Claim
	key := claim.Entry.WorkKey
	name := fmt.Sprintf("user %q entry %q", claim.Entry.UserID, key)
	tc, err := tenancy.NewContext(claim.Entry.UserID)
	if err != nil {
		// Such an entry cannot be in an Index; there is nothing to write back under.
		return itemRun{status: StatusError, err: fmt.Errorf("bridge: %s: %w", name, err)}
	}
	writeCtx := context.WithoutCancel(ctx)

	we, err := b.Watchlist.Get(ctx, tc, key)
	switch {
	case errors.Is(err, tenancy.ErrNotFound):
		if err := b.Index.Unschedule(writeCtx, tc, key); err != nil {
			return itemRun{status: StatusError, err: fmt.Errorf("bridge: %s: removed from the watchlist, unschedule: %w", name, err)}
		}
		return itemRun{status: StatusRemoved}
	case err != nil:
		return b.retry(writeCtx, tc, claim, now, fmt.Errorf("bridge: %s: read watchlist: %w", name, err))
	}
	policy, err := b.tiers().Lookup(we.Tier)
	if err != nil {
		return b.retry(writeCtx, tc, claim, now, fmt.Errorf("bridge: %s: %w", name, err))
	}
	res, err := runPipeline(ctx, b.Pipeline, tc, we)
	if err != nil {
		return b.retry(writeCtx, tc, claim, now, fmt.Errorf("bridge: %s: pipeline: %w", name, err))
	}
	hit := res.FoundNew()
	base := claim.Entry
	base.Tier = we.Tier
	next := duework.Advance(base, policy, hit, now)
	if err := b.Index.Complete(writeCtx, tc, claim, next); err != nil {
		st := StatusError
		if errors.Is(err, duework.ErrClaimLost) {
			st = StatusLostClaim
		}
		return itemRun{status: st, result: &res, err: fmt.Errorf("bridge: %s: complete: %w", name, err)}
	}
	st := StatusMiss
	if hit {
		st = StatusHit
	}
	return itemRun{status: st, result: &res, next: next}
}

// retry reschedules the claimed entry at now + RetryDelay, streak unchanged, and returns
// cause (joined with the write's own error if that failed too).
func (b *Bridge) retry(ctx context.Context, tc tenancy.Context, c duework.Claim, now time.Time, cause error) itemRun {
	next := c.Entry
	next.DueAt = now.Add(b.retryDelay())
	if err := b.Index.Complete(ctx, tc, c, next); err != nil {
		return itemRun{status: StatusError, err: errors.Join(cause,
			fmt.Errorf("bridge: user %q entry %q: reschedule for retry: %w", c.Entry.UserID, c.Entry.WorkKey, err))}
	}
	return itemRun{status: StatusError, next: next, err: cause}
}

func runPipeline(ctx context.Context, p Pipeline, tc tenancy.Context, we tenancy.WatchlistEntry) (res Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: %v\n%s", ErrPipelinePanic, v, debug.Stack())
		}
	}()
	return p.Run(ctx, tc, we)
}
