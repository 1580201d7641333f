package inspect

import (
	"cmp"
	"slices"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
)

// The alarm history's bounds.
const (
	// alarmLogSize is how many alarm events the Inspector keeps, raised and recovered,
	// noisy-neighbour, late-work and failing-source alike, in a ring of their own: the
	// cycle ring's History does not bound them.
	alarmLogSize = 500
	// maxLateTracked is how many tenants (and lanes, and sources) the Inspector follows
	// the alarms of; past it, the one whose latest alarm event is oldest is forgotten.
	maxLateTracked = 1000
	// maxLateShown is how many raised late-work alarms the overview lists.
	maxLateShown = 50
)

// The kinds of alarm, as the JSON names them.
const (
	alarmNoisy = "noisy_neighbour"
	alarmLate  = "late_work"
)

// alarmEvent is one alarm raised or recovered, as the alarm log keeps it.
type alarmEvent struct {
	at      time.Time // the cycle that reported it
	kind    string    // alarmNoisy or alarmLate
	raised  bool      // raised, else recovered
	lane    dispatch.Lane
	userID  string        // the tenant of a late-work alarm or a failing source
	workKey string        // a failing source's
	wait    time.Duration // a raised noisy-neighbour alarm's wait, a late-work alarm's lateness
	streak  int           // a raised failing source's ErrorStreak
}

// alarmRecord is one lane's raised noisy-neighbour alarm.
type alarmRecord struct {
	lane     dispatch.Lane
	raisedAt time.Time
	wait     time.Duration
	crowding []bridge.UserItems
}

// lateRecord is one tenant's raised late-work alarm.
type lateRecord struct {
	lane     dispatch.Lane
	userID   string
	raisedAt time.Time
	late     time.Duration
}

// episodes tracks the alarms raised and not yet recovered, one per key. Reports of
// overlapping cycles arrive out of order, so an event is applied only if no event of a
// later cycle was applied to its key first. It remembers at most max keys: past that it
// forgets the key whose latest event is oldest.
type episodes[K comparable, V any] struct {
	max  int
	on   map[K]V         // raised, not recovered
	last map[K]time.Time // the cycle of each key's latest applied event
}

func newEpisodes[K comparable, V any](max int) episodes[K, V] {
	return episodes[K, V]{max: max, on: map[K]V{}, last: map[K]time.Time{}}
}

// accept reports whether an event of k at at is to be applied, and records it.
func (e *episodes[K, V]) accept(k K, at time.Time) bool {
	if last, ok := e.last[k]; ok && at.Before(last) {
		return false
	}
	e.last[k] = at
	if len(e.last) > e.max {
		e.forgetOldest()
	}
	return true
}

// forgetOldest drops the key whose latest event is oldest. O(keys); it runs only once the
// bound is passed, one key per event.
func (e *episodes[K, V]) forgetOldest() {
	var oldest K
	var at time.Time
	first := true
	for k, t := range e.last {
		if first || t.Before(at) {
			oldest, at, first = k, t, false
		}
	}
	delete(e.last, oldest)
	delete(e.on, oldest)
}

// raise raises k's alarm with v unless a later event of k came first.
func (e *episodes[K, V]) raise(k K, at time.Time, v V) {
	if e.accept(k, at) {
		e.on[k] = v
	}
}

// end ends k's alarm unless a later event of k came first, and returns the alarm it
// ended, if one was raised.
func (e *episodes[K, V]) end(k K, at time.Time) (V, bool) {
	var zero V
	if !e.accept(k, at) {
		return zero, false
	}
	v, ok := e.on[k]
	delete(e.on, k)
	return v, ok
}

// raised returns the raised alarms, ordered by less.
func (e *episodes[K, V]) raised(less func(a, b V) int) []V {
	out := make([]V, 0, len(e.on))
	for _, v := range e.on {
		out = append(out, v)
	}
	slices.SortFunc(out, less)
	return out
}

// observeAlarms applies the alarms of a Runner's report — noisy-neighbour and late-work,
// raised and recovered — to the raised alarms and the alarm log; i.mu is held.
func (i *Inspector) observeAlarms(rep bridge.CycleReport) {
	now := rep.Now
	for _, l := range rep.Recovered {
		i.noisy.end(l, now)
		i.alarmLog.push(alarmEvent{at: now, kind: alarmNoisy, lane: l})
	}
	for _, a := range rep.Alarms {
		i.noisy.raise(a.Lane, now, alarmRecord{lane: a.Lane, raisedAt: now, wait: a.Wait, crowding: slices.Clone(a.Crowding)})
		i.alarmLog.push(alarmEvent{at: now, kind: alarmNoisy, raised: true, lane: a.Lane, wait: a.Wait})
	}
	for _, u := range rep.LateRecovered {
		ev := alarmEvent{at: now, kind: alarmLate, userID: u}
		if r, ok := i.late.end(u, now); ok {
			ev.lane = r.lane
		}
		i.alarmLog.push(ev)
	}
	for _, a := range rep.LateAlarms {
		i.late.raise(a.UserID, now, lateRecord{lane: a.Lane, userID: a.UserID, raisedAt: now, late: a.Late})
		i.alarmLog.push(alarmEvent{at: now, kind: alarmLate, raised: true, lane: a.Lane, userID: a.UserID, wait: a.Late})
	}
}

// alarmState is what the pages show of the alarms: the raised ones and the log.
type alarmState struct {
	noisy   []alarmRecord   // raised, by lane
	late    []lateRecord    // raised, oldest raise first
	failing []failingRecord // failing sources, oldest since first
	log     []alarmEvent    // newest cycle first
}

// alarms returns the alarm state; i.mu is held.
func (i *Inspector) alarms() alarmState {
	s := alarmState{
		noisy: i.noisy.raised(func(a, b alarmRecord) int { return cmp.Compare(a.lane, b.lane) }),
		late: i.late.raised(func(a, b lateRecord) int {
			return cmp.Or(a.raisedAt.Compare(b.raisedAt), cmp.Compare(a.userID, b.userID))
		}),
		failing: i.failing.raised(failingOrder),
		log:     i.alarmLog.all(),
	}
	// Newest cycle first; one cycle's events in the order its report gives them.
	slices.SortStableFunc(s.log, func(a, b alarmEvent) int { return b.at.Compare(a.at) })
	return s
}

// lateAlarmOf returns userID's raised late-work alarm, if any.
func (i *Inspector) lateAlarmOf(userID string) (lateRecord, bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	r, ok := i.late.on[userID]
	return r, ok
}
