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

// A cycle's part of flow control: what it reads, whom it reports limited, late or
// waiting, how it resolves limits, and DispatchAtMost.

// claimAll makes x claim every entry Select picks from what a cycle under cfg reads.
func claimAll(x *fixedIndex, cfg Config, laneOf map[string]Lane) {
	x.claims = nil
	for i, s := range Select(x.selectInput(cfg, laneOf)).Items {
		x.claims = append(x.claims, duework.Claim{Entry: s.Entry, Token: uint64(i + 1), Until: t0.Add(cfg.ClaimFor)})
	}
}

func TestDispatchReportsUsersHeldBackByTheirOwnLimits(t *testing.T) {
	// A lane that reads 3 entries per user: capped is cut to 2 by its in-flight cap and
	// stuck to none; both are Limited, neither is shed, and stuck, though served nothing,
	// is not the lane's WaitingSince. a and b are cut by the lane: shed.
	capped := heldBy(head("capped", at(-9), -50, -49), 2)
	stuck := heldBy(head("stuck", at(-8)), 1)
	rated := head("rated", at(-9), -30)
	rated.Limits.Every, rated.More = time.Minute, true
	x := &fixedIndex{pages: map[string][]duework.Head{
		"free": {capped, stuck, head("a", at(-7), -40, -39, -38), head("b", at(-6), -20, -19, -18), head("c", at(-5), -10)},
		"pro":  {rated, head("x", at(-2), -60)},
	}}
	laneOf := map[string]Lane{"capped": "free", "stuck": "free", "a": "free", "b": "free", "c": "free", "rated": "pro", "x": "pro"}
	cfg := Config{
		Lanes: []LaneCapacity{
			{Lane: "pro", PerUserLimit: 3, PerCycleLimit: 1},
			{Lane: "free", PerUserLimit: 3, PerCycleLimit: 5},
		},
		GlobalBatchLimit: 6, LaneFor: func(_ context.Context, u string) (Lane, error) { return laneOf[u], nil }, ClaimFor: time.Minute,
	}
	claimAll(x, cfg, laneOf)
	b := mustDispatch(t, mustNew(t, x, cfg), t0)
	wantItems := []string{"pro:rated/k0", "free:capped/k0", "free:a/k0", "free:b/k0", "free:c/k0", "free:capped/k1"}
	if diff := cmp.Diff(wantItems, itemPicks(b)); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
	want := []LaneReport{
		// pro reads one user, rated, cut by its rate: Limited, not shed; the lane's
		// WaitingSince is the Turn of x, which it did not read.
		{Lane: "pro", Users: 1, Dispatched: 1, Limited: 1, WaitingSince: at(-2), OldestDue: at(-30),
			Overdue: []Overdue{{UserID: "rated", DueAt: at(-30)}}},
		{Lane: "free", Users: 5, Dispatched: 5, Shed: 2, Limited: 2, OldestDue: at(-50),
			Overdue: []Overdue{{UserID: "capped", DueAt: at(-50)}, {UserID: "a", DueAt: at(-40)}, {UserID: "b", DueAt: at(-20)}, {UserID: "c", DueAt: at(-10)}}},
	}
	if diff := cmp.Diff(want, b.Lanes); diff != "" {
		t.Errorf("lane reports (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "b"}, b.ShedUserIDs); diff != "" {
		t.Errorf("shed (-want +got):\n%s", diff)
	}

	// A user cut by its own limits and then by the lane is shed, and counted Limited; a
	// user of the lane served nothing sets WaitingSince.
	x.pages["pro"] = []duework.Head{heldBy(head("rated", at(-9), -30, -29), 5), head("x", at(-2), -60)}
	cfg.Lanes[0].PerCycleLimit = 2
	cfg.Lanes[0].PerUserLimit = 1
	x.pages["pro"][0].Limits.Weight = 3
	claimAll(x, cfg, laneOf)
	b = mustDispatch(t, mustNew(t, x, cfg), t0)
	if got := b.Lanes[0]; got.Limited != 1 || got.Shed != 1 || !got.WaitingSince.IsZero() {
		t.Errorf("pro: %+v, want Limited 1, Shed 1 (rated), no one waiting", got)
	}
	// Cut to nothing by the lane (free's MinShare takes the second slot), a user held back
	// by its own limits is shed and sets WaitingSince like anyone else.
	x.pages["pro"] = []duework.Head{head("x", at(-2), -60, -59), heldBy(head("rated", at(-1), -30), 1)}
	cfg.Lanes[0] = LaneCapacity{Lane: "pro", PerUserLimit: 2, PerCycleLimit: 2}
	cfg.Lanes[1].MinShare, cfg.GlobalBatchLimit = 1, 2
	claimAll(x, cfg, laneOf)
	b = mustDispatch(t, mustNew(t, x, cfg), t0)
	if got := b.Lanes[0]; got.Users != 2 || got.Dispatched != 1 || got.WaitingSince != at(-1) || got.Limited != 1 || got.Shed != 2 {
		t.Errorf("pro: %+v, want x served, rated read and served nothing: WaitingSince, Limited, and both shed", got)
	}
}

func TestDispatchReadsTheBurstAndCountsOnlyFairParts(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := &hookIndex{Index: newIndex()}
		schedule(t, idx, backlog("solo", 10, -100)...)
		route(t, idx, "pro", "solo")
		for _, u := range []string{"f1", "f2", "f3", "f4", "f5"} {
			schedule(t, idx, backlog(u, 2, -50)...)
		}
		route(t, idx, "free", "f1", "f2", "f3", "f4", "f5")
		cfg := Config{
			Lanes: []LaneCapacity{
				{Lane: "pro", PerUserLimit: 1, PerUserBurst: 5, PerCycleLimit: 10},
				{Lane: "free", PerUserLimit: 1, PerCycleLimit: 10},
			},
			GlobalBatchLimit: 5, ClaimFor: time.Minute,
			LaneFor: func(_ context.Context, u string) (Lane, error) {
				if u == "solo" {
					return "pro", nil
				}
				return "free", nil
			},
		}
		b := mustDispatch(t, mustNew(t, idx, cfg), t0)
		// pro's fair part is one item, so free reads 4 users and fills the batch: no burst.
		want := []string{"pro:solo/k000", "free:f1/k000", "free:f2/k000", "free:f3/k000", "free:f4/k000"}
		if diff := cmp.Diff(want, itemPicks(b)); diff != "" {
			t.Errorf("items (-want +got):\n%s", diff)
		}
		var queries []duework.ReadyQuery
		for _, c := range idx.recorded() {
			if c.op == "Ready" && c.query.Group != "" {
				queries = append(queries, c.query)
			}
		}
		wantQ := []duework.ReadyQuery{
			{Group: "pro", Now: t0, Users: 5, PerUser: 5, Hold: DefaultHoldFor},
			{Group: "free", Now: t0, Users: 4, PerUser: 1, Hold: DefaultHoldFor},
		}
		if diff := cmp.Diff(wantQ, queries); diff != "" {
			t.Errorf("lane reads (-want +got):\n%s", diff)
		}

		// Later, with room to spare, the lone user bursts into its idle lane.
		cfg.GlobalBatchLimit = 20
		b = mustDispatch(t, mustNew(t, idx, cfg), t0.Add(time.Second))
		want = []string{"pro:solo/k001", "pro:solo/k002", "pro:solo/k003", "pro:solo/k004", "pro:solo/k005",
			"free:f5/k000", "free:f1/k001", "free:f2/k001", "free:f3/k001", "free:f4/k001"}
		if diff := cmp.Diff(want, itemPicks(b)); diff != "" {
			t.Errorf("items with room (-want +got):\n%s", diff)
		}
		if got := b.Lanes[0]; got.Dispatched != 5 || got.Shed != 1 {
			t.Errorf("pro: %+v, want 5 dispatched and solo shed (it has more)", got)
		}
	})
}

func TestDispatchOverdueCountsAStarvedLanesPeek(t *testing.T) {
	// free has no room left: it reads nothing but its first user, unheld, and that user's
	// oldest entry shows how late the starved lane is.
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := newIndex()
		schedule(t, idx, backlog("p", 5, -10)...)
		schedule(t, idx, ent("f", "old", -900), ent("f", "new", -5), ent("g", "k", -1000))
		route(t, idx, "pro", "p")
		route(t, idx, "free", "f")
		route(t, idx, "free", "g")
		schedule(t, idx, ent("f", "touch", -800)) // f's Turn stays before g's
		cfg := Config{
			Lanes:            []LaneCapacity{{Lane: "pro", PerUserLimit: 5, PerCycleLimit: 5}, {Lane: "free", PerUserLimit: 1, PerCycleLimit: 5}},
			GlobalBatchLimit: 5, LaneFor: everyoneFree, ClaimFor: time.Minute,
		}
		b := mustDispatch(t, mustNew(t, idx, cfg), t0)
		free := b.Lanes[1]
		want := LaneReport{Lane: "free", WaitingSince: at(-1000), OldestDue: at(-1000), Overdue: []Overdue{{UserID: "g", DueAt: at(-1000)}}}
		if diff := cmp.Diff(want, free); diff != "" {
			t.Errorf("the starved lane's report (-want +got):\n%s", diff)
		}
		if got := readyUsers(t, idx, "free", t0); !slices.Equal(got, []string{"g", "f"}) {
			t.Errorf("free's queue after the peek: %v, want g, f, unheld", got)
		}
	})
}

func TestDispatchOverdueNamesTheOldestTen(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := newIndex()
		var users []string
		for u := range 15 {
			id := fmt.Sprintf("u%02d", u)
			users = append(users, id)
			// Turn order is u00 first; lateness runs the other way, with a tie at the end.
			schedule(t, idx, ent(id, "k", -100+u), ent(id, "old", -1000-u+min(u, 3)))
		}
		route(t, idx, "free", users...)
		b := mustDispatch(t, mustNew(t, idx, oneLaneConfig(1, 15, 15)), t0)
		var want []Overdue
		for _, u := range []int{14, 13, 12, 11, 10, 9, 8, 7, 6, 5} {
			want = append(want, Overdue{UserID: fmt.Sprintf("u%02d", u), DueAt: at(-1000 - u + min(u, 3))})
		}
		if diff := cmp.Diff(want, b.Lanes[0].Overdue); diff != "" {
			t.Errorf("Overdue (-want +got):\n%s", diff)
		}
		if b.Lanes[0].OldestDue != at(-1011) {
			t.Errorf("OldestDue %v, want %v", b.Lanes[0].OldestDue, at(-1011))
		}
	})
}

func TestDispatchAtMostZeroReadsOnlyWaitingSince(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := &hookIndex{Index: newIndex()}
		schedule(t, idx, backlog("p1", 3, -100)...)
		schedule(t, idx, ent("p2", "k", -90), ent("f1", "k", -80), ent("f2", "k", -70))
		route(t, idx, "pro", "p1", "p2")
		route(t, idx, "free", "f1", "f2")
		d := mustNew(t, idx, Config{
			Lanes:            []LaneCapacity{{Lane: "pro", PerUserLimit: 2, PerCycleLimit: 3}, {Lane: "free", PerUserLimit: 1, PerCycleLimit: 5}},
			GlobalBatchLimit: 5, LaneFor: everyoneFree, ClaimFor: time.Minute,
		})
		peek := func(group string) duework.ReadyQuery {
			return duework.ReadyQuery{Group: group, Now: t0, Users: 1, PerUser: 1}
		}
		b, err := d.DispatchAtMost(context.Background(), t0, Take{Total: 5, PerLane: map[Lane]int{"pro": 0}})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"free:f1/k", "free:f2/k"}, itemPicks(b)); diff != "" {
			t.Errorf("items with pro capped at 0 (-want +got):\n%s", diff)
		}
		wantPro := LaneReport{Lane: "pro", WaitingSince: at(-100), OldestDue: at(-100), Overdue: []Overdue{{UserID: "p1", DueAt: at(-100)}}}
		if diff := cmp.Diff(wantPro, b.Lanes[0]); diff != "" {
			t.Errorf("pro's report (-want +got):\n%s", diff)
		}
		var reads []duework.ReadyQuery
		for _, c := range idx.recorded() {
			if c.op == "Ready" {
				reads = append(reads, c.query)
			}
		}
		if len(reads) != 2 || reads[0] != peek("pro") {
			t.Errorf("reads %+v, want pro read only for its WaitingSince: %+v", reads, peek("pro"))
		}
		if got := readyUsers(t, idx.Index, "pro", t0); !slices.Equal(got, []string{"p1", "p2"}) {
			t.Errorf("pro's queue: %v, want p1, p2, unheld", got)
		}

		// A Total of 0 claims nothing: every lane only peeks.
		b, err = d.DispatchAtMost(context.Background(), t0, Take{})
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Items) != 0 || b.Lanes[0].WaitingSince != at(-100) || b.Lanes[0].Users != 0 || len(b.ShedUserIDs) != 0 {
			t.Errorf("Take{}: %+v, want nothing claimed, pro waiting since p1's turn", b)
		}
		if diff := cmp.Diff([]string{"Groups", "Ready", "Ready"}, idx.ops()); diff != "" {
			t.Errorf("Take{}: calls (-want +got):\n%s", diff)
		}
		for _, c := range idx.recorded() {
			if c.op == "Ready" && c.query != peek(c.query.Group) {
				t.Errorf("Take{}: read %+v, want a peek", c.query)
			}
		}
	})
}

// lowered is cfg with DispatchAtMost's caps of t applied, as a Config New accepts when
// every cap is at least 1.
func lowered(cfg Config, t Take) Config {
	cfg.RouteLimit = cfg.withDefaults().RouteLimit // routing is not capped
	cfg.Lanes = slices.Clone(cfg.Lanes)
	cfg.GlobalBatchLimit = min(cfg.GlobalBatchLimit, t.Total)
	for i := range cfg.Lanes {
		lc := &cfg.Lanes[i]
		if n, ok := t.PerLane[lc.Lane]; ok {
			lc.PerCycleLimit = min(lc.PerCycleLimit, n)
		}
		lc.MinShare = min(lc.MinShare, lc.PerCycleLimit, cfg.GlobalBatchLimit)
	}
	return cfg
}

// readsOf returns the Ready queries and their users among calls.
func readsOf(calls []call) []call {
	var out []call
	for _, c := range calls {
		if c.op == "Ready" {
			out = append(out, call{op: c.op, query: c.query, users: c.users})
		}
	}
	return out
}

// lanePicks returns, per lane, its items as "user/key".
func lanePicks(b Batch) map[Lane][]string {
	out := map[Lane][]string{}
	for _, it := range b.Items {
		out[it.Lane] = append(out[it.Lane], it.Claim.Entry.UserID+"/"+it.Claim.Entry.WorkKey)
	}
	return out
}

func TestDispatchAtMostIsDispatchWithLoweredCaps(t *testing.T) {
	// Three copies of one index state: DispatchAtMost on the first, a Dispatcher whose
	// Config has the lowered caps on the second, the full Dispatch on the third. The first
	// two agree on every read, claim and report; each lane's items under the caps and in
	// full are the same users in the same order, one a prefix of the other.
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		rapid.Check(t, func(rt *rapid.T) {
			p := genPopulation(rt)
			// At most 60 users, so the reference Model's reads (users × rows each) stay quick.
			p.entries = slices.DeleteFunc(p.entries, func(e duework.Entry) bool { return e.UserID >= "u060" })
			for i := range p.lanes {
				if rapid.Bool().Draw(rt, "burst") {
					p.lanes[i].PerUserBurst = p.lanes[i].PerUserLimit + rapid.IntRange(0, 3).Draw(rt, "burstAbove")
				}
			}
			cfg := p.config()
			idxs := [3]*hookIndex{{Index: newIndex()}, {Index: newIndex()}, {Index: newIndex()}}
			full := make([]*Dispatcher, 3)
			for i, idx := range idxs {
				p.load(rt, idx)
				full[i] = mustNew(rt, idx, cfg)
			}
			now := t0
			for range rapid.IntRange(0, 3).Draw(rt, "history") {
				now = now.Add(time.Duration(rapid.IntRange(0, 90).Draw(rt, "wait")) * time.Second)
				for i, idx := range idxs {
					complete(rt, idx, mustDispatch(rt, full[i], now), now.Add(30*time.Second))
				}
			}
			take := Take{Total: rapid.IntRange(1, cfg.GlobalBatchLimit+5).Draw(rt, "total"), PerLane: map[Lane]int{}}
			for _, lc := range cfg.Lanes {
				if rapid.Bool().Draw(rt, "capLane") {
					take.PerLane[lc.Lane] = rapid.IntRange(1, lc.PerCycleLimit+5).Draw(rt, "laneCap")
				}
			}
			if rapid.Bool().Draw(rt, "foreignLane") {
				take.PerLane["nowhere"] = 0
			}
			now = now.Add(time.Duration(rapid.IntRange(0, 90).Draw(rt, "wait")) * time.Second)
			for _, idx := range idxs {
				idx.recorded()
			}
			capped, err := full[0].DispatchAtMost(context.Background(), now, take)
			if err != nil {
				rt.Fatal(err)
			}
			// New refuses a lowered Config whose MinShares add up to more than its global
			// limit; the Dispatcher's rules for one (higher lanes reserve first) are Select's.
			lc := lowered(cfg, take)
			d, err := New(idxs[1], lc)
			if err != nil {
				d = mustNew(rt, idxs[1], cfg)
				d.lanes, d.global = lc.Lanes, lc.GlobalBatchLimit
			}
			low := mustDispatch(rt, d, now)
			if diff := cmp.Diff(low, capped, cmpopts.EquateEmpty(), sameMessage); diff != "" {
				rt.Fatalf("DispatchAtMost(%+v) differs from Dispatch with the lowered caps (-lowered +DispatchAtMost):\n%s", take, diff)
			}
			if diff := cmp.Diff(readsOf(idxs[1].recorded()), readsOf(idxs[0].recorded()), cmp.AllowUnexported(call{}), cmpopts.EquateEmpty()); diff != "" {
				rt.Fatalf("reads differ (-lowered +DispatchAtMost):\n%s", diff)
			}
			if len(capped.Items) > take.Total {
				rt.Fatalf("%d items above Take.Total %d", len(capped.Items), take.Total)
			}
			all := mustDispatch(rt, full[2], now)
			fullPicks, cappedPicks := lanePicks(all), lanePicks(capped)
			for _, lc := range cfg.Lanes {
				a, b := cappedPicks[lc.Lane], fullPicks[lc.Lane]
				if n, ok := take.PerLane[lc.Lane]; ok && len(a) > n {
					rt.Fatalf("lane %s: %d items above its cap %d", lc.Lane, len(a), n)
				}
				short, long := a, b
				if len(short) > len(long) {
					short, long = b, a
				}
				if !slices.Equal(short, long[:len(short)]) {
					rt.Fatalf("lane %s: capped %v and full %v: neither is a prefix of the other", lc.Lane, a, b)
				}
			}
		})
	})
}

// limitsPlan is one user's answer to LimitsFor.
type limitsPlan struct {
	limits duework.Limits
	fails  bool
	panics bool
}

var errLimitsDown = errors.New("limits store down")

// limitsWorld drives a Dispatcher with a LimitsFor and logs every LaneFor and LimitsFor
// call in order, so a test can check that LimitsFor follows each LaneFor that resolved a
// configured lane and comes at no other time.
type limitsWorld struct {
	t      *rapid.T
	idx    *hookIndex
	cfg    Config
	d      *Dispatcher
	lanes  map[string]plan
	limits map[string]limitsPlan
	log    []string // "lane u ok", "lane u failed", "limits u"
	users  []string
	now    time.Time
	claims []duework.Claim
}

func (w *limitsWorld) laneFor(_ context.Context, user string) (Lane, error) {
	p := w.lanes[user]
	if _, ok := resolvePlan(w.cfg, p); ok {
		w.log = append(w.log, "lane "+user+" ok")
	} else {
		w.log = append(w.log, "lane "+user+" failed")
	}
	switch {
	case p.panic:
		panic("plan store corrupt")
	case p.fails:
		return "", errors.New("plan store down")
	}
	return p.lane, nil
}

func (w *limitsWorld) limitsFor(_ context.Context, user string) (duework.Limits, error) {
	w.log = append(w.log, "limits "+user)
	p := w.limits[user]
	switch {
	case p.panics:
		panic("limits store corrupt")
	case p.fails:
		return duework.Limits{}, errLimitsDown
	}
	return p.limits, nil
}

func (w *limitsWorld) genLimitsPlan() limitsPlan {
	switch rapid.IntRange(0, 7).Draw(w.t, "limitsPlan") {
	case 0:
		return limitsPlan{fails: true}
	case 1:
		return limitsPlan{panics: true}
	case 2:
		bad := rapid.SampledFrom([]duework.Limits{{Weight: -1}, {Weight: duework.MaxWeight + 1}, {MaxInFlight: -1}, {Every: -time.Second}, {Burst: duework.MaxLimit + 1}}).Draw(w.t, "badLimits")
		return limitsPlan{limits: bad}
	}
	return limitsPlan{limits: duework.Limits{
		Weight:      rapid.IntRange(0, 3).Draw(w.t, "weight"),
		MaxInFlight: rapid.IntRange(0, 2).Draw(w.t, "maxInFlight"),
	}}
}

// want is the limits a resolved user is routed with.
func (w *limitsWorld) want(user string) duework.Limits {
	if w.cfg.LimitsFor == nil {
		return duework.Limits{}
	}
	return w.limits[user].limits
}

// limitsOK reports whether user's LimitsFor answer is routable.
func (w *limitsWorld) limitsOK(user string) bool {
	p := w.limits[user]
	return !p.fails && !p.panics && p.limits.Validate() == nil
}

// checkLog checks the call log of one Dispatch or Reroute and returns the users whose
// LimitsFor was called.
func (w *limitsWorld) checkLog(what string) map[string]bool {
	called := map[string]bool{}
	for i, e := range w.log {
		user, isLimits := strings.CutPrefix(e, "limits ")
		if isLimits {
			called[user] = true
			if i == 0 || w.log[i-1] != "lane "+user+" ok" {
				w.t.Fatalf("%s: LimitsFor(%s) not right after a LaneFor that resolved a lane: %v", what, user, w.log)
			}
		}
		if strings.HasSuffix(e, " ok") {
			user := strings.TrimSuffix(strings.TrimPrefix(e, "lane "), " ok")
			if w.cfg.LimitsFor != nil && (i+1 == len(w.log) || w.log[i+1] != "limits "+user) {
				w.t.Fatalf("%s: LaneFor(%s) resolved a lane and LimitsFor did not follow: %v", what, user, w.log)
			}
		}
	}
	return called
}

// checkRoutes checks that every route sent since the last check carries the limits
// LimitsFor gave, valid, and returns the Route calls.
func (w *limitsWorld) checkRoutes(what string, calls []call) {
	for _, c := range calls {
		for _, r := range c.routes {
			if err := r.Limits.Validate(); err != nil {
				w.t.Fatalf("%s: bad limits sent to Route: %+v: %v", what, r, err)
			}
			if want := w.limits[r.UserID].limits; w.cfg.LimitsFor != nil && r.Limits != want {
				w.t.Fatalf("%s: Route %+v, want LimitsFor's %+v", what, r, want)
			}
			if w.cfg.LimitsFor == nil && r.Limits != (duework.Limits{}) {
				w.t.Fatalf("%s: Route %+v with a nil LimitsFor, want zero limits", what, r)
			}
		}
	}
}

func (w *limitsWorld) dispatch() {
	w.now = w.now.Add(time.Duration(rapid.IntRange(0, 90).Draw(w.t, "wait")) * time.Second)
	// What the index stores before the cycle, to tell which served users must move.
	before := map[string]duework.UserState{}
	for _, u := range w.users {
		if st, err := w.idx.User(context.Background(), u, w.now); err == nil {
			before[u] = st
		}
	}
	w.log = nil
	w.idx.recorded()
	b := mustDispatch(w.t, w.d, w.now)
	calls := w.idx.recorded()
	called := w.checkLog("Dispatch")
	w.checkRoutes("Dispatch", calls)
	unrouted := map[string]error{}
	for _, u := range b.Unrouted {
		unrouted[u.UserID] = u.Err
	}
	for u := range called {
		p := w.limits[u]
		err, listed := unrouted[u]
		switch {
		case w.limitsOK(u):
			if listed && !strings.Contains(err.Error(), "Index.Route") {
				w.t.Fatalf("%s unrouted with valid limits: %v", u, err)
			}
		case !listed:
			w.t.Fatalf("%s: LimitsFor failed (%+v) and it is not Unrouted", u, p)
		case p.panics && !errors.Is(err, errLimitsForPanic), p.fails && !errors.Is(err, errLimitsDown),
			!p.panics && !p.fails && !errors.Is(err, duework.ErrInvalid):
			w.t.Fatalf("%s unrouted for %v, the wrong reason for %+v", u, err, p)
		}
	}
	// Step 4: after the claim, the served users whose lane or limits changed move, and no
	// others.
	claimAt := slices.IndexFunc(calls, func(c call) bool { return c.op == "Claim" })
	var moved []string
	if claimAt >= 0 {
		for _, c := range calls[claimAt:] {
			for _, r := range c.routes {
				moved = append(moved, r.UserID)
			}
		}
	}
	routedFirst := map[string]bool{}
	for _, c := range calls[:max(claimAt, 0)] {
		for _, r := range c.routes {
			routedFirst[r.UserID] = true
		}
	}
	var wantMoved []string
	for _, it := range b.Items {
		u := it.Claim.Entry.UserID
		if routedFirst[u] || slices.Contains(wantMoved, u) {
			continue
		}
		lane, ok := resolvePlan(w.cfg, w.lanes[u])
		if !ok || (w.cfg.LimitsFor != nil && !w.limitsOK(u)) {
			continue
		}
		if lane != it.Lane || w.want(u) != before[u].Limits {
			wantMoved = append(wantMoved, u)
		}
	}
	slices.Sort(moved)
	slices.Sort(wantMoved)
	if !slices.Equal(moved, wantMoved) {
		w.t.Fatalf("served users moved after the claim %v, want those whose lane or limits changed %v (calls %v)", moved, wantMoved, w.log)
	}
	for _, it := range b.Items {
		w.claims = append(w.claims, it.Claim)
	}
}

func (w *limitsWorld) reroute() {
	ids := rapid.SliceOfNDistinct(rapid.SampledFrom(w.users), 0, 3, rapid.ID[string]).Draw(w.t, "reroute")
	w.log = nil
	w.idx.recorded()
	err := w.d.Reroute(context.Background(), ids...)
	calls := w.idx.recorded()
	called := w.checkLog("Reroute")
	w.checkRoutes("Reroute", calls)
	for _, u := range ids {
		_, laneOK := resolvePlan(w.cfg, w.lanes[u])
		if laneOK != called[u] && w.cfg.LimitsFor != nil {
			w.t.Fatalf("Reroute(%s): LimitsFor called %v, LaneFor resolved %v", u, called[u], laneOK)
		}
		if failed := laneOK && w.cfg.LimitsFor != nil && !w.limitsOK(u); failed && (err == nil || !strings.Contains(err.Error(), fmt.Sprintf("LimitsFor(%q)", u))) {
			w.t.Fatalf("Reroute(%s): LimitsFor failed, error %v does not name it", u, err)
		}
	}
}

func (w *limitsWorld) complete() {
	if len(w.claims) == 0 {
		return
	}
	i := rapid.IntRange(0, len(w.claims)-1).Draw(w.t, "claim")
	c := w.claims[i]
	w.claims = slices.Delete(w.claims, i, i+1)
	next := c.Entry
	next.DueAt = w.now.Add(time.Duration(rapid.IntRange(0, 60).Draw(w.t, "next")) * time.Second)
	_ = w.idx.Complete(context.Background(), tenant(w.t, next.UserID), c, next)
}

func TestDispatchCallsLimitsForRightAfterLaneForResolves(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		rapid.Check(t, func(rt *rapid.T) {
			w := &limitsWorld{t: rt, idx: &hookIndex{Index: newIndex()}, lanes: map[string]plan{}, limits: map[string]limitsPlan{}, now: t0}
			w.cfg = Config{
				Lanes: []LaneCapacity{
					{Lane: "pro", PerUserLimit: 2, PerCycleLimit: 4},
					{Lane: "free", PerUserLimit: 1, PerUserBurst: rapid.SampledFrom([]int{0, 2}).Draw(rt, "burst"), PerCycleLimit: 4},
				},
				GlobalBatchLimit: 6, LaneFor: w.laneFor, ClaimFor: time.Minute, HoldFor: 5 * time.Second, RetryAfter: 30 * time.Second,
			}
			if rapid.IntRange(0, 4).Draw(rt, "nilLimitsFor") > 0 {
				w.cfg.LimitsFor = w.limitsFor
			}
			w.d = mustNew(rt, w.idx, w.cfg)
			genLane := func() plan {
				switch rapid.IntRange(0, 9).Draw(rt, "plan") {
				case 0:
					return plan{fails: true}
				case 1:
					return plan{panic: true}
				case 2:
					return plan{lane: "gone"}
				}
				return plan{lane: rapid.SampledFrom([]Lane{"pro", "free"}).Draw(rt, "lane")}
			}
			for u := range rapid.IntRange(1, 10).Draw(rt, "users") {
				id := fmt.Sprintf("u%02d", u)
				w.users = append(w.users, id)
				w.lanes[id], w.limits[id] = genLane(), w.genLimitsPlan()
				for k := range rapid.IntRange(1, 4).Draw(rt, "entries") {
					schedule(rt, w.idx.Index, ent(id, fmt.Sprintf("w%d", k), -rapid.IntRange(0, 100).Draw(rt, "due")))
				}
			}
			for range rapid.IntRange(1, 20).Draw(rt, "steps") {
				switch rapid.IntRange(0, 9).Draw(rt, "step") {
				case 0:
					w.lanes[rapid.SampledFrom(w.users).Draw(rt, "replan")] = genLane()
				case 1, 2:
					w.limits[rapid.SampledFrom(w.users).Draw(rt, "relimit")] = w.genLimitsPlan()
				case 3:
					w.reroute()
				case 4:
					w.complete()
				default:
					w.dispatch()
				}
			}
		})
	})
}

func TestDispatchRoutesServedUsersWhoseLimitsChanged(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := &hookIndex{Index: newIndex()}
		schedule(t, idx, backlog("a", 3, -100)...)
		schedule(t, idx, backlog("b", 3, -90)...)
		limits := map[string]duework.Limits{"a": {Weight: 2}, "b": {}}
		cfg := oneLaneConfig(1, 10, 10)
		cfg.LimitsFor = func(_ context.Context, u string) (duework.Limits, error) { return limits[u], nil }
		d := mustNew(t, idx, cfg)
		mustDispatch(t, d, t0)
		routes := func() []duework.Route {
			var out []duework.Route
			for _, c := range idx.recorded() {
				out = append(out, c.routes...)
			}
			return out
		}
		want := []duework.Route{{UserID: "a", Group: "free", Limits: duework.Limits{Weight: 2}}, {UserID: "b", Group: "free"}}
		if diff := cmp.Diff(want, routes()); diff != "" {
			t.Errorf("routing (-want +got):\n%s", diff)
		}
		for u, l := range limits {
			if st, err := idx.User(context.Background(), u, t0); err != nil || st.Limits != l {
				t.Errorf("User(%s) = %+v, %v; want limits %+v stored", u, st, err, l)
			}
		}
		// b's limits change: the next cycle that serves b moves it; a stays put.
		limits["b"] = duework.Limits{MaxInFlight: 3}
		mustDispatch(t, d, t0.Add(2*time.Minute))
		want = []duework.Route{{UserID: "b", Group: "free", Limits: duework.Limits{MaxInFlight: 3}}}
		if diff := cmp.Diff(want, routes()); diff != "" {
			t.Errorf("step 4 (-want +got):\n%s", diff)
		}
		// Bad limits are never routed: b stays where it is, with its limits, Unrouted.
		limits["b"] = duework.Limits{Weight: -3}
		b := mustDispatch(t, d, t0.Add(4*time.Minute))
		if got := routes(); len(got) != 0 {
			t.Errorf("routes %+v, want none", got)
		}
		if len(b.Unrouted) != 1 || b.Unrouted[0].UserID != "b" || !errors.Is(b.Unrouted[0].Err, duework.ErrInvalid) ||
			!strings.Contains(b.Unrouted[0].Err.Error(), `stays in lane "free"`) {
			t.Errorf("Unrouted %+v, want b for its invalid limits, staying in free", b.Unrouted)
		}
		// A panic is recovered, like LaneFor's.
		cfg.LimitsFor = func(context.Context, string) (duework.Limits, error) { panic("boom") }
		err := mustNew(t, idx, cfg).Reroute(context.Background(), "a")
		if !errors.Is(err, errLimitsForPanic) || !strings.Contains(err.Error(), "boom") {
			t.Errorf("Reroute with a panicking LimitsFor: %v, want errLimitsForPanic", err)
		}
	})
}

func TestDispatchCountsWeightsTheLaneCannotHold(t *testing.T) {
	// pro: PerUserLimit 2, PerCycleLimit 5. w3 (fair cap 6) is counted; w2 (4) is not,
	// nor w1, whose PerUserLimit fits. The count follows the configured PerCycleLimit,
	// not a Take that lowers it.
	weighted := func(user string, w int) duework.Head {
		h := head(user, at(-5), -10)
		h.Limits.Weight = w
		return h
	}
	x := &fixedIndex{pages: map[string][]duework.Head{
		"pro": {weighted("w1", 1), weighted("w2", 2), weighted("w3", 3)},
	}}
	laneOf := map[string]Lane{"w1": "pro", "w2": "pro", "w3": "pro"}
	cfg := Config{
		Lanes:            []LaneCapacity{{Lane: "pro", PerUserLimit: 2, PerCycleLimit: 5}},
		GlobalBatchLimit: 10, LaneFor: func(_ context.Context, u string) (Lane, error) { return laneOf[u], nil }, ClaimFor: time.Minute,
	}
	claimAll(x, cfg, laneOf)
	d := mustNew(t, x, cfg)
	if got := mustDispatch(t, d, t0).Lanes[0].WeightCapped; got != 1 {
		t.Errorf("Dispatch: WeightCapped = %d, want 1 (w3)", got)
	}
	b, err := d.DispatchAtMost(context.Background(), t0, Take{Total: 10, PerLane: map[Lane]int{"pro": 3}})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Lanes[0].WeightCapped; got != 1 {
		t.Errorf("DispatchAtMost with room 3: WeightCapped = %d, want 1 (by the configured PerCycleLimit)", got)
	}
}
