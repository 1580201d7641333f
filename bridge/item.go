package bridge

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/clock"
	"github.com/rotaworks/rota/tenancy"
)

// ErrPipelinePanic is returned by RunDueItem when the pipeline panicked. The panic is
// recovered, so that one bad source cannot take down the other items of a cycle, and the
// entry is retried like after any other pipeline error. The wrapping error holds the
// panic value and the stack.
var ErrPipelinePanic = errors.New("bridge: pipeline panicked")

// ErrClaimEnded is returned, wrapped, for an item that was not started because its claim
// had ended or would end within the claim margin ([StatusLate]), and is the cause (see
// context.Cause) of a running item's context when its claim is about to end: past it, the
// entry may be dispatched again elsewhere.
var ErrClaimEnded = errors.New("bridge: the item's claim is ending")

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
	// StatusReleased: the item was not started because the context it was given ended
	// first, or the Worker was stopped; its claim was handed back (Index.Unclaim), so the
	// entry is due at once, otherwise unchanged.
	StatusReleased
	// StatusLate: the item was not started because its claim had ended, or would end
	// within the claim margin, when it could start; its claim was handed back like a
	// released one. Late items mean too few workers for the batch and ClaimFor, or items
	// that sat in a queue too long.
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

// writeKind is the write an item still needs.
type writeKind uint8

const (
	writeNone     writeKind = iota
	writeComplete           // Index.Complete with next
	writeUnclaim            // Index.Unclaim: the item was not run
)

// itemRun is what running one item decided, and then how its write went.
type itemRun struct {
	status  ItemStatus
	result  *Result
	tc      tenancy.Context
	next    duework.Entry
	write   writeKind // still to be done
	written bool      // the item's outcome is in the index
	err     error
}

// span ties an item's time line — the now it was given, in the dispatcher's time — to a
// Clock: the instant of the item's line that the clock's reading at stands for.
type span struct {
	now   time.Time
	at    time.Time
	clock Clock
}

// current is the item's time now.
func (s span) current() time.Time { return s.now.Add(s.clock.Now().Sub(s.at)) }

// clockAt is the clock's reading at the item's instant t.
func (s span) clockAt(t time.Time) time.Time { return s.at.Add(t.Sub(s.now)) }

// claimLeft is the claim rule, the one place it is written: an item claimed by c may
// start at the instant now of its time line only while now is before c.Until − margin,
// and its pipeline's context ends at that instant. It returns how long that is from now;
// the item must not start unless it is positive.
func claimLeft(c duework.Claim, now time.Time, margin time.Duration) time.Duration {
	return c.Until.Add(-margin).Sub(now)
}

// attempt is one item on its way through the machinery RunDueItem, Worker and Runner
// share. checked says the claim was checked already (or need not be: a Runner's own
// items), with checkErr the outcome; read, when not nil, is the watchlist entry as read.
// fromStart makes the entry advance from the item's given now, as a Runner's cycle does,
// instead of from the time the run ended.
type attempt struct {
	item      dispatch.Item
	tc        tenancy.Context
	span      span
	margin    time.Duration
	checked   bool
	checkErr  error
	read      *watchRead
	fromStart bool
}

// ended is the instant of the item's time line its entry advances from.
func (a *attempt) ended() time.Time {
	if a.fromStart {
		return a.span.now
	}
	return a.span.current()
}

// watchRead is an item's watchlist entry as read, or the read's error.
type watchRead struct {
	entry tenancy.WatchlistEntry
	err   error
}

// RunDueItem runs one dispatched item, taking now as its start on the item's time line
// (the dispatcher's): it checks the claim's time, checks the claim itself with
// Index.CheckClaim, resolves the watchlist entry, runs the pipeline, advances the cadence
// with the entry's own tier from the time the run ended (now plus the time the call took)
// and completes the claim. It returns the pipeline's result, with an error if anything
// failed. Writes ignore ctx's cancellation.
//
// Claims end on time: when !now.Before(item.Claim.Until − margin), the margin being
// Bridge.ClaimMargin, it runs nothing, hands the claim back with Index.Unclaim (the entry
// is due at once, otherwise unchanged) and returns an error wrapping [ErrClaimEnded].
// Otherwise the pipeline's context ends Until − margin − now after the call, measured on
// the real clock, with ErrClaimEnded as its cause.
//
// A removed watchlist entry unschedules the due work and returns (nil, nil). A failed
// run — a pipeline error or panic, an unknown tier, a failing watchlist — reschedules the
// entry RetryDelay after the run ended, its streak unchanged. A claim that is not the
// entry's current one runs and writes nothing and returns duework.ErrClaimLost.
func (b *Bridge) RunDueItem(ctx context.Context, item dispatch.Item, now time.Time) (*Result, error) {
	if err := b.check(true); err != nil {
		return nil, err
	}
	tc, ir, ok := begin(item)
	if ok {
		a := attempt{item: item, tc: tc, span: span{now: now, at: time.Now(), clock: clock.Real}, margin: b.claimMargin()}
		ir = b.execute(ctx, &a)
		c, wctx := item.Claim, context.WithoutCancel(ctx)
		switch ir.write {
		case writeComplete:
			ir = ir.completed(c, b.Index.Complete(wctx, tc, c, ir.next))
		case writeUnclaim:
			errs, err := b.Index.Unclaim(wctx, []duework.Unclaim{{Tenant: tc, Claim: c}})
			if err == nil && len(errs) == 1 {
				err = errs[0]
			}
			ir = ir.unclaimed(c, err)
		}
	}
	return ir.result, ir.err
}

// begin returns the tenant of item, or ok false and the item's failure: such an entry
// cannot be in an Index, and there is nothing to write back under.
func begin(item dispatch.Item) (tc tenancy.Context, ir itemRun, ok bool) {
	c := item.Claim
	tc, err := tenancy.NewContext(c.Entry.UserID)
	if err != nil {
		return tc, itemRun{status: StatusError, err: fmt.Errorf("bridge: %s: %w", itemName(c), err)}, false
	}
	return tc, itemRun{}, true
}

func itemName(c duework.Claim) string {
	return fmt.Sprintf("user %q entry %q", c.Entry.UserID, c.Entry.WorkKey)
}

// execute does everything RunDueItem does but the final write, under the claim rule: a
// late item is handed back before anything is read, the claim is checked and the
// watchlist entry read unless a checks them for many items at once, and the rule is
// applied once more right before the pipeline starts. ctx is the pipeline's parent.
func (b *Bridge) execute(ctx context.Context, a *attempt) itemRun {
	c := a.item.Claim
	if left := claimLeft(c, a.span.current(), a.margin); left <= 0 {
		return lateRun(a.tc, c, left)
	}
	if !a.checked {
		a.checked, a.checkErr = true, b.Index.CheckClaim(ctx, a.tc, c)
	}
	if errors.Is(a.checkErr, duework.ErrClaimLost) {
		return itemRun{status: StatusLostClaim, tc: a.tc, err: fmt.Errorf("bridge: %s: %w", itemName(c), a.checkErr)}
	} else if a.checkErr != nil {
		return b.retry(a, fmt.Errorf("bridge: %s: check claim: %w", itemName(c), a.checkErr))
	}
	if a.read == nil {
		we, err := b.Watchlist.Get(ctx, a.tc, c.Entry.WorkKey)
		a.read = &watchRead{entry: we, err: err}
	}
	switch we, err := a.read.entry, a.read.err; {
	case errors.Is(err, tenancy.ErrNotFound):
		return b.remove(context.WithoutCancel(ctx), a)
	case err != nil:
		return b.retry(a, fmt.Errorf("bridge: %s: read watchlist: %w", itemName(c), err))
	default:
		return b.runEntry(ctx, a, we)
	}
}

// lateRun is the outcome of an item the claim rule does not let start: left (≤ 0) is how
// long its claim had left beyond the margin.
func lateRun(tc tenancy.Context, c duework.Claim, left time.Duration) itemRun {
	err := fmt.Errorf("bridge: %s: not started, %v past the claim's end less the margin: %w", itemName(c), -left, ErrClaimEnded)
	return itemRun{status: StatusLate, tc: tc, write: writeUnclaim, err: err}
}

// runEntry runs a's item with we, its watchlist entry, up to the final write.
func (b *Bridge) runEntry(ctx context.Context, a *attempt, we tenancy.WatchlistEntry) itemRun {
	c := a.item.Claim
	policy, err := b.tiers().Lookup(we.Tier)
	if err != nil {
		return b.retry(a, fmt.Errorf("bridge: %s: %w", itemName(c), err))
	}
	left := claimLeft(c, a.span.current(), a.margin)
	if left <= 0 {
		return lateRun(a.tc, c, left)
	}
	pctx, cancel := clock.ContextAt(ctx, a.span.clock, a.span.clockAt(c.Until.Add(-a.margin)), ErrClaimEnded)
	res, err := runPipeline(pctx, b.Pipeline, a.tc, we)
	if cause := context.Cause(pctx); err != nil && pctx.Err() != nil && !errors.Is(err, cause) {
		err = fmt.Errorf("%w (%w)", err, cause)
	}
	cancel()
	if err != nil {
		return b.retry(a, fmt.Errorf("bridge: %s: pipeline: %w", itemName(c), err))
	}
	hit := res.FoundNew()
	st := StatusMiss
	if hit {
		st = StatusHit
	}
	base := c.Entry
	base.Tier = we.Tier
	return itemRun{status: st, result: &res, tc: a.tc, next: duework.Advance(base, policy, hit, a.ended()), write: writeComplete}
}

// retry is the item's failure with cause: the entry is rescheduled RetryDelay after the
// run ended, streak unchanged, when the claim is completed.
func (b *Bridge) retry(a *attempt, cause error) itemRun {
	next := a.item.Claim.Entry
	next.DueAt = a.ended().Add(b.retryDelay())
	return itemRun{status: StatusError, tc: a.tc, next: next, write: writeComplete, err: cause}
}

// remove unschedules the claimed entry of a source no longer watched, only under its
// claim (Index.UnscheduleClaimed). Should the source be watched again by then — its
// SyncWatchlist found the entry still scheduled and added nothing — it schedules it anew,
// as SyncWatchlist would have.
func (b *Bridge) remove(ctx context.Context, a *attempt) itemRun {
	tc, c := a.tc, a.item.Claim
	key := c.Entry.WorkKey
	err := b.Index.UnscheduleClaimed(ctx, tc, c)
	switch {
	case errors.Is(err, duework.ErrClaimLost):
		return itemRun{status: StatusLostClaim, tc: tc, err: fmt.Errorf("bridge: %s: unschedule: %w", itemName(c), err)}
	case err != nil:
		return b.retry(a, fmt.Errorf("bridge: %s: unschedule: %w", itemName(c), err))
	}
	ir := itemRun{status: StatusRemoved, tc: tc, written: true}
	we, err := b.Watchlist.Get(ctx, tc, key)
	if errors.Is(err, tenancy.ErrNotFound) {
		return ir
	}
	var e duework.Entry
	if err == nil {
		e, err = b.newEntry(tc, we, a.ended())
	}
	added := 0
	if err == nil {
		added, err = b.scheduleMissing(ctx, tc, []duework.Entry{e})
	}
	if err != nil {
		return itemRun{status: StatusError, tc: tc, written: true, err: fmt.Errorf("bridge: %s: unscheduled, then watched again: %w", itemName(c), err)}
	}
	if added == 1 {
		ir.next = e
	}
	return ir
}

// completed applies the outcome of completing c with ir.next.
func (ir itemRun) completed(c duework.Claim, err error) itemRun {
	ir.write = writeNone
	if err == nil {
		ir.written = true
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

// unclaimed applies the outcome of handing c back. A claim no longer current needs no
// hand-back: it ended, or another's claim replaced it.
func (ir itemRun) unclaimed(c duework.Claim, err error) itemRun {
	ir.write = writeNone
	switch {
	case err == nil:
		ir.written, ir.next = true, c.Entry
	case !errors.Is(err, duework.ErrClaimLost):
		ir.err = errors.Join(ir.err, fmt.Errorf("bridge: %s: hand back: %w", itemName(c), err))
	}
	return ir
}

func sameEntry(a, b duework.Entry) bool {
	return a.UserID == b.UserID && a.WorkKey == b.WorkKey && a.Tier == b.Tier && a.MissStreak == b.MissStreak &&
		a.DueAt.Equal(b.DueAt) && a.LastRunAt.Equal(b.LastRunAt)
}

func runPipeline(ctx context.Context, p Pipeline, tc tenancy.Context, we tenancy.WatchlistEntry) (res Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: %v\n%s", ErrPipelinePanic, v, debug.Stack())
		}
	}()
	return p.Run(ctx, tc, we)
}
