package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/rotaworks/rota/duework"
)

// naive is the whole behaviour of a Dispatcher over an Index, cycle after cycle, written
// the obvious way from the rules: plain maps, every read a scan and a sort, Select's
// reference model for the choice. A rapid test drives it and a real Dispatcher side by
// side and compares every batch.
type naive struct {
	users  map[string]*naiveUser
	claims int // the last claim number handed out
}

type naiveUser struct {
	group      string
	lastServed time.Time
	heldUntil  time.Time // zero when not held
	entries    map[string]*naiveEntry
}

type naiveEntry struct {
	e     duework.Entry
	until time.Time // the last claim's end; zero when never claimed since written
	claim int       // the last claim's number; 0 when never claimed since written
}

// plan is one user's answer to LaneFor.
type plan struct {
	lane  Lane
	fails bool
	panic bool
}

func newNaive() *naive { return &naive{users: map[string]*naiveUser{}} }

func (m *naive) schedule(e duework.Entry) {
	u := m.users[e.UserID]
	if u == nil {
		u = &naiveUser{entries: map[string]*naiveEntry{}}
		m.users[e.UserID] = u
	}
	u.entries[e.WorkKey] = &naiveEntry{e: e}
}

// complete writes next over the entry of claim number claim, if that is still its claim.
func (m *naive) complete(claim int, next duework.Entry) bool {
	u := m.users[next.UserID]
	if u == nil || u.entries[next.WorkKey] == nil || u.entries[next.WorkKey].claim != claim {
		return false
	}
	u.entries[next.WorkKey] = &naiveEntry{e: next}
	return true
}

func (x *naiveEntry) visible(now time.Time) bool {
	return !x.e.DueAt.After(now) && !x.until.After(now)
}

// turn is max(ReadyAt, LastServed); ok is false for a user without entries.
func (u *naiveUser) turn() (turn time.Time, ok bool) {
	for _, x := range u.entries {
		at := x.e.DueAt
		if x.until.After(at) {
			at = x.until
		}
		if !ok || at.Before(turn) {
			turn, ok = at, true
		}
	}
	if ok && u.lastServed.After(turn) {
		turn = u.lastServed
	}
	return turn, ok
}

func (u *naiveUser) ready(now time.Time) bool {
	turn, ok := u.turn()
	return ok && !turn.After(now)
}

// queue returns every ready, unheld user of group at now, in (Turn, UserID) order.
func (m *naive) queue(group string, now time.Time) []duework.Head {
	var out []duework.Head
	for id, u := range m.users {
		if u.group == group && u.ready(now) && !u.heldUntil.After(now) {
			turn, _ := u.turn()
			out = append(out, duework.Head{UserID: id, Turn: turn, LastServed: u.lastServed})
		}
	}
	slices.SortFunc(out, compareTurns)
	return out
}

// due returns a user's visible entries in (DueAt, WorkKey) order, cut at perUser.
func (m *naive) due(id string, now time.Time, perUser int) ([]duework.Entry, bool) {
	var out []duework.Entry
	for _, x := range m.users[id].entries {
		if x.visible(now) {
			out = append(out, x.e)
		}
	}
	slices.SortFunc(out, compareEntries)
	if len(out) > perUser {
		return out[:perUser], true
	}
	return out, false
}

// resolve is what a Dispatcher makes of a plan.
func resolvePlan(cfg Config, p plan) (Lane, bool) {
	if p.fails || p.panic || !slices.ContainsFunc(cfg.Lanes, func(lc LaneCapacity) bool { return lc.Lane == p.lane }) {
		return "", false
	}
	return p.lane, true
}

// naiveBatch is what the model expects of one cycle.
type naiveBatch struct {
	items    []string // "lane:user/key"
	shed     []string
	unrouted []string
	lanes    []LaneReport
	calls    []string // LaneFor's calls, sorted
	claims   map[duework.Key]int
	read     SelectInput // what the lanes read, for the rules stated directly
}

// dispatch is one cycle at now under cfg (with its defaults), plans answering LaneFor.
func (m *naive) dispatch(cfg Config, plans map[string]plan, now time.Time) naiveBatch {
	cfg = cfg.withDefaults()
	var out naiveBatch
	resolved := m.route(cfg, plans, now, &out)

	// The lanes, each read as far as it could be given.
	in := SelectInput{LaneOf: map[string]Lane{}, Lanes: cfg.Lanes, GlobalBatchLimit: cfg.GlobalBatchLimit}
	read := make([][]duework.Head, len(cfg.Lanes))
	out.lanes = make([]LaneReport, len(cfg.Lanes))
	filled := 0
	for li, lc := range cfg.Lanes {
		out.lanes[li].Lane = lc.Lane
		q := m.queue(string(lc.Lane), now)
		n := min(lc.PerCycleLimit, max(lc.MinShare, cfg.GlobalBatchLimit-filled))
		if n < 1 {
			if len(q) > 0 {
				out.lanes[li].WaitingSince = q[0].Turn
				q[0].Due, _ = m.due(q[0].UserID, now, 1)
				setOverdue(&out.lanes[li], q[:1]) // the peek counts in the lane's lateness
			}
			continue
		}
		if len(q) > n {
			out.lanes[li].WaitingSince = q[n].Turn
			q = q[:n]
		}
		fair := 0 // the lane's fair part: what the lanes below cannot have
		for i := range q {
			q[i].Due, q[i].More = m.due(q[i].UserID, now, max(lc.PerUserLimit, lc.PerUserBurst))
			in.LaneOf[q[i].UserID] = lc.Lane
			fair += min(len(q[i].Due), lc.PerUserLimit)
		}
		read[li] = q
		in.Heads = append(in.Heads, q...)
		out.lanes[li].Users = len(q)
		setOverdue(&out.lanes[li], q)
		filled += min(fair, lc.PerCycleLimit, cfg.GlobalBatchLimit)
	}

	sel := modelSelectFlow(in)
	out.read = in
	out.shed = sel.ShedUserIDs
	got := map[string]int{}
	out.claims = map[duework.Key]int{}
	for _, s := range sel.Items {
		u := m.users[s.Entry.UserID]
		m.claims++
		x := u.entries[s.Entry.WorkKey]
		x.until, x.claim = now.Add(cfg.ClaimFor), m.claims
		out.claims[s.Entry.Key()] = m.claims
		if now.After(u.lastServed) {
			u.lastServed = now
		}
		got[s.Entry.UserID]++
		out.items = append(out.items, fmt.Sprintf("%s:%s/%s", s.Lane, s.Entry.UserID, s.Entry.WorkKey))
	}
	for li, q := range read {
		lane := &out.lanes[li]
		for _, h := range q {
			lane.Dispatched += got[h.UserID]
			if slices.Contains(sel.ShedUserIDs, h.UserID) {
				lane.Shed++
			}
		}
		for _, h := range q {
			if got[h.UserID] == 0 {
				lane.WaitingSince = h.Turn
				break
			}
		}
	}

	// Served users whose lane changed move; a failure leaves them where they are.
	for li, q := range read {
		for _, h := range q {
			if got[h.UserID] == 0 || resolved[h.UserID] {
				continue
			}
			out.calls = append(out.calls, h.UserID)
			if lane, ok := resolvePlan(cfg, plans[h.UserID]); !ok {
				out.unrouted = append(out.unrouted, h.UserID)
			} else if lane != cfg.Lanes[li].Lane {
				m.users[h.UserID].group = string(lane)
			}
		}
	}
	slices.Sort(out.unrouted)
	slices.Sort(out.calls)
	return out
}

// setOverdue fills lane's OldestDue and Overdue from the heads: every head's oldest
// visible entry, oldest first (ties by UserID), the first maxOverdue of them.
func setOverdue(lane *LaneReport, heads []duework.Head) {
	var all []Overdue
	for _, h := range heads {
		if len(h.Due) > 0 {
			all = append(all, Overdue{UserID: h.UserID, DueAt: h.Due[0].DueAt})
		}
	}
	slices.SortFunc(all, func(a, b Overdue) int {
		if c := a.DueAt.Compare(b.DueAt); c != 0 {
			return c
		}
		return strings.Compare(a.UserID, b.UserID)
	})
	if len(all) > 0 {
		lane.Overdue, lane.OldestDue = all[:min(len(all), maxOverdue)], all[0].DueAt
	}
}

// route is the cycle's routing: RouteLimit split between the unrouted group and the groups
// cfg does not name, each read in turn order and held for RetryAfter; the users resolved
// are moved and handed back. It returns them.
func (m *naive) route(cfg Config, plans map[string]plan, now time.Time, out *naiveBatch) map[string]bool {
	groups := map[string]bool{}
	for _, u := range m.users {
		if u.ready(now) {
			groups[u.group] = true
		}
	}
	var stale []string
	for g := range groups {
		if g != "" && !slices.ContainsFunc(cfg.Lanes, func(lc LaneCapacity) bool { return string(lc.Lane) == g }) {
			stale = append(stale, g)
		}
	}
	slices.Sort(stale)
	left := cfg.RouteLimit
	var read []string
	take := func(group string, n int) {
		q := m.queue(group, now)
		for _, h := range q[:min(n, len(q))] {
			m.users[h.UserID].heldUntil = now.Add(cfg.RetryAfter)
			read = append(read, h.UserID)
			left--
		}
	}
	if groups[""] {
		n := left
		if len(stale) > 0 {
			n = left - left/2
		}
		take("", n)
	}
	for _, g := range stale {
		if left > 0 {
			take(g, left)
		}
	}
	resolved := map[string]bool{}
	for _, id := range read {
		out.calls = append(out.calls, id)
		lane, ok := resolvePlan(cfg, plans[id])
		if !ok {
			out.unrouted = append(out.unrouted, id)
			continue
		}
		u := m.users[id]
		u.group, u.heldUntil = string(lane), time.Time{}
		resolved[id] = true
	}
	return resolved
}

// reroute is Dispatcher.Reroute.
func (m *naive) reroute(cfg Config, plans map[string]plan, ids []string) {
	for _, id := range ids {
		if lane, ok := resolvePlan(cfg, plans[id]); ok && m.users[id] != nil {
			m.users[id].group = string(lane)
		}
	}
}

// modelWorld is the rapid test's state: the real Index and Dispatchers, the model, the
// plans, and the claims handed out and not yet completed.
type modelWorld struct {
	t       *rapid.T
	idx     duework.Index
	m       *naive
	cfgs    []Config
	ds      []*Dispatcher
	plans   map[string]plan
	calls   []string
	now     time.Time
	users   []string
	pending []pendingClaim
}

type pendingClaim struct {
	claim duework.Claim
	n     int // the model's claim number
}

func (w *modelWorld) laneFor(_ context.Context, user string) (Lane, error) {
	w.calls = append(w.calls, user)
	p := w.plans[user]
	switch {
	case p.panic:
		panic("plan store corrupt")
	case p.fails:
		return "", errors.New("plan store down")
	}
	return p.lane, nil
}

var genPlanLane = rapid.SampledFrom([]Lane{"pro", "plus", "free", "trial", "gone"})

func (w *modelWorld) genPlan() plan {
	switch rapid.IntRange(0, 9).Draw(w.t, "plan") {
	case 0:
		return plan{fails: true}
	case 1:
		return plan{panic: true}
	}
	return plan{lane: genPlanLane.Draw(w.t, "lane")}
}

func (w *modelWorld) schedule() {
	u := rapid.SampledFrom(w.users).Draw(w.t, "user")
	e := duework.Entry{
		UserID:  u,
		WorkKey: fmt.Sprintf("w%d", rapid.IntRange(0, 4).Draw(w.t, "work")),
		DueAt:   w.now.Add(time.Duration(rapid.IntRange(-300, 60).Draw(w.t, "due")) * time.Second),
	}
	schedule(w.t, w.idx, e)
	w.m.schedule(e)
}

func (w *modelWorld) complete() {
	if len(w.pending) == 0 {
		return
	}
	i := rapid.IntRange(0, len(w.pending)-1).Draw(w.t, "item")
	p := w.pending[i]
	w.pending = slices.Delete(w.pending, i, i+1)
	next := p.claim.Entry
	next.DueAt = w.now.Add(time.Duration(rapid.IntRange(0, 120).Draw(w.t, "next")) * time.Second)
	err := w.idx.Complete(context.Background(), tenant(w.t, next.UserID), p.claim, next)
	if ok := w.m.complete(p.n, next); ok != (err == nil) {
		w.t.Fatalf("Complete(%v) = %v, the model says current claim %v", next.Key(), err, ok)
	}
}

func (w *modelWorld) reroute() {
	ids := rapid.SliceOfNDistinct(rapid.SampledFrom(w.users), 0, 3, rapid.ID[string]).Draw(w.t, "reroute")
	w.calls = nil
	d := rapid.IntRange(0, len(w.ds)-1).Draw(w.t, "dispatcher")
	_ = w.ds[d].Reroute(context.Background(), ids...)
	w.m.reroute(w.cfgs[d].withDefaults(), w.plans, ids)
	if !slices.Equal(w.calls, ids) {
		w.t.Fatalf("Reroute(%v) called LaneFor for %v", ids, w.calls)
	}
}

func (w *modelWorld) dispatch() {
	w.now = w.now.Add(time.Duration(rapid.IntRange(0, 90).Draw(w.t, "wait")) * time.Second)
	d := rapid.IntRange(0, len(w.ds)-1).Draw(w.t, "dispatcher")
	w.calls = nil
	b := mustDispatch(w.t, w.ds[d], w.now)
	want := w.m.dispatch(w.cfgs[d], w.plans, w.now)

	calls := slices.Sorted(slices.Values(w.calls))
	got := naiveBatch{items: itemPicks(b), shed: b.ShedUserIDs, unrouted: unroutedIDs(b), lanes: b.Lanes, calls: calls, claims: want.claims, read: want.read}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(naiveBatch{}), cmpopts.EquateEmpty()); diff != "" {
		w.t.Fatalf("cycle at %v with Config %d differs from the model (-model +Dispatch):\n%s", w.now.Sub(t0), d, diff)
	}
	// The fairness rules, stated directly over what the lanes read: round robin in turn
	// order, caps, priority, MinShare, shedding.
	sel := Selection{ShedUserIDs: b.ShedUserIDs}
	for _, it := range b.Items {
		sel.Items = append(sel.Items, Selected{Entry: it.Claim.Entry, Lane: it.Lane})
	}
	checkFlowSelection(w.t, want.read, sel)
	if !slices.ContainsFunc(w.cfgs[d].Lanes, func(lc LaneCapacity) bool { return lc.PerUserBurst > lc.PerUserLimit }) {
		checkSelection(w.t, want.read, sel)
	}
	for _, it := range b.Items {
		if !it.Claim.Until.Equal(w.now.Add(w.cfgs[d].ClaimFor)) {
			w.t.Fatalf("%v claimed until %v, want now + ClaimFor", it.Claim.Entry.Key(), it.Claim.Until)
		}
		w.pending = append(w.pending, pendingClaim{claim: it.Claim, n: want.claims[it.Claim.Entry.Key()]})
	}
	for _, u := range b.Unrouted {
		p, is := w.plans[u.UserID], ErrUnknownLane
		if p.panic {
			is = errLaneForPanic
		}
		if !p.fails && !errors.Is(u.Err, is) {
			w.t.Fatalf("%s unrouted for %v, want %v", u.UserID, u.Err, is)
		}
	}
}

// genModelConfig draws a Config over lanes drawn from pro, plus, free, trial, with small
// holds so that routing holds lapse within a few cycles.
func genModelConfig(t *rapid.T, w *modelWorld) Config {
	global := rapid.IntRange(1, 30).Draw(t, "global")
	lanes := genFlowLanes(t, global)
	for i := range lanes {
		lanes[i].PerCycleLimit = min(lanes[i].PerCycleLimit, 25)
	}
	lanes = rapid.Permutation(lanes).Draw(t, "priority")
	return Config{
		Lanes:            lanes,
		GlobalBatchLimit: global,
		LaneFor:          w.laneFor,
		ClaimFor:         time.Duration(rapid.IntRange(1, 200).Draw(t, "claimFor")) * time.Second,
		HoldFor:          time.Duration(rapid.IntRange(0, 20).Draw(t, "holdFor")) * time.Second,
		MaxClockSkew:     time.Second / 2, // below the shortest ClaimFor and HoldFor drawn
		RetryAfter:       time.Duration(rapid.IntRange(21, 200).Draw(t, "retryAfter")) * time.Second,
		RouteLimit:       rapid.SampledFrom([]int{0, 1, 2, 3, 5}).Draw(t, "routeLimit"),
	}
}

func TestDispatchMatchesRoundByRoundModel(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		rapid.Check(t, func(rt *rapid.T) {
			w := &modelWorld{t: rt, idx: newIndex(), m: newNaive(), plans: map[string]plan{}, now: t0}
			for u := range rapid.IntRange(1, 25).Draw(rt, "users") {
				id := fmt.Sprintf("u%02d", u)
				w.users = append(w.users, id)
				w.plans[id] = w.genPlan()
			}
			// One or two Dispatchers over the index: a second Config names other lanes, so
			// users of lanes one of them does not name get routed again.
			for range rapid.IntRange(1, 2).Draw(rt, "configs") {
				cfg := genModelConfig(rt, w)
				w.cfgs = append(w.cfgs, cfg)
				w.ds = append(w.ds, mustNew(rt, w.idx, cfg))
			}
			for range rapid.IntRange(5, 30).Draw(rt, "initial") {
				w.schedule()
			}
			for range rapid.IntRange(1, 25).Draw(rt, "steps") {
				switch rapid.IntRange(0, 9).Draw(rt, "step") {
				case 0, 1:
					w.schedule()
				case 2, 3:
					w.complete()
				case 4:
					w.plans[rapid.SampledFrom(w.users).Draw(rt, "replan")] = w.genPlan()
				case 5:
					w.reroute()
				default:
					w.dispatch()
				}
			}
		})
	})
}
