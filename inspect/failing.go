package inspect

import (
	"cmp"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
)

// alarmFailing is the kind of alarm a failing source raises, as the JSON names it.
const alarmFailing = "failing_source"

// minForget is the least time past a failing source's next due time that the Inspector
// keeps listing it without a later report (see failingRecord.forgetAt).
const minForget = time.Minute

// sourceKey names one source: a tenant's entry.
type sourceKey struct{ userID, workKey string }

// failingRecord is one source whose written ErrorStreak reached the alarm threshold, as
// the latest Runner report that wrote it left it.
type failingRecord struct {
	lane            dispatch.Lane
	userID, workKey string
	streak          int
	since           time.Time // the cycle that first saw it at or over the threshold
	lastRun         time.Time // the end of its last run (Next.LastRunAt)
	nextDue         time.Time // when it comes due again (Next.DueAt)
	err             string    // its last error, withheld: what failed and the cycle's reference
}

// forgetAt is when the Inspector stops listing r if no report told it of r's next run: a
// whole retry interval (at least minForget) after r's next due time. By then another
// process has run it — a Runner on another replica, which this Inspector does not hear
// from — or the host has unscheduled it.
func (r failingRecord) forgetAt() time.Time {
	return r.nextDue.Add(max(r.nextDue.Sub(r.lastRun), minForget))
}

// failingStreak reports whether an ErrorStreak makes a source failing.
func (i *Inspector) failingStreak(streak int) bool {
	return i.alarmErrs >= 0 && streak >= i.alarmErrs
}

// observeFailing applies the item reports of a Runner's cycle at now to the failing
// sources and the alarm log; ref is the log reference of the cycle's errors, which hold
// every failed item's. Only written outcomes count: a failed run whose written
// ErrorStreak reached the threshold raises its source (or updates it, keeping since),
// a pushed-back run of a failing source updates it, and a hit, a miss or a removal ends
// it — a hit or a miss after a failing streak is logged as recovered. Reports of
// overlapping cycles may arrive out of order: an event older than the source's last one
// is ignored. i.mu is held.
func (i *Inspector) observeFailing(now time.Time, items []bridge.ItemReport, ref string) {
	if i.alarmErrs < 0 {
		return
	}
	for _, it := range items {
		if !it.Written {
			continue
		}
		prev := it.Item.Claim.Entry
		k := sourceKey{prev.UserID, prev.WorkKey}
		old, raised := i.failing.on[k]
		switch it.Status {
		case bridge.StatusError:
			if !i.failingStreak(it.Next.ErrorStreak) {
				continue
			}
			rec := failingRecord{lane: it.Item.Lane, userID: k.userID, workKey: k.workKey, streak: it.Next.ErrorStreak,
				since: now, lastRun: it.Next.LastRunAt, nextDue: it.Next.DueAt}
			if ref != "" {
				rec.err = refText("the source's last run", ref)
			}
			if raised {
				rec.since = old.since
			}
			i.raiseFailing(k, now, rec, !raised)
		case bridge.StatusPaused:
			if raised {
				old.lastRun, old.nextDue = it.Next.LastRunAt, it.Next.DueAt
				i.raiseFailing(k, now, old, false)
			}
		case bridge.StatusHit, bridge.StatusMiss, bridge.StatusRemoved:
			if !raised && !i.failingStreak(prev.ErrorStreak) {
				continue
			}
			if !i.failing.accept(k, now) {
				continue
			}
			delete(i.failing.on, k)
			if it.Status != bridge.StatusRemoved {
				i.alarmLog.push(alarmEvent{at: now, kind: alarmFailing, lane: it.Item.Lane, userID: k.userID, workKey: k.workKey})
			}
		}
	}
	i.pruneFailing(now)
}

// raiseFailing records rec as k's failing source at now, unless an event of a later cycle
// came first, and logs the raise when it is new. i.mu is held.
func (i *Inspector) raiseFailing(k sourceKey, now time.Time, rec failingRecord, isNew bool) {
	if !i.failing.accept(k, now) {
		return
	}
	i.failing.on[k] = rec
	if at := rec.forgetAt(); i.failExpiry.IsZero() || at.Before(i.failExpiry) {
		i.failExpiry = at
	}
	if isNew {
		i.alarmLog.push(alarmEvent{at: now, kind: alarmFailing, raised: true, lane: rec.lane, userID: rec.userID,
			workKey: rec.workKey, streak: rec.streak})
	}
}

// pruneFailing forgets the failing sources whose forgetAt has passed at now. It reads
// them all only when the earliest forgetAt has passed, so a cycle costs it nothing
// otherwise. i.mu is held.
func (i *Inspector) pruneFailing(now time.Time) {
	if i.failExpiry.IsZero() || !now.After(i.failExpiry) {
		return
	}
	i.failExpiry = time.Time{}
	for k, r := range i.failing.on {
		at := r.forgetAt()
		switch {
		case now.After(at):
			delete(i.failing.on, k)
		case i.failExpiry.IsZero() || at.Before(i.failExpiry):
			i.failExpiry = at
		}
	}
}

// failingOf is the JSON of the failing sources still listed at now, oldest since first.
func failingOf(rs []failingRecord, now time.Time) []failingJSON {
	out := make([]failingJSON, 0, len(rs))
	for _, r := range rs {
		if now.After(r.forgetAt()) {
			continue
		}
		out = append(out, failingJSON{Lane: string(r.lane), UserID: r.userID, WorkKey: r.workKey, ErrorStreak: r.streak,
			Since: utc(r.since), LastRunAt: utc(r.lastRun), NextDue: utc(r.nextDue), Error: r.err})
	}
	return out
}

// failingOrder orders failing sources oldest since first, then by tenant and work key.
func failingOrder(a, b failingRecord) int {
	return cmp.Or(a.since.Compare(b.since), cmp.Compare(a.userID, b.userID), cmp.Compare(a.workKey, b.workKey))
}
