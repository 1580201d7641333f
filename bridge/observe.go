package bridge

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/rotaworks/rota/dispatch"
)

// maxCrowding is how many of a lane's users a noisy-neighbour alarm names as crowding it:
// those that got the most items in the lane in the alarm's cycle.
const maxCrowding = 3

// Observer is told about every cycle of a Runner whose RunnerConfig.Observer it is: a
// metrics exporter, a test's recorder, a host's own alarm. ObserveCycle is called once per
// cycle, after its last completion was written and its Info line logged, with the report
// Cycle returns. Cycles of Run overlap when items are slow, so an Observer must be safe
// for concurrent use; it must not modify the report's slices and must copy what it keeps.
type Observer interface {
	ObserveCycle(CycleReport)
}

// observerFunc adapts a function to an Observer.
type observerFunc func(CycleReport)

func (f observerFunc) ObserveCycle(rep CycleReport) { f(rep) }

// Observers returns an Observer that tells each of obs, in order, about every cycle. Nil
// Observers are skipped.
func Observers(obs ...Observer) Observer {
	list := slices.DeleteFunc(slices.Clone(obs), func(o Observer) bool { return o == nil })
	return observerFunc(func(rep CycleReport) {
		for _, o := range list {
			o.ObserveCycle(rep)
		}
	})
}

// WaitAlarm is a noisy-neighbour alarm: a lane kept a ready user waiting longer than
// RunnerConfig.AlarmAfter, measured from the lane's dispatch.LaneReport.WaitingSince to
// the cycle's now. A lane raises it once per episode; the episode ends in the first cycle
// whose wait is within the threshold again (CycleReport.Recovered). A failed dispatch
// neither raises nor ends one.
type WaitAlarm struct {
	Lane dispatch.Lane
	// Wait is how long the lane's longest-waiting ready user has waited.
	Wait time.Duration
	// Crowding are the lane's users with the most items this cycle, at most maxCrowding,
	// most first, then by UserID; empty when the lane dispatched nothing.
	Crowding []UserItems
}

// UserItems is a user and the number of items it was dispatched in a cycle.
type UserItems struct {
	UserID string
	Items  int
}

// alarmState holds the lanes whose alarm is raised.
type alarmState struct {
	mu sync.Mutex
	on map[dispatch.Lane]bool
}

// update raises and ends alarms for the dispatched batch b at now. Cycles are counted in
// the order their dispatches return.
func (a *alarmState) update(after time.Duration, now time.Time, b dispatch.Batch) (raised []WaitAlarm, recovered []dispatch.Lane) {
	if after < 0 {
		return nil, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, l := range b.Lanes {
		var wait time.Duration
		if !l.WaitingSince.IsZero() {
			wait = now.Sub(l.WaitingSince)
		}
		switch {
		case wait > after && !a.on[l.Lane]:
			if a.on == nil {
				a.on = map[dispatch.Lane]bool{}
			}
			a.on[l.Lane] = true
			raised = append(raised, WaitAlarm{Lane: l.Lane, Wait: wait, Crowding: crowding(b.Items, l.Lane)})
		case wait <= after && a.on[l.Lane]:
			delete(a.on, l.Lane)
			recovered = append(recovered, l.Lane)
		}
	}
	return raised, recovered
}

// crowding returns lane's users with the most of items, at most maxCrowding. Pure.
func crowding(items []dispatch.Item, lane dispatch.Lane) []UserItems {
	count := map[string]int{}
	for _, it := range items {
		if it.Lane == lane {
			count[it.Claim.Entry.UserID]++
		}
	}
	out := make([]UserItems, 0, len(count))
	for u, n := range count {
		out = append(out, UserItems{UserID: u, Items: n})
	}
	slices.SortFunc(out, func(x, y UserItems) int {
		return cmp.Or(cmp.Compare(y.Items, x.Items), cmp.Compare(x.UserID, y.UserID))
	})
	return out[:min(len(out), maxCrowding)]
}

// logReport writes one line per failure and alarm, then the cycle's Info line.
func (r *Runner) logReport(rep CycleReport) {
	ctx, log := context.Background(), r.cfg.Logger
	if rep.DispatchErr != nil {
		log.LogAttrs(ctx, slog.LevelError, "rota: dispatch failed", slog.Any("error", rep.DispatchErr))
	}
	for _, u := range rep.Unrouted {
		log.LogAttrs(ctx, slog.LevelWarn, "rota: user unrouted", slog.String("user", u.UserID), slog.Any("error", u.Err))
	}
	if rep.ProbeErr != nil {
		log.LogAttrs(ctx, slog.LevelWarn, "rota: probe failed", slog.Any("error", rep.ProbeErr))
	}
	for _, it := range rep.Items {
		switch it.Status {
		case StatusLate, StatusReleased, StatusDuplicate, StatusPaused:
			continue // counted in the cycle's line; a pause has a line of its own
		}
		if it.Err == nil || rep.isFlushErr(it.Err) {
			continue
		}
		e := it.Item.Claim.Entry
		log.LogAttrs(ctx, slog.LevelWarn, "rota: item failed",
			slog.String("user", e.UserID), slog.String("work_key", e.WorkKey), slog.String("lane", string(it.Item.Lane)),
			slog.String("status", it.Status.String()), slog.Any("error", it.Err))
	}
	for _, a := range rep.Alarms {
		log.LogAttrs(ctx, slog.LevelWarn, "rota: noisy neighbour",
			slog.String("lane", string(a.Lane)), slog.Duration("wait", a.Wait), slog.Any("crowding", userItemsStrings(a.Crowding)))
	}
	for _, l := range rep.Recovered {
		log.LogAttrs(ctx, slog.LevelInfo, "rota: noisy neighbour recovered", slog.String("lane", string(l)))
	}
	r.logLateness(rep)
	log.LogAttrs(ctx, slog.LevelInfo, "rota: cycle",
		slog.Time("now", rep.Now),
		slog.Int("dispatched", rep.Dispatched),
		slog.Int("hits", rep.Hits),
		slog.Int("misses", rep.Misses),
		slog.Int("removed", rep.Removed),
		slog.Int("errors", rep.Errors),
		slog.Int("lost_claims", rep.LostClaims),
		slog.Int("released", rep.Released),
		slog.Int("late", rep.Late),
		slog.Int("duplicates", rep.Duplicates),
		slog.Int("paused", rep.Paused),
		slog.Int("shed", len(rep.Shed)),
		slog.Int("unrouted", len(rep.Unrouted)),
		slog.Int("dispatch_lost_claims", dispatchLostClaims(rep.Lanes)),
		slog.Int("alarms", len(rep.Alarms)),
		slog.Any("lateness", lateness(rep)),
		slog.Duration("dispatch_duration", rep.DispatchDuration),
		slog.Duration("duration", rep.Duration))
}

// logLateness writes the lines of the lateness alarms and of a Starvation.
func (r *Runner) logLateness(rep CycleReport) {
	ctx, log := context.Background(), r.cfg.Logger
	for i := 0; i < len(rep.LateAlarms); {
		lane := rep.LateAlarms[i].Lane
		var tenants []string
		for ; i < len(rep.LateAlarms) && rep.LateAlarms[i].Lane == lane; i++ {
			tenants = append(tenants, rep.LateAlarms[i].UserID+":"+rep.LateAlarms[i].Late.String())
		}
		log.LogAttrs(ctx, slog.LevelWarn, "rota: work late",
			slog.String("lane", string(lane)), slog.Duration("alarm_after", r.cfg.AlarmAfter), slog.Any("tenants", tenants))
	}
	if len(rep.LateRecovered) > 0 {
		log.LogAttrs(ctx, slog.LevelInfo, "rota: work late recovered", slog.Any("tenants", rep.LateRecovered))
	}
	if s := rep.Starved; s != nil {
		log.LogAttrs(ctx, slog.LevelWarn, "rota: dispatching nothing",
			slog.Int("cycles", s.Cycles), slog.String("reason", s.Reason),
			slog.String("likely_cause", "clock skew: this replica's clock lags another dispatcher's by more than dispatch.Config.MaxClockSkew"))
	}
	if rep.StarvationEnded {
		log.LogAttrs(ctx, slog.LevelInfo, "rota: dispatching again")
	}
}

// lateness is each lane's lateness in rep, the cycle's now less the lane's
// dispatch.LaneReport.OldestDue (zero when the lane read no visible work), as one log
// group keyed by lane.
func lateness(rep CycleReport) slog.Value {
	attrs := make([]slog.Attr, len(rep.Lanes))
	for i, l := range rep.Lanes {
		var d time.Duration
		if !l.OldestDue.IsZero() {
			d = rep.Now.Sub(l.OldestDue)
		}
		attrs[i] = slog.Duration(string(l.Lane), d)
	}
	return slog.GroupValue(attrs...)
}

// userItemsStrings renders users as "user:items".
func userItemsStrings(us []UserItems) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u.UserID + ":" + strconv.Itoa(u.Items)
	}
	return out
}

// dispatchLostClaims sums the lanes' LostClaims.
func dispatchLostClaims(lanes []dispatch.LaneReport) int {
	n := 0
	for _, l := range lanes {
		n += l.LostClaims
	}
	return n
}
