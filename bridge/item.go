package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/clock"
	"github.com/rotaworks/rota/tenancy"
)

// ErrPipelinePanic is returned, wrapped, for an item whose pipeline panicked. The panic
// is recovered, so that one bad source cannot take down the other items, and the entry is
// retried like after any other pipeline error. The wrapping error holds the panic value
// and the stack.
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
	// never claimed — so nothing was run or written.
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
	// StatusDuplicate: the item was not run because another copy of it had started its
	// claim already (duework.ErrClaimStarted) — a queue's redelivery or duplicate. It is
	// done with: nothing is written, and its message is acknowledged.
	StatusDuplicate
	// StatusPaused: the pipeline returned a [Pushback]: the tenant is paused until the
	// run's end plus Pushback.After, and the entry comes due then, its streaks unchanged.
	StatusPaused
)

var statusNames = [...]string{"error", "hit", "miss", "removed", "lost_claim", "released", "late", "duplicate", "paused"}

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
	writeComplete           // Index.CompleteMany with next
	writeUnclaim            // Index.Unclaim: the item was not started
)

// itemRun is what running one item decided, and then how its write went.
type itemRun struct {
	status  ItemStatus
	result  *Result
	next    duework.Entry
	write   writeKind // still to be done
	written bool      // the item's outcome is in the index
	err     error
	overrun time.Duration // how long the pipeline ran past the claim's end
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

// watchRead is an item's watchlist entry as read, or the read's error.
type watchRead struct {
	entry tenancy.WatchlistEntry
	err   error
}

// RunDueItem runs one dispatched item, taking now as its start on the item's time line
// (the dispatcher's), and returns the pipeline's result, with an error if anything
// failed. It is a [Worker] of one item with the default WorkerConfig: the claim rule with
// DefaultClaimMargin (an item whose claim ends within it is handed back unrun, with an
// error wrapping [ErrClaimEnded]; the pipeline's context ends that long before the claim
// does, measured on the real clock), the claim started with Index.StartClaims before
// anything runs, the watchlist entry read, the cadence advanced with the entry's own tier
// from the time the run ended (now plus the time the call took), and the claim completed.
// Writes ignore ctx's cancellation. A host that wants another margin, or runs many
// items, uses a Worker.
//
// A removed watchlist entry unschedules the due work and returns (nil, nil). A failed
// run — a pipeline error or panic, an unknown tier, a failing watchlist — reschedules the
// entry after the Bridge's Retry policy. A claim that is not the entry's current one runs
// and writes nothing and returns an error wrapping duework.ErrClaimLost; a copy of an
// item whose claim another copy already started runs nothing and returns one wrapping
// duework.ErrClaimStarted.
func (b *Bridge) RunDueItem(ctx context.Context, item dispatch.Item, now time.Time) (*Result, error) {
	if err := b.check(true); err != nil {
		return nil, err
	}
	w := newWorker(b, WorkerConfig{Workers: 1, FlushItems: 1}.withDefaults())
	w.drops = nil // the error it returns says why an item did not run
	rep := w.Do(ctx, item, now)
	w.close()
	return rep.Result, rep.Err
}

func itemName(c duework.Claim) string {
	return fmt.Sprintf("user %q entry %q", c.Entry.UserID, c.Entry.WorkKey)
}

// runStarted runs j, whose claim is started and whose watchlist entry has been read, up
// to its final write. It sets j.ir.
func (w *Worker) runStarted(j *job) {
	if j.read.err == nil {
		w.runEntry(j)
		return
	}
	w.unread(j)
}

// unread sets the outcome of j, whose watchlist entry could not be read: removed when the
// entry is gone, retried otherwise.
func (w *Worker) unread(j *job) {
	if err := j.read.err; !errors.Is(err, tenancy.ErrNotFound) {
		j.ir = w.retry(j, fmt.Errorf("bridge: %s: read watchlist: %w", itemName(j.item.Claim), err))
		return
	}
	j.ir = w.remove(context.WithoutCancel(j.run), j)
}

// late sets the outcome of an item the claim rule does not let start: left (≤ 0) is how
// long its claim had left beyond the margin. An item whose claim is started already is
// handed back by completing it unchanged, since Unclaim refuses a started claim.
func (j *job) late(left time.Duration, started bool) {
	err := fmt.Errorf("bridge: %s: not started, %v past the claim's end less the margin: %w", itemName(j.item.Claim), -left, ErrClaimEnded)
	if started {
		j.ir = itemRun{status: StatusLate, next: j.item.Claim.Entry, write: writeComplete, err: err}
		return
	}
	j.ir = itemRun{status: StatusLate, write: writeUnclaim, err: err}
}

// runEntry runs j's item with its watchlist entry, j.read.entry, up to the final write. It
// sets j.ir.
func (w *Worker) runEntry(j *job) {
	policy, err := w.b.tiers().Lookup(j.read.entry.Tier)
	if err != nil {
		w.unknownTier(j, err)
		return
	}
	if left := claimLeft(j.item.Claim, j.span.current(), j.margin); left <= 0 {
		j.late(left, true)
		return
	}
	if err := w.pausedHere(j); err != nil {
		j.pausedMeanwhile(err)
		return
	}
	res, overrun, err := w.callPipeline(j)
	w.ran(j, policy, res, overrun, err)
}

// unknownTier sets the outcome of j, whose watchlist entry names a tier the Bridge does
// not know (err): retried.
func (w *Worker) unknownTier(j *job, err error) {
	j.ir = w.retry(j, fmt.Errorf("bridge: %s: %w", itemName(j.item.Claim), err))
}

// pausedMeanwhile sets the outcome of j, whose claim is started, when its tenant was
// paused on this Worker meanwhile: it is handed back by completing it unchanged.
func (j *job) pausedMeanwhile(err error) {
	c := j.item.Claim
	j.ir = itemRun{status: StatusReleased, next: c.Entry, write: writeComplete, err: fmt.Errorf("bridge: %s: not started: %w", itemName(c), err)}
}

// callPipeline runs j's pipeline with its watchlist entry, under a context that ends with
// the claim rule (ErrClaimEnded), and returns its result, how long it ran past the claim's
// end, and its error.
func (w *Worker) callPipeline(j *job) (Result, time.Duration, error) {
	c := &j.item.Claim
	pctx, cancel := clock.ContextAt(j.run, j.span.clock, j.span.clockAt(c.Until.Add(-j.margin)), ErrClaimEnded)
	stopWatch := w.watchOverrun(j)
	res, err := runPipeline(pctx, w.b.Pipeline, j.tc, j.read.entry)
	if err != nil {
		if cause := context.Cause(pctx); pctx.Err() != nil && !errors.Is(err, cause) {
			err = fmt.Errorf("%w (%w)", err, cause)
		}
	}
	cancel()
	stopWatch()
	return res, w.overrun(j), err
}

// ran sets j.ir from its pipeline's outcome: the entry advanced by policy from the run's
// end, retried after an error, or paused by a Pushback.
func (w *Worker) ran(j *job, policy cadence.Policy, res Result, overrun time.Duration, err error) {
	if err != nil {
		var pb *Pushback
		if errors.As(err, &pb) && pb.valid() {
			j.ir = w.pushback(j, j.read.entry, pb)
		} else {
			j.ir = w.retry(j, fmt.Errorf("bridge: %s: pipeline: %w", itemName(j.item.Claim), err))
		}
		j.ir.overrun = overrun
		return
	}
	hit := res.FoundNew()
	st := StatusMiss
	if hit {
		st = StatusHit
	}
	base := j.item.Claim.Entry
	base.Tier = j.read.entry.Tier
	j.ir = itemRun{status: st, result: &res, next: duework.Advance(base, policy, hit, j.ended()), write: writeComplete, overrun: overrun}
}

// watchOverrun warns once, naming the tenant and the source, if j's pipeline still runs
// when its claim ends: it ignores its context, and may overlap the entry's next run
// elsewhere. Calling the returned function stops the watch; overrun then says how far
// past the claim's end the run went.
func (w *Worker) watchOverrun(j *job) (stop func() bool) {
	return j.span.clock.AfterFunc(j.span.clockAt(j.item.Claim.Until).Sub(j.span.clock.Now()), func() {
		w.warnOverrun(j, "rota: pipeline still running past its claim")
	})
}

// overrun returns how long past its claim's end j's pipeline ran (zero when it ended in
// time), warning with that figure when it did.
func (w *Worker) overrun(j *job) time.Duration {
	over := j.span.current().Sub(j.item.Claim.Until)
	if over <= 0 {
		return 0
	}
	w.warnOverrun(j, "rota: pipeline ran past its claim", slog.Duration("overrun", over))
	return over
}

// warnOverrun logs msg at warning level about j's claim, with more attributes.
func (w *Worker) warnOverrun(j *job, msg string, more ...slog.Attr) {
	c := j.item.Claim
	attrs := append([]slog.Attr{slog.String("user_id", c.Entry.UserID), slog.String("work_key", c.Entry.WorkKey), slog.Time("claim_until", c.Until)}, more...)
	w.cfg.Logger.LogAttrs(context.WithoutCancel(j.run), slog.LevelWarn, msg, attrs...)
}

// retry is the item's failure with cause: when the claim is completed, the entry comes
// due again after the Bridge's Retry policy, counted from the time the run ended, its
// ErrorStreak one more and its MissStreak unchanged (duework.Fail).
func (w *Worker) retry(j *job, cause error) itemRun {
	next := duework.Fail(j.item.Claim.Entry, w.b.retry(), j.ended())
	return itemRun{status: StatusError, next: next, write: writeComplete, err: cause}
}

// pushback pauses j's tenant for pb: first on this Worker, so none of the tenant's items
// that wait for a worker here starts after it, then in the index, so no dispatcher claims
// its entries before the pause ends; and it completes the entry, due when the pause ends,
// its streaks unchanged. A pause the index refuses is reported with the item; the entry is
// still moved to the pause's end.
func (w *Worker) pushback(j *job, we tenancy.WatchlistEntry, pb *Pushback) itemRun {
	c := j.item.Claim
	end := j.ended()
	until := end.Add(pb.After)
	w.pauseHere(j.tc.UserID(), end, until)
	ctx := context.WithoutCancel(j.run)
	err := w.b.Index.Pause(ctx, j.tc, until, pb.Reason)
	attrs := []slog.Attr{slog.String("user_id", j.tc.UserID()), slog.String("work_key", c.Entry.WorkKey),
		slog.Time("until", until), slog.String("reason", pb.Reason), slog.Any("error", pb.Err)}
	ir := itemRun{status: StatusPaused, err: fmt.Errorf("bridge: %s: %w", itemName(c), pb)}
	if err != nil {
		ir.err = errors.Join(ir.err, fmt.Errorf("bridge: %s: pause: %w", itemName(c), err))
		attrs = append(attrs, slog.Any("pause_error", err))
	}
	w.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "rota: tenant paused", attrs...)
	ir.next = c.Entry
	ir.next.Tier, ir.next.DueAt, ir.next.LastRunAt = we.Tier, until, end
	ir.write = writeComplete
	return ir
}

// remove unschedules the claimed entry of a source no longer watched, only under its
// claim (Index.UnscheduleClaimed). Should the source be watched again by then — its
// SyncWatchlist found the entry still scheduled and added nothing — it schedules it anew,
// as SyncWatchlist would have.
func (w *Worker) remove(ctx context.Context, j *job) itemRun {
	tc, c := j.tc, j.item.Claim
	key := c.Entry.WorkKey
	err := w.b.Index.UnscheduleClaimed(ctx, tc, c)
	switch {
	case errors.Is(err, duework.ErrClaimLost):
		return itemRun{status: StatusLostClaim, err: fmt.Errorf("bridge: %s: unschedule: %w", itemName(c), err)}
	case err != nil:
		return w.retry(j, fmt.Errorf("bridge: %s: unschedule: %w", itemName(c), err))
	}
	ir := itemRun{status: StatusRemoved, written: true}
	we, err := w.b.Watchlist.Get(ctx, tc, key)
	if errors.Is(err, tenancy.ErrNotFound) {
		return ir
	}
	var e duework.Entry
	if err == nil {
		e, err = w.b.newEntry(tc, we, j.ended())
	}
	added := 0
	if err == nil {
		added, err = w.b.scheduleMissing(ctx, tc, []duework.Entry{e})
	}
	if err != nil {
		return itemRun{status: StatusError, written: true, err: fmt.Errorf("bridge: %s: unscheduled, then watched again: %w", itemName(c), err)}
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
