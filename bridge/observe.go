package bridge

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strconv"

	"github.com/rotaworks/rota/dispatch"
)

// Observer defaults, used for the zero values of [RunnerConfig].
const (
	// DefaultShedAlarmAfter is the number of consecutive cycles a user may be shed before
	// the noisy-neighbour alarm names it (RunnerConfig.ShedAlarmAfter zero).
	DefaultShedAlarmAfter = 10
	// MaxCrowding is how many of a lane's users a noisy-neighbour alarm names as crowding
	// it: those that got the most items in the lane in the alarm's cycle.
	MaxCrowding = 3
)

// Observer is told about every cycle of a Runner whose RunnerConfig.Observer it is: a
// metrics exporter (the rota/otel module has one), a test's recorder, a host's own alarm.
//
// ObserveCycle is called once per cycle, after the cycle's last item finished and its
// Info line was logged, with the same report Cycle returns. Cycles of Run overlap when
// items are slow and each reports from its own goroutine, so an Observer must be safe for
// concurrent use. It must not modify the report's slices and must copy what it keeps.
//
// The Runner's dispatch cycle is reported to the Dispatcher's own dispatch.Observer, if its
// Config has one; the two do not repeat each other: CycleReport carries the dispatch's
// counts for convenience, but an exporter should take dispatch figures from one of them.
type Observer interface {
	ObserveCycle(CycleReport)
}

// ObserverFunc adapts a function to an Observer.
type ObserverFunc func(CycleReport)

// ObserveCycle calls f(rep).
func (f ObserverFunc) ObserveCycle(rep CycleReport) { f(rep) }

// ShedAlarm is one lane's noisy-neighbour alarm: users who have waited too long, and the
// users who got the most of the lane meanwhile.
type ShedAlarm struct {
	// Lane is the waiting users' lane this cycle; empty for users who are shed because
	// their lane could not be resolved (see CycleReport.Unrouted), for whom no lane is
	// crowded.
	Lane dispatch.Lane
	// Waiting are the lane's users whose shed streak reached RunnerConfig.ShedAlarmAfter
	// consecutive cycles in this cycle, sorted by UserID, each with the items it got this
	// cycle. A user with a backlog deeper than its lane's PerUserLimit is shed in every
	// cycle in which it still has more due; such a user waits with items > 0 and usually
	// crowds the lane too.
	Waiting []UserItems
	// Crowding are the lane's users with the most items this cycle, at most MaxCrowding,
	// most first, then by UserID; empty when the lane dispatched nothing.
	Crowding []UserItems
}

// UserItems is a user and the number of items it was dispatched in a cycle.
type UserItems struct {
	UserID string
	Items  int
}

// shedAlarms builds the alarms of one cycle: crossed are the users whose shed streak
// reached the threshold (sorted), info the cycle's dispatch. Lanes go in Config order,
// then the unrouted users. Pure.
func shedAlarms(info dispatch.CycleInfo, crossed []string) []ShedAlarm {
	if len(crossed) == 0 {
		return nil
	}
	laneOf := make(map[string]dispatch.Lane, len(crossed))
	for _, s := range info.Shed {
		laneOf[s.UserID] = s.Lane
	}
	items := map[dispatch.Lane]map[string]int{}
	for _, it := range info.Batch.Items {
		m := items[it.Lane]
		if m == nil {
			m = map[string]int{}
			items[it.Lane] = m
		}
		m[it.Claim.Entry.UserID]++
	}
	lanes := make([]dispatch.Lane, 0, len(info.Batch.Lanes)+1)
	for _, l := range info.Batch.Lanes {
		lanes = append(lanes, l.Lane)
	}
	lanes = append(lanes, "")
	var out []ShedAlarm
	for _, lane := range lanes {
		var a ShedAlarm
		for _, u := range crossed {
			if laneOf[u] == lane {
				a.Waiting = append(a.Waiting, UserItems{UserID: u, Items: items[lane][u]})
			}
		}
		if len(a.Waiting) == 0 {
			continue
		}
		a.Lane = lane
		if lane != "" {
			for u, n := range items[lane] {
				a.Crowding = append(a.Crowding, UserItems{UserID: u, Items: n})
			}
			slices.SortFunc(a.Crowding, func(x, y UserItems) int {
				return cmp.Or(cmp.Compare(y.Items, x.Items), cmp.Compare(x.UserID, y.UserID))
			})
			a.Crowding = a.Crowding[:min(len(a.Crowding), MaxCrowding)]
		}
		out = append(out, a)
	}
	return out
}

// recordShed feeds a dispatched cycle's shed users to the Runner's ShedTracker and returns
// the cycle's alarms. Cycles are recorded in the order their dispatches return.
func (r *Runner) recordShed(info dispatch.CycleInfo) []ShedAlarm {
	if r.shed.Threshold < 1 {
		return nil
	}
	r.shedMu.Lock()
	crossed := r.shed.Record(info.Batch.ShedUserIDs)
	r.shedMu.Unlock()
	return shedAlarms(info, crossed)
}

// logShedAlarms writes one Warn line per alarm.
func (r *Runner) logShedAlarms(rep CycleReport) {
	for _, a := range rep.ShedAlarms {
		r.log.LogAttrs(context.Background(), slog.LevelWarn, "rota: noisy neighbour",
			slog.String("lane", string(a.Lane)),
			slog.Int("shed_cycles", r.shed.Threshold),
			slog.Any("waiting", userItemsStrings(a.Waiting)),
			slog.Any("crowding", userItemsStrings(a.Crowding)))
	}
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
