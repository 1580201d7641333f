package bridge

import (
	"errors"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
)

// CycleReport is what one cycle did. Counts are of items; lists are in dispatch order.
type CycleReport struct {
	// Now is the cycle's time.
	Now time.Time
	// Dispatched is the number of items the dispatch handed out.
	Dispatched int
	// Hits, Misses and Removed count the items that ended so (see ItemStatus).
	Hits, Misses, Removed int
	// Errors counts the items that failed (StatusError); their errors are in Items.
	Errors int
	// LostClaims counts items whose claim was gone when they ran or completed; nothing
	// of theirs was written. Claims lost to another dispatcher at dispatch time are in
	// Lanes instead.
	LostClaims int
	// Released counts items handed back unstarted because ctx ended or their tenant was
	// paused, Late those handed back because their claim ended, or was about to, before a
	// worker was free.
	Released, Late int
	// Duplicates counts items not run because another copy had started their claim
	// (StatusDuplicate), Paused the runs that paused their tenant (StatusPaused).
	Duplicates, Paused int
	// Shed names the users who had due work this cycle and did not get all of it
	// dispatched; their work stays due.
	Shed []string
	// Unrouted lists the users whose lane could not be resolved; their work stays due.
	Unrouted []dispatch.Unrouted
	// Lanes reports each lane of the dispatch.
	Lanes []dispatch.LaneReport
	// Items reports every dispatched item, in dispatch order.
	Items []ItemReport
	// DispatchErr is the dispatch's error, if it failed.
	DispatchErr error
	// FlushErrs are the failed Index.CompleteMany calls that carried this cycle's
	// completions. Each was tried once more; the items say how that ended.
	FlushErrs []error
	// Alarms are the noisy-neighbour alarms this cycle raised, and Recovered the lanes
	// whose alarm ended in it (see WaitAlarm).
	Alarms    []WaitAlarm
	Recovered []dispatch.Lane
	// LateAlarms are the tenants whose work this cycle found later than AlarmAfter for
	// the first time in their episode, and LateRecovered the tenants whose episode ended
	// in it (see LateAlarm).
	LateAlarms    []LateAlarm
	LateRecovered []string
	// Starved is set in the cycle that finds the Runner has dispatched nothing for
	// three cycles while due work was kept from it (see Starvation), and
	// StarvationEnded in the first cycle after that which dispatched or found no due work
	// kept from it.
	Starved         *Starvation
	StarvationEnded bool
	// ProbeErr is the error of the read that looks, after cycles that dispatched
	// nothing, for due work kept from this Runner (see Starvation).
	ProbeErr error
	// DispatchDuration is how long the dispatch took and Duration how long the whole
	// cycle took, dispatch to the last completion, both on the Runner's Clock.
	DispatchDuration, Duration time.Duration
}

// ItemReport is how one dispatched item ended, as Worker.Do returns it and CycleReport
// lists it.
type ItemReport struct {
	Item   dispatch.Item
	Status ItemStatus
	// Result is the pipeline's result, for StatusHit and StatusMiss; nil otherwise.
	Result *Result
	// Next is the due-work entry as written back (for a hand-back, the entry as it
	// stays); zero when nothing was written or the entry was removed.
	Next duework.Entry
	// Err is the item's error: why it failed (StatusError), lost its claim
	// (StatusLostClaim), was not started (StatusLate wraps ErrClaimEnded, StatusReleased
	// the cause, StatusDuplicate duework.ErrClaimStarted) or paused its tenant
	// (StatusPaused wraps the *Pushback).
	Err error
	// Written is true when the item's outcome is in the index: its completion, its
	// removal or its hand-back. When false, the item's claim was no longer current or the
	// write failed; the entry stays claimed until its claim ends, and is never lost.
	Written bool
	// Overrun is how long the pipeline ran past the item's claim, ignoring its context:
	// zero when it ended in time. A run that overruns may overlap the entry's next run
	// elsewhere; a Warn line names it too.
	Overrun time.Duration
}

// Err returns the cycle's failures joined: the dispatch error, the probe's, the failed
// flushes and every failed item's error. Lost claims are not failures (the entry was handled
// elsewhere) and are left out; they are in Items.
func (r CycleReport) Err() error {
	errs := append([]error{r.DispatchErr, r.ProbeErr}, r.FlushErrs...)
	for _, it := range r.Items {
		if it.Status == StatusError && !r.isFlushErr(it.Err) {
			errs = append(errs, it.Err)
		}
	}
	return errors.Join(errs...)
}

// isFlushErr reports whether err is one of r.FlushErrs itself: the item failed only
// because its completion could not be written, which is reported once, in FlushErrs.
func (r CycleReport) isFlushErr(err error) bool {
	for _, f := range r.FlushErrs {
		if err == f {
			return true
		}
	}
	return false
}
