package inspect

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/maintenance"
)

// maxUnroutedKept is how many of a cycle's unrouted users a record keeps (the count is kept
// whole).
const maxUnroutedKept = 20

// ring keeps the last len(buf) values pushed, oldest first. The zero ring keeps nothing.
type ring[T any] struct {
	buf      []T
	start, n int
}

func newRing[T any](size int) ring[T] { return ring[T]{buf: make([]T, size)} }

// push adds v, dropping the oldest value when the ring is full.
func (r *ring[T]) push(v T) {
	if len(r.buf) == 0 {
		return
	}
	if r.n < len(r.buf) {
		r.buf[(r.start+r.n)%len(r.buf)] = v
		r.n++
		return
	}
	r.buf[r.start] = v
	r.start = (r.start + 1) % len(r.buf)
}

// at returns the k-th oldest value, k in [0, n).
func (r *ring[T]) at(k int) *T { return &r.buf[(r.start+k)%len(r.buf)] }

// all returns a copy of the values, oldest first.
func (r *ring[T]) all() []T {
	out := make([]T, r.n)
	for k := range out {
		out[k] = *r.at(k)
	}
	return out
}

// cycleRecord is what the Inspector keeps of one dispatch cycle: a copy of what its pages
// show, never the report's own slices.
type cycleRecord struct {
	now        time.Time
	fromBridge bool // a bridge.CycleReport; otherwise a dispatch.CycleInfo
	lanes      []dispatch.LaneReport
	crowding   map[dispatch.Lane][]bridge.UserItems
	unrouted   []unroutedRecord // at most maxUnroutedKept
	unroutedN  int
	dispatched int
	shed       int
	// The counts only a bridge report has.
	hits, misses, removed, errors, lostClaims, released, expired int
	paused, duplicates                                           int
	err                                                          string
	dispatchDur, dur                                             time.Duration
}

// unroutedRecord is one user a cycle could not route, and why.
type unroutedRecord struct {
	userID, reason string
}

// pollRecord is what the Inspector keeps of one maintenance poll.
type pollRecord struct {
	now            time.Time
	winner, heavy  string
	secondPass     []string
	deferred       []maintenance.Deferral
	gauge          maintenance.Gauge
	err            string
	turnedDegraded bool
	recovered      bool
}

// ObserveDispatch records one dispatch cycle (dispatch.Observer). A bridge report of the
// same cycle, told later, replaces it.
func (i *Inspector) ObserveDispatch(info dispatch.CycleInfo) {
	rec := cycleRecord{
		now:        info.Now,
		lanes:      copyLanes(info.Batch.Lanes),
		crowding:   crowdingOf(info.Batch.Items),
		dispatched: len(info.Batch.Items),
		shed:       len(info.Batch.ShedUserIDs),
	}
	rec.unrouted, rec.unroutedN = i.copyUnrouted(info.Batch.Unrouted)
	if info.Err != nil {
		rec.err = i.withhold(context.Background(), slog.LevelWarn, "the dispatch cycle", info.Err)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.cycles.push(rec)
}

// ObserveCycle records one Runner cycle (bridge.Observer), in place of the dispatch report
// of the same cycle if it was told one, raises and ends the alarms, and lists and drops
// the failing sources its items show.
func (i *Inspector) ObserveCycle(rep bridge.CycleReport) {
	rec := cycleRecord{
		now:         rep.Now,
		fromBridge:  true,
		lanes:       copyLanes(rep.Lanes),
		crowding:    crowdingOf(itemsOf(rep.Items)),
		dispatched:  rep.Dispatched,
		shed:        len(rep.Shed),
		hits:        rep.Hits,
		misses:      rep.Misses,
		removed:     rep.Removed,
		errors:      rep.Errors,
		lostClaims:  rep.LostClaims,
		released:    rep.Released,
		expired:     rep.Late,
		paused:      rep.Paused,
		duplicates:  rep.Duplicates,
		dispatchDur: rep.DispatchDuration,
		dur:         rep.Duration,
	}
	rec.unrouted, rec.unroutedN = i.copyUnrouted(rep.Unrouted)
	ref := ""
	if err := rep.Err(); err != nil {
		ref = i.logWithheld(context.Background(), slog.LevelWarn, "the cycle", err)
		rec.err = refText("the cycle", ref)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.observeAlarms(rep)
	i.observeFailing(rep.Now, rep.Items, ref)
	for k := i.cycles.n - 1; k >= 0; k-- {
		if c := i.cycles.at(k); !c.fromBridge && c.now.Equal(rec.now) {
			*c = rec
			return
		}
	}
	i.cycles.push(rec)
}

// ObservePoll records one maintenance poll (maintenance.Observer).
func (i *Inspector) ObservePoll(rep maintenance.PollReport) {
	rec := pollRecord{
		now:            rep.Now,
		deferred:       slices.Clone(rep.Result.Deferred),
		gauge:          rep.Result.Gauge,
		turnedDegraded: rep.TurnedDegraded,
		recovered:      rep.Recovered,
	}
	rec.gauge.Waiters = slices.Clone(rep.Result.Gauge.Waiters)
	if w := rep.Result.Winner; w != nil {
		rec.winner = w.Task.Name
		if w.Task.Class == maintenance.Heavy {
			rec.heavy = w.Task.Name
		} else {
			rec.secondPass = append(rec.secondPass, w.Task.Name)
		}
	}
	for _, c := range rep.Result.AlsoDispatched {
		rec.secondPass = append(rec.secondPass, c.Task.Name)
	}
	if rep.Err != nil {
		rec.err = i.withhold(context.Background(), slog.LevelWarn, "the maintenance poll", rep.Err)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.polls.push(rec)
}

// snapshot returns copies of the records, oldest first, and the alarms. The records'
// slices are shared: no record is changed once kept.
func (i *Inspector) snapshot() (cycles []cycleRecord, polls []pollRecord, alarms alarmState) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.cycles.all(), i.polls.all(), i.alarms()
}

// copyLanes copies lane reports with their Overdue lists.
func copyLanes(lanes []dispatch.LaneReport) []dispatch.LaneReport {
	out := slices.Clone(lanes)
	for k := range out {
		out[k].Overdue = slices.Clone(out[k].Overdue)
	}
	return out
}

// copyUnrouted keeps the first maxUnroutedKept unrouted users and counts them all. A
// reason in rota's own words is kept as it is; the others are withheld, in one log line
// whose reference they all give.
func (i *Inspector) copyUnrouted(us []dispatch.Unrouted) ([]unroutedRecord, int) {
	var out []unroutedRecord
	var hidden []int
	var errs []error
	for _, u := range us[:min(len(us), maxUnroutedKept)] {
		rec := unroutedRecord{userID: u.UserID}
		switch {
		case u.Err == nil:
		case shownReason(u.Err):
			rec.reason = u.Err.Error()
		default:
			hidden, errs = append(hidden, len(out)), append(errs, u.Err)
		}
		out = append(out, rec)
	}
	if len(errs) > 0 {
		text := i.withhold(context.Background(), slog.LevelWarn, "resolving the tenant's lane", errors.Join(errs...))
		for _, k := range hidden {
			out[k].reason = text
		}
	}
	return out, len(us)
}

// itemsOf returns the dispatched items of a cycle's item reports.
func itemsOf(reports []bridge.ItemReport) []dispatch.Item {
	items := make([]dispatch.Item, len(reports))
	for k, r := range reports {
		items[k] = r.Item
	}
	return items
}

// maxCrowding is how many of a lane's users the page names as crowding it, as the
// bridge's noisy-neighbour alarm does.
const maxCrowding = 3

// crowdingOf returns, per lane, the users with the most items, at most maxCrowding,
// most first, then by UserID. O(len(items)).
func crowdingOf(items []dispatch.Item) map[dispatch.Lane][]bridge.UserItems {
	type key struct {
		lane dispatch.Lane
		user string
	}
	count := map[key]int{}
	for _, it := range items {
		count[key{it.Lane, it.Claim.Entry.UserID}]++
	}
	out := map[dispatch.Lane][]bridge.UserItems{}
	for k, n := range count {
		out[k.lane] = append(out[k.lane], bridge.UserItems{UserID: k.user, Items: n})
	}
	for lane, us := range out {
		slices.SortFunc(us, func(x, y bridge.UserItems) int {
			return cmp.Or(cmp.Compare(y.Items, x.Items), cmp.Compare(x.UserID, y.UserID))
		})
		out[lane] = us[:min(len(us), maxCrowding)]
	}
	return out
}
