package bridge

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// ErrPipelinePanic is returned by RunDueItem when the pipeline panicked. The panic is
// recovered, so that one bad source cannot take down the other items of a cycle, and the
// entry is retried like after any other pipeline error. The wrapping error holds the
// panic value and the stack.
var ErrPipelinePanic = errors.New("bridge: pipeline panicked")

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
	// StatusLostClaim: the item's claim was not the entry's current one — it ran past its
	// claim and was dispatched again, the host rescheduled the entry, or the item was
	// never claimed — so nothing was written.
	StatusLostClaim
	// StatusReleased: the item was not started because the context of Run or Cycle ended
	// first; its claim was handed back with the entry unchanged, so it is due at once.
	StatusReleased
	// StatusLate: the item was not started because its claim ended, or was about to,
	// before a worker was free; its claim was handed back like a released one. Late
	// items mean too few Workers for the batch and ClaimFor.
	StatusLate
)

var statusNames = [...]string{"error", "hit", "miss", "removed", "lost_claim", "released", "late"}

// String returns the status in lower case: "hit", "miss", "lost_claim", ...
func (s ItemStatus) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("ItemStatus(%d)", int(s))
}

// itemRun is what running one item decided. When write is set, completing the claim with
// next is still to be done, and written applies its outcome.
type itemRun struct {
	status ItemStatus
	result *Result
	tc     tenancy.Context
	next   duework.Entry
	write  bool
	err    error
}

// RunDueItem runs one dispatched item: it checks the claim, resolves the watchlist entry,
// runs the pipeline, advances the cadence with the entry's own tier from now (the time
// the run ended) and completes the claim. It returns the pipeline's result, with an
// error if anything failed.
//
// A removed watchlist entry unschedules the due work and returns (nil, nil). A failed
// run — a pipeline error or panic, an unknown tier, a failing watchlist — reschedules the
// entry at now + RetryDelay with its streak unchanged. A claim that is not the entry's
// current one runs and writes nothing and returns duework.ErrClaimLost. With a
// duework.ClaimGuard the claim is checked exactly; without one, RunDueItem can only check
// that the entry is still the one claimed. Writes ignore ctx's cancellation.
func (b *Bridge) RunDueItem(ctx context.Context, item dispatch.Item, now time.Time) (*Result, error) {
	ir := b.run(ctx, item, now)
	if ir.write {
		ir = ir.written(item.Claim, b.Index.Complete(context.WithoutCancel(ctx), ir.tc, item.Claim, ir.next))
	}
	return ir.result, ir.err
}

// written applies the outcome of completing c with ir.next.
func (ir itemRun) written(c duework.Claim, err error) itemRun {
	ir.write = false
	if err == nil {
		return ir
	}
	ir.next = duework.Entry{}
	err = fmt.Errorf("bridge: %s: complete: %w", itemName(c), err)
	switch {
	case ir.status == StatusError:
		ir.err = errors.Join(ir.err, err)
	case errors.Is(err, duework.ErrClaimLost):
		ir.status, ir.err = StatusLostClaim, err
	default:
		ir.status, ir.err = StatusError, err
	}
	return ir
}

func itemName(c duework.Claim) string {
	return fmt.Sprintf("user %q entry %q", c.Entry.UserID, c.Entry.WorkKey)
}

// run does everything RunDueItem does but the final write: it checks the item's claim and
// reads its watchlist entry before it runs anything.
func (b *Bridge) run(ctx context.Context, item dispatch.Item, now time.Time) itemRun {
	if err := b.check(true); err != nil {
		return itemRun{status: StatusError, err: err}
	}
	tc, ir, ok := b.begin(item)
	if !ok {
		return ir
	}
	c := item.Claim
	if err := b.checkClaim(ctx, tc, c); errors.Is(err, duework.ErrClaimLost) {
		return itemRun{status: StatusLostClaim, tc: tc, err: fmt.Errorf("bridge: %s: %w", itemName(c), err)}
	} else if err != nil {
		return b.retry(tc, c, now, fmt.Errorf("bridge: %s: check claim: %w", itemName(c), err))
	}
	we, err := b.Watchlist.Get(ctx, tc, c.Entry.WorkKey)
	return b.runEntry(ctx, tc, c, now, we, err, true)
}

// runClaimed is run for an item the Runner's own dispatcher has just claimed, so its
// claim is not checked: the item cannot be forged, and a claim lost since is found when
// the item is completed, which writes nothing then. read, when not nil, is the item's
// watchlist entry as read with the rest of its cycle; otherwise it is read here.
func (b *Bridge) runClaimed(ctx context.Context, item dispatch.Item, now time.Time, read *watchRead) itemRun {
	tc, ir, ok := b.begin(item)
	if !ok {
		return ir
	}
	c := item.Claim
	if read == nil {
		we, err := b.Watchlist.Get(ctx, tc, c.Entry.WorkKey)
		read = &watchRead{entry: we, err: err}
	}
	return b.runEntry(ctx, tc, c, now, read.entry, read.err, false)
}

// begin returns the tenant of item, or ok false and the item's failure. The Bridge has been
// checked: by RunDueItem for its item, by NewRunner once for all of a Runner's.
func (b *Bridge) begin(item dispatch.Item) (tc tenancy.Context, ir itemRun, ok bool) {
	c := item.Claim
	tc, err := tenancy.NewContext(c.Entry.UserID)
	if err != nil {
		// Such an entry cannot be in an Index; there is nothing to write back under.
		return tc, itemRun{status: StatusError, err: fmt.Errorf("bridge: %s: %w", itemName(c), err)}, false
	}
	return tc, itemRun{}, true
}

// runEntry runs claim c with we, its watchlist entry as read (readErr the read's error),
// up to the final write. checked says whether c was checked to be the entry's current
// claim.
func (b *Bridge) runEntry(ctx context.Context, tc tenancy.Context, c duework.Claim, now time.Time, we tenancy.WatchlistEntry, readErr error, checked bool) itemRun {
	switch {
	case errors.Is(readErr, tenancy.ErrNotFound):
		return b.remove(context.WithoutCancel(ctx), tc, c, now, checked)
	case readErr != nil:
		return b.retry(tc, c, now, fmt.Errorf("bridge: %s: read watchlist: %w", itemName(c), readErr))
	}
	policy, err := b.tiers().Lookup(we.Tier)
	if err != nil {
		return b.retry(tc, c, now, fmt.Errorf("bridge: %s: %w", itemName(c), err))
	}
	res, err := runPipeline(ctx, b.Pipeline, tc, we)
	if err != nil {
		return b.retry(tc, c, now, fmt.Errorf("bridge: %s: pipeline: %w", itemName(c), err))
	}
	hit := res.FoundNew()
	st := StatusMiss
	if hit {
		st = StatusHit
	}
	base := c.Entry
	base.Tier = we.Tier
	return itemRun{status: st, result: &res, tc: tc, next: duework.Advance(base, policy, hit, now), write: true}
}

// checkClaim returns an error wrapping duework.ErrClaimLost unless c is the current claim
// of its entry. Without a ClaimGuard it can only check that the entry is the one claimed.
func (b *Bridge) checkClaim(ctx context.Context, tc tenancy.Context, c duework.Claim) error {
	if g, ok := b.Index.(duework.ClaimGuard); ok {
		return g.CheckClaim(ctx, tc, c)
	}
	e, err := b.Index.Get(ctx, tc, c.Entry.WorkKey)
	switch {
	case errors.Is(err, duework.ErrNotFound):
		return fmt.Errorf("%w: the entry is gone", duework.ErrClaimLost)
	case err != nil:
		return err
	case !sameEntry(e, c.Entry):
		return fmt.Errorf("%w: the entry changed since it was claimed", duework.ErrClaimLost)
	}
	return nil
}

func sameEntry(a, b duework.Entry) bool {
	return a.UserID == b.UserID && a.WorkKey == b.WorkKey && a.Tier == b.Tier && a.MissStreak == b.MissStreak &&
		a.DueAt.Equal(b.DueAt) && a.LastRunAt.Equal(b.LastRunAt)
}

// retry is the item's failure with cause: the entry is rescheduled at now + RetryDelay,
// streak unchanged, when the claim is completed.
func (b *Bridge) retry(tc tenancy.Context, c duework.Claim, now time.Time, cause error) itemRun {
	next := c.Entry
	next.DueAt = now.Add(b.retryDelay())
	return itemRun{status: StatusError, tc: tc, next: next, write: true, err: cause}
}

// remove unschedules the claimed entry of a source no longer watched, only under claim c:
// with a ClaimGuard in one call, without one after checking the entry is still the one
// claimed, unless checked says that was just done. Should the source be watched again by
// then — its SyncWatchlist found the entry still scheduled and added nothing — it
// schedules it anew, as SyncWatchlist would have.
func (b *Bridge) remove(ctx context.Context, tc tenancy.Context, c duework.Claim, now time.Time, checked bool) itemRun {
	key := c.Entry.WorkKey
	var err error
	switch g, ok := b.Index.(duework.ClaimGuard); {
	case ok:
		err = g.UnscheduleClaimed(ctx, tc, c)
	case !checked:
		if err = b.checkClaim(ctx, tc, c); err == nil {
			err = b.Index.Unschedule(ctx, tc, key)
		}
	default:
		err = b.Index.Unschedule(ctx, tc, key)
	}
	switch {
	case errors.Is(err, duework.ErrClaimLost):
		return itemRun{status: StatusLostClaim, tc: tc, err: fmt.Errorf("bridge: %s: unschedule: %w", itemName(c), err)}
	case err != nil:
		return b.retry(tc, c, now, fmt.Errorf("bridge: %s: unschedule: %w", itemName(c), err))
	}
	we, err := b.Watchlist.Get(ctx, tc, key)
	if errors.Is(err, tenancy.ErrNotFound) {
		return itemRun{status: StatusRemoved, tc: tc}
	}
	var e duework.Entry
	if err == nil {
		e, err = b.newEntry(tc, we, now)
	}
	added := 0
	if err == nil {
		added, err = b.scheduleMissing(ctx, tc, []duework.Entry{e})
	}
	if err != nil {
		return itemRun{status: StatusError, tc: tc, err: fmt.Errorf("bridge: %s: unscheduled, then watched again: %w", itemName(c), err)}
	}
	ir := itemRun{status: StatusRemoved, tc: tc}
	if added == 1 {
		ir.next = e
	}
	return ir
}

func runPipeline(ctx context.Context, p Pipeline, tc tenancy.Context, we tenancy.WatchlistEntry) (res Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: %v\n%s", ErrPipelinePanic, v, debug.Stack())
		}
	}()
	return p.Run(ctx, tc, we)
}
