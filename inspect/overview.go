package inspect

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
)

// overview builds the overview at now: per lane one Index.Ready of one user, one
// Index.Paused of maxPausedShown+1 users, and the records; the maintenance posture from one
// StateStore.Load. Lanes come worst first.
func (i *Inspector) overview(ctx context.Context, now time.Time) overviewJSON {
	cycles, polls, alarms := i.snapshot()
	raised := map[dispatch.Lane]alarmRecord{}
	for _, a := range alarms.noisy {
		raised[a.lane] = a
	}
	failing := failingOf(alarms.failing, now)
	v := overviewJSON{Now: utc(now), Lanes: make([]laneJSON, 0, len(i.lanes)), UnroutedUsers: []unroutedJSON{},
		Alarms: []alarmJSON{}, LateAlarms: []lateAlarmJSON{}, LateAlarmCount: len(alarms.late),
		FailingSources: failing[:min(len(failing), maxFailingShown)], FailingSourceCount: len(failing),
		AlarmAfterErrors: i.alarmErrs, AlarmLog: alarmLogOf(alarms.log), Cycles: len(cycles), Actions: i.actions}
	var err error
	if v.Paused, v.PausedNext, err = i.paused(ctx, now, "", maxPausedShown); err != nil {
		v.PausedError = i.withhold(ctx, slog.LevelError, "reading the paused tenants", err)
	}
	for k := range i.lanes {
		v.Lanes = append(v.Lanes, i.laneSummary(ctx, now, k, cycles, raised))
	}
	slices.SortStableFunc(v.Lanes, worstFirst)
	v.UnroutedGroup = i.groupWait(ctx, "", now)
	for _, a := range alarms.noisy {
		v.Alarms = append(v.Alarms, *alarmOf(a))
	}
	for _, a := range alarms.late[:min(len(alarms.late), maxLateShown)] {
		v.LateAlarms = append(v.LateAlarms, *lateAlarmOf(a))
	}
	if len(cycles) > 0 {
		last := cycles[len(cycles)-1]
		v.LastCycle = cycleOf(last)
		for _, u := range last.unrouted {
			v.UnroutedUsers = append(v.UnroutedUsers, unroutedJSON{UserID: u.userID, Reason: u.reason})
		}
		v.UnroutedCount = last.unroutedN
	}
	v.Maintenance = i.posture(ctx, now, polls)
	return v
}

// worstFirst orders lane summaries for an operator: a lane that could not be read, then
// the longest wait now, then the latest work at the last cycle, then priority.
func worstFirst(a, b laneJSON) int {
	return cmp.Or(
		cmp.Compare(readable(a), readable(b)),
		cmp.Compare(b.WaitSeconds, a.WaitSeconds),
		cmp.Compare(b.LateSeconds, a.LateSeconds),
		cmp.Compare(a.Priority, b.Priority))
}

// readable is 0 for a lane summary with an error, 1 otherwise.
func readable(l laneJSON) int {
	if l.Error != "" {
		return 0
	}
	return 1
}

// laneSummary is lane k's summary at now: its wait now from one Ready, and its cycles,
// lateness, overdue users, crowding and alarm from the records.
func (i *Inspector) laneSummary(ctx context.Context, now time.Time, k int, cycles []cycleRecord, raised map[dispatch.Lane]alarmRecord) laneJSON {
	lc := i.lanes[k]
	w := i.groupWait(ctx, string(lc.Lane), now)
	j := laneJSON{Lane: string(lc.Lane), Priority: k, Capacity: capacityOf(lc), WaitSeconds: w.WaitSeconds,
		WaitingSince: w.WaitingSince, NextUser: w.NextUser, Error: w.Error,
		Overdue: []overdueJSON{}, Crowding: []userItemsJSON{}, Cycles: []laneCycleJSON{}}
	var last *cycleRecord
	var lastReport dispatch.LaneReport
	for n := range cycles {
		c := &cycles[n]
		lr, ok := laneReportOf(c, lc.Lane)
		if !ok {
			continue
		}
		last, lastReport = c, lr
		j.Cycles = append(j.Cycles, laneCycleJSON{At: utc(c.now), Users: lr.Users, Dispatched: lr.Dispatched,
			Shed: lr.Shed, Limited: lr.Limited, LostClaims: lr.LostClaims,
			WaitSeconds: since(c.now, lr.WaitingSince), LateSeconds: since(c.now, lr.OldestDue)})
	}
	if last != nil {
		j.AsOf = utc(last.now)
		j.LateSeconds, j.OldestDue = since(last.now, lastReport.OldestDue), utc(lastReport.OldestDue)
		for _, o := range lastReport.Overdue {
			j.Overdue = append(j.Overdue, overdueJSON{UserID: o.UserID, DueAt: utc(o.DueAt), LateSeconds: since(last.now, o.DueAt)})
		}
		j.Crowding = userItemsOf(last.crowding[lc.Lane])
	}
	if a, ok := raised[lc.Lane]; ok {
		j.Alarm = alarmOf(a)
	}
	return j
}

// laneReportOf returns c's report of lane.
func laneReportOf(c *cycleRecord, lane dispatch.Lane) (dispatch.LaneReport, bool) {
	for _, lr := range c.lanes {
		if lr.Lane == lane {
			return lr, true
		}
	}
	return dispatch.LaneReport{}, false
}

// groupWait is how long group keeps its first ready user waiting at now: now − the Turn
// of a Ready of one user with no hold, which costs one user's read.
func (i *Inspector) groupWait(ctx context.Context, group string, now time.Time) groupWaitJSON {
	page, err := i.idx.Ready(ctx, duework.ReadyQuery{Group: group, Now: now, Users: 1, PerUser: 1})
	if err != nil {
		return groupWaitJSON{Error: i.withhold(ctx, slog.LevelError, "reading the index", err)}
	}
	if len(page.Heads) == 0 {
		return groupWaitJSON{}
	}
	h := page.Heads[0]
	return groupWaitJSON{WaitSeconds: since(now, h.Turn), WaitingSince: utc(h.Turn), NextUser: h.UserID}
}

// cycleOf is the summary of one cycle.
func cycleOf(c cycleRecord) *cycleJSON {
	j := &cycleJSON{At: utc(c.now), Source: "dispatch", Dispatched: c.dispatched, Shed: c.shed, Unrouted: c.unroutedN,
		Hits: c.hits, Misses: c.misses, Removed: c.removed, Errors: c.errors, LostClaims: c.lostClaims,
		Released: c.released, Expired: c.expired, Paused: c.paused, Duplicates: c.duplicates, DispatchSeconds: seconds(c.dispatchDur), DurationSeconds: seconds(c.dur), Error: c.err}
	if c.fromBridge {
		j.Source = "bridge"
	}
	for _, lr := range c.lanes {
		j.LostClaims += lr.LostClaims
	}
	return j
}

// alarmLogOf is the alarm log's JSON, in the log's order.
func alarmLogOf(events []alarmEvent) []alarmEventJSON {
	out := make([]alarmEventJSON, 0, len(events))
	for _, e := range events {
		j := alarmEventJSON{At: utc(e.at), Alarm: e.kind, Event: "recovered", Lane: string(e.lane), UserID: e.userID, WorkKey: e.workKey}
		if e.raised {
			j.Event = "raised"
			switch e.kind {
			case alarmNoisy:
				j.WaitSeconds = seconds(e.wait)
			case alarmLate:
				j.LateSeconds = seconds(e.wait)
			case alarmFailing:
				j.ErrorStreak = e.streak
			}
		}
		out = append(out, j)
	}
	return out
}
