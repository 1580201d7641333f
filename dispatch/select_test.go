package dispatch

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/rotaworks/rota/duework"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// at is t0 plus n seconds.
func at(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }

func ent(user, key string, due int) duework.Entry {
	return duework.Entry{UserID: user, WorkKey: key, Tier: "hot", DueAt: at(due)}
}

// head builds a head with the given Turn whose entries are due at the given offsets,
// keyed k0, k1, …
func head(user string, turn time.Time, dues ...int) duework.Head {
	h := duework.Head{UserID: user, Turn: turn}
	for i, d := range dues {
		h.Due = append(h.Due, ent(user, fmt.Sprintf("k%d", i), d))
	}
	return h
}

// picks renders a selection's items as "lane:user/key".
func picks(sel Selection) []string {
	out := make([]string, 0, len(sel.Items))
	for _, it := range sel.Items {
		out = append(out, fmt.Sprintf("%s:%s/%s", it.Lane, it.Entry.UserID, it.Entry.WorkKey))
	}
	return out
}

func oneLane(perUser, perCycle int) []LaneCapacity {
	return []LaneCapacity{{Lane: "free", PerUserLimit: perUser, PerCycleLimit: perCycle}}
}

func allIn(lane Lane, users ...string) map[string]Lane {
	m := make(map[string]Lane, len(users))
	for _, u := range users {
		m[u] = lane
	}
	return m
}

func TestSelectGivesEveryUserOneItemBeforeAnyGetsASecond(t *testing.T) {
	// a has a deep backlog; everyone gets one item before anyone gets a second.
	in := SelectInput{
		Heads: []duework.Head{
			head("a", time.Time{}, 1, 2, 3, 4, 5),
			head("b", time.Time{}, 10),
			head("c", time.Time{}, 20, 21),
		},
		LaneOf:           allIn("free", "a", "b", "c"),
		Lanes:            oneLane(10, 10),
		GlobalBatchLimit: 100,
	}
	want := []string{"free:a/k0", "free:b/k0", "free:c/k0", "free:a/k1", "free:c/k1", "free:a/k2", "free:a/k3", "free:a/k4"}
	if diff := cmp.Diff(want, picks(Select(in))); diff != "" {
		t.Errorf("round robin order (-want +got):\n%s", diff)
	}
}

func TestSelectGoesInTurnOrder(t *testing.T) {
	// Per-cycle limit 1: the single item shows who stands first in a round.
	cases := []struct {
		name  string
		heads []duework.Head
		want  string
	}{
		{"earliest Turn first", []duework.Head{
			head("a", at(-10), -50), head("b", at(-20), -20)}, "b"},
		{"then UserID", []duework.Head{
			head("b", at(-10), -10), head("a", at(-10), -10)}, "a"},
		{"a deep old backlog does not jump the queue", []duework.Head{
			head("noisy", at(-1), -1000, -999, -998), head("quiet", at(-2), -2)}, "quiet"},
		{"nor does an old LastServed", []duework.Head{
			{UserID: "a", Turn: at(-1), LastServed: at(-100), Due: []duework.Entry{ent("a", "k", -100)}},
			{UserID: "b", Turn: at(-2), Due: []duework.Entry{ent("b", "k", -2)}}}, "b"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sel := Select(SelectInput{
				Heads:            c.heads,
				LaneOf:           map[string]Lane{"a": "free", "b": "free", "noisy": "free", "quiet": "free"},
				Lanes:            oneLane(5, 1),
				GlobalBatchLimit: 10,
			})
			if len(sel.Items) != 1 || sel.Items[0].Entry.UserID != c.want {
				t.Fatalf("got %v, want %s first", picks(sel), c.want)
			}
		})
	}
}

func TestSelectHandsOutAUsersItemsInDueOrder(t *testing.T) {
	// A user's items go in (DueAt, WorkKey) order even when Due is not.
	h := duework.Head{UserID: "a", Due: []duework.Entry{ent("a", "z", 2), ent("a", "y", 1), ent("a", "x", 2)}}
	sel := Select(SelectInput{
		Heads:            []duework.Head{h},
		LaneOf:           allIn("free", "a"),
		Lanes:            oneLane(3, 3),
		GlobalBatchLimit: 3,
	})
	want := []string{"free:a/y", "free:a/x", "free:a/z"}
	if diff := cmp.Diff(want, picks(sel)); diff != "" {
		t.Errorf("entry order (-want +got):\n%s", diff)
	}
	if h.Due[0].WorkKey != "z" {
		t.Errorf("Select reordered its input")
	}
}

func TestSelectKeepsPerUserAndPerCycleLimits(t *testing.T) {
	in := SelectInput{
		Heads: []duework.Head{
			head("a", time.Time{}, 1, 2, 3, 4, 5),
			head("b", time.Time{}, 10, 11, 12),
			head("c", time.Time{}, 20, 21, 22),
		},
		LaneOf:           allIn("free", "a", "b", "c"),
		Lanes:            oneLane(2, 5),
		GlobalBatchLimit: 100,
	}
	want := []string{"free:a/k0", "free:b/k0", "free:c/k0", "free:a/k1", "free:b/k1"}
	sel := Select(in)
	if diff := cmp.Diff(want, picks(sel)); diff != "" {
		t.Errorf("PerUserLimit 2, PerCycleLimit 5 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, sel.ShedUserIDs); diff != "" {
		t.Errorf("capped users are shed (-want +got):\n%s", diff)
	}
}

func TestSelectAppliesTheGlobalLimitInPriorityOrder(t *testing.T) {
	heads := []duework.Head{
		head("p1", time.Time{}, 1, 2), head("p2", time.Time{}, 1),
		head("f1", time.Time{}, 0, 1), head("f2", time.Time{}, 0),
	}
	laneOf := map[string]Lane{"p1": "pro", "p2": "pro", "f1": "free", "f2": "free"}
	lanes := func(freeShare int) []LaneCapacity {
		return []LaneCapacity{
			{Lane: "pro", PerUserLimit: 5, PerCycleLimit: 10},
			{Lane: "free", PerUserLimit: 5, PerCycleLimit: 10, MinShare: freeShare},
		}
	}
	cases := []struct {
		name      string
		freeShare int
		global    int
		want      []string
	}{
		{"strict priority: the higher lane's order first", 0, 4,
			[]string{"pro:p1/k0", "pro:p2/k0", "pro:p1/k1", "free:f1/k0"}},
		{"global limit cuts the higher lane's fair order", 0, 2,
			[]string{"pro:p1/k0", "pro:p2/k0"}},
		{"MinShare reserves slots before higher lanes", 2, 3,
			[]string{"pro:p1/k0", "free:f1/k0", "free:f2/k0"}},
		{"an unused reservation goes back to the pool", 5, 6,
			[]string{"pro:p1/k0", "pro:p2/k0", "pro:p1/k1", "free:f1/k0", "free:f2/k0", "free:f1/k1"}},
		{"MinShare is a floor, not a cap", 1, 10,
			[]string{"pro:p1/k0", "pro:p2/k0", "pro:p1/k1", "free:f1/k0", "free:f2/k0", "free:f1/k1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sel := Select(SelectInput{Heads: heads, LaneOf: laneOf, Lanes: lanes(c.freeShare), GlobalBatchLimit: c.global})
			if diff := cmp.Diff(c.want, picks(sel)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSelectReservesMinSharesInPriorityOrder(t *testing.T) {
	// When the reservations add up to more than the global limit (New refuses that, Select
	// does not), the higher lanes reserve first.
	heads := []duework.Head{head("a", time.Time{}, 1, 2, 3), head("b", time.Time{}, 1, 2, 3), head("c", time.Time{}, 1, 2, 3)}
	sel := Select(SelectInput{
		Heads:  heads,
		LaneOf: map[string]Lane{"a": "x", "b": "y", "c": "z"},
		Lanes: []LaneCapacity{
			{Lane: "x", PerUserLimit: 3, PerCycleLimit: 3},
			{Lane: "y", PerUserLimit: 3, PerCycleLimit: 3, MinShare: 2},
			{Lane: "z", PerUserLimit: 3, PerCycleLimit: 3, MinShare: 2},
		},
		GlobalBatchLimit: 3,
	})
	want := []string{"y:b/k0", "y:b/k1", "z:c/k0"}
	if diff := cmp.Diff(want, picks(sel)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestSelectShedsEveryUserLeftWithWork(t *testing.T) {
	more := head("more", at(-3), 1)
	more.More = true
	in := SelectInput{
		Heads: []duework.Head{
			head("all", at(-5), 1),        // gets everything
			head("capped", at(-4), 1, 2),  // PerUserLimit 1
			more,                          // has due work beyond Due
			head("nolane", at(-9), 1),     // missing from LaneOf
			head("unknown", at(-9), 1),    // lane not configured
			head("idle", at(-9)),          // no due work at all
			head("global", at(-1), 50),    // cut by the global limit
			head("zlast", at(1), 60),      // latest Turn: last in the round, cut too
			head("bottom", at(-9), 1),     // lower lane, no slot left
			head("topfill", at(-6), 0, 0), // first in the top lane
		},
		LaneOf: map[string]Lane{
			"all": "top", "capped": "top", "more": "top", "unknown": "gone", "idle": "top",
			"global": "top", "zlast": "top", "bottom": "low", "topfill": "top",
		},
		Lanes: []LaneCapacity{
			{Lane: "top", PerUserLimit: 1, PerCycleLimit: 100},
			{Lane: "low", PerUserLimit: 1, PerCycleLimit: 100},
		},
		GlobalBatchLimit: 4,
	}
	sel := Select(in)
	wantItems := []string{"top:topfill/k0", "top:all/k0", "top:capped/k0", "top:more/k0"}
	if diff := cmp.Diff(wantItems, picks(sel)); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
	wantShed := []string{"bottom", "capped", "global", "more", "nolane", "topfill", "unknown", "zlast"}
	if diff := cmp.Diff(wantShed, sel.ShedUserIDs); diff != "" {
		t.Errorf("shed (-want +got):\n%s", diff)
	}
}

func TestSelectDeterministicWhateverHeadOrder(t *testing.T) {
	heads := []duework.Head{
		head("a", at(-5), 1, 2), head("b", time.Time{}, 3), head("c", at(-5), 1), head("d", at(-9), 7, 8, 9),
	}
	in := SelectInput{Heads: heads, LaneOf: allIn("free", "a", "b", "c", "d"), Lanes: oneLane(2, 5), GlobalBatchLimit: 5}
	want := Select(in)
	for _, perm := range [][]int{{3, 2, 1, 0}, {1, 3, 0, 2}, {2, 0, 3, 1}} {
		shuffled := make([]duework.Head, len(heads))
		for i, p := range perm {
			shuffled[i] = heads[p]
		}
		in.Heads = shuffled
		if diff := cmp.Diff(want, Select(in)); diff != "" {
			t.Errorf("heads in order %v (-first +this):\n%s", perm, diff)
		}
	}
}

func TestSelectBadLimitsSelectNothing(t *testing.T) {
	heads := []duework.Head{head("a", time.Time{}, 1)}
	for _, lc := range []LaneCapacity{
		{Lane: "free", PerUserLimit: 0, PerCycleLimit: 5},
		{Lane: "free", PerUserLimit: 5, PerCycleLimit: 0},
		{Lane: "free", PerUserLimit: -1, PerCycleLimit: -1, MinShare: -3},
	} {
		sel := Select(SelectInput{Heads: heads, LaneOf: allIn("free", "a"), Lanes: []LaneCapacity{lc}, GlobalBatchLimit: 5})
		if len(sel.Items) != 0 || !slices.Equal(sel.ShedUserIDs, []string{"a"}) {
			t.Errorf("%+v: got %v shed %v, want nothing and a shed", lc, picks(sel), sel.ShedUserIDs)
		}
	}
	sel := Select(SelectInput{Heads: heads, LaneOf: allIn("free", "a"), Lanes: oneLane(5, 5), GlobalBatchLimit: 0})
	if len(sel.Items) != 0 {
		t.Errorf("GlobalBatchLimit 0: got %v", picks(sel))
	}
}

func TestSelectPanicsOnDuplicateUser(t *testing.T) {
	for _, heads := range [][]duework.Head{
		{head("a", time.Time{}, 1), head("a", time.Time{}, 2)},
		{head("b", time.Time{}, 1), head("a", time.Time{}, 1), head("b", time.Time{}, 2)},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("no panic for heads %v", heads)
				}
			}()
			Select(SelectInput{Heads: heads, Lanes: oneLane(1, 1), GlobalBatchLimit: 1})
		}()
	}
}

func TestSelectEmpty(t *testing.T) {
	sel := Select(SelectInput{Lanes: oneLane(1, 1), GlobalBatchLimit: 1})
	if len(sel.Items) != 0 || len(sel.ShedUserIDs) != 0 {
		t.Errorf("empty input: %+v", sel)
	}
}

// --- reference model ---

// modelSelect is Select written the obvious way: one item at a time, round by round over
// sorted users, then slot by slot across lanes.
func modelSelect(in SelectInput) Selection {
	laneIndex := func(name Lane) int {
		for i, lc := range in.Lanes {
			if lc.Lane == name {
				return i
			}
		}
		return -1
	}
	type user struct {
		h   duework.Head
		due []duework.Entry
	}
	byLane := make([][]user, len(in.Lanes))
	var unrouted []string
	for _, h := range in.Heads {
		due := append([]duework.Entry(nil), h.Due...)
		sort.SliceStable(due, func(i, j int) bool {
			if !due[i].DueAt.Equal(due[j].DueAt) {
				return due[i].DueAt.Before(due[j].DueAt)
			}
			return due[i].WorkKey < due[j].WorkKey
		})
		li := -1
		if name, ok := in.LaneOf[h.UserID]; ok {
			li = laneIndex(name)
		}
		if li < 0 {
			unrouted = append(unrouted, h.UserID)
			continue
		}
		byLane[li] = append(byLane[li], user{h, due})
	}

	orders := make([][]duework.Entry, len(in.Lanes))
	for li, lc := range in.Lanes {
		users := byLane[li]
		sort.SliceStable(users, func(i, j int) bool {
			a, b := users[i], users[j]
			if !a.h.Turn.Equal(b.h.Turn) {
				return a.h.Turn.Before(b.h.Turn)
			}
			return a.h.UserID < b.h.UserID
		})
		for round := 0; ; round++ {
			added := false
			for _, u := range users {
				if len(orders[li]) >= lc.PerCycleLimit {
					break
				}
				if round < len(u.due) && round < lc.PerUserLimit {
					orders[li] = append(orders[li], u.due[round])
					added = true
				}
			}
			if !added {
				break
			}
		}
	}

	taken := make([]int, len(in.Lanes))
	slots := in.GlobalBatchLimit
	for li, lc := range in.Lanes {
		for taken[li] < lc.MinShare && taken[li] < len(orders[li]) && slots > 0 {
			taken[li]++
			slots--
		}
	}
	for li := range in.Lanes {
		for taken[li] < len(orders[li]) && slots > 0 {
			taken[li]++
			slots--
		}
	}

	var sel Selection
	got := map[string]int{}
	for li, lc := range in.Lanes {
		for _, e := range orders[li][:taken[li]] {
			sel.Items = append(sel.Items, Selected{Entry: e, Lane: lc.Lane})
			got[e.UserID]++
		}
	}
	shed := map[string]bool{}
	for _, u := range unrouted {
		shed[u] = true
	}
	for _, h := range in.Heads {
		if h.More || got[h.UserID] < len(h.Due) {
			shed[h.UserID] = true
		}
	}
	for _, h := range in.Heads {
		if len(h.Due) == 0 && !h.More {
			delete(shed, h.UserID)
		}
	}
	for u := range shed {
		sel.ShedUserIDs = append(sel.ShedUserIDs, u)
	}
	sort.Strings(sel.ShedUserIDs)
	return sel
}

// --- generators ---

var laneNames = []Lane{"pro", "plus", "free", "trial"}

// genLanes draws 1–4 valid lanes whose MinShares fit in global.
func genLanes(t *rapid.T, global int) []LaneCapacity {
	n := rapid.IntRange(1, 4).Draw(t, "lanes")
	lanes := make([]LaneCapacity, n)
	budget := global
	for i := range lanes {
		share := 0
		if budget > 0 && rapid.Bool().Draw(t, "hasShare") {
			share = rapid.IntRange(0, min(budget, 20)).Draw(t, "minShare")
			budget -= share
		}
		lanes[i] = LaneCapacity{
			Lane:          laneNames[i],
			PerUserLimit:  rapid.IntRange(1, 5).Draw(t, "perUser"),
			PerCycleLimit: rapid.IntRange(1, 120).Draw(t, "perCycle"),
			MinShare:      share,
		}
	}
	return lanes
}

// routing is a random set of lanes and users: users 1–300, lanes 1–4, caps, MinShares and a
// global limit; one user in twenty has no lane and one in twenty an unknown lane.
type routing struct {
	lanes  []LaneCapacity
	global int
	users  []string
	laneOf map[string]Lane
}

func genRouting(t *rapid.T) routing {
	r := routing{global: rapid.IntRange(1, 200).Draw(t, "global"), laneOf: map[string]Lane{}}
	r.lanes = genLanes(t, r.global)
	for u := range rapid.IntRange(1, 300).Draw(t, "users") {
		id := fmt.Sprintf("u%03d", u)
		r.users = append(r.users, id)
		switch n := rapid.IntRange(0, 19).Draw(t, "route"); {
		case n == 0: // unrouted
		case n == 1:
			r.laneOf[id] = "unknown"
		default:
			r.laneOf[id] = r.lanes[n%len(r.lanes)].Lane
		}
	}
	return r
}

func (r routing) maxPerUser() int {
	p := 0
	for _, lc := range r.lanes {
		p = max(p, lc.PerUserLimit)
	}
	return p
}

// genSelectInput draws a routing and, for each user, a backlog and a Turn (ties are
// common), as the lanes' Ready calls would return them with PerUser the largest
// PerUserLimit.
func genSelectInput(t *rapid.T) SelectInput {
	r := genRouting(t)
	perUser := r.maxPerUser()
	in := SelectInput{Lanes: r.lanes, GlobalBatchLimit: r.global, LaneOf: r.laneOf}
	for _, id := range r.users {
		h := duework.Head{UserID: id, Turn: at(-60 * rapid.IntRange(0, 5).Draw(t, "turn"))}
		backlog := rapid.IntRange(1, 12).Draw(t, "backlog")
		for k := range min(backlog, perUser) {
			h.Due = append(h.Due, ent(id, fmt.Sprintf("w%02d", k), rapid.IntRange(-30, 0).Draw(t, "due")))
		}
		slices.SortFunc(h.Due, compareEntries)
		h.More = backlog > perUser
		in.Heads = append(in.Heads, h)
	}
	return in
}

func TestSelectMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genSelectInput(t)
		if diff := cmp.Diff(modelSelect(in), Select(in), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("Select differs from the reference model (-model +Select):\n%s", diff)
		}
	})
}

func TestSelectMatchesModelOddInput(t *testing.T) {
	// Unsorted Due, empty heads, zero and negative limits, shared lane names, MinShares
	// beyond the global limit: Select still does what its doc says, as the model does.
	rapid.Check(t, func(t *rapid.T) {
		in := SelectInput{LaneOf: map[string]Lane{}, GlobalBatchLimit: rapid.IntRange(-1, 30).Draw(t, "global")}
		for range rapid.IntRange(0, 4).Draw(t, "lanes") {
			in.Lanes = append(in.Lanes, LaneCapacity{
				Lane:          rapid.SampledFrom(laneNames[:3]).Draw(t, "lane"),
				PerUserLimit:  rapid.IntRange(-1, 4).Draw(t, "perUser"),
				PerCycleLimit: rapid.IntRange(-1, 20).Draw(t, "perCycle"),
				MinShare:      rapid.IntRange(-2, 20).Draw(t, "minShare"),
			})
		}
		for u := range rapid.IntRange(0, 40).Draw(t, "users") {
			id := fmt.Sprintf("u%02d", u)
			h := duework.Head{UserID: id, More: rapid.Bool().Draw(t, "more")}
			h.Turn = at(-rapid.IntRange(0, 3).Draw(t, "turn"))
			for k := range rapid.IntRange(0, 5).Draw(t, "due") {
				h.Due = append(h.Due, ent(id, fmt.Sprintf("w%d", rapid.IntRange(0, 9).Draw(t, "key")*10+k), rapid.IntRange(-3, 0).Draw(t, "dueAt")))
			}
			in.LaneOf[id] = rapid.SampledFrom(laneNames).Draw(t, "laneOf")
			in.Heads = append(in.Heads, h)
		}
		in.Heads = rapid.Permutation(in.Heads).Draw(t, "order")
		if diff := cmp.Diff(modelSelect(in), Select(in), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("Select differs from the reference model (-model +Select):\n%s", diff)
		}
	})
}

// --- properties stated directly, without the model ---

// checkSelection checks one Selection against the fairness rules stated directly —
// entry order, caps, the global limit, MinShare, priority, max-min fairness inside a lane,
// shedding — and reports every violation.
func checkSelection(t interface{ Errorf(string, ...any) }, in SelectInput, sel Selection) {
	laneIdx := map[Lane]int{}
	for i, lc := range in.Lanes {
		laneIdx[lc.Lane] = i
	}
	heads := map[string]duework.Head{}
	for _, h := range in.Heads {
		heads[h.UserID] = h
	}
	got := map[string]int{}
	perLane := make([]int, len(in.Lanes))
	lastLane := 0
	for _, it := range sel.Items {
		li, ok := laneIdx[it.Lane]
		if !ok {
			t.Errorf("item %v in unknown lane", it)
			continue
		}
		if li < lastLane {
			t.Errorf("items not highest lane first: %s after lane %d", it.Lane, lastLane)
		}
		lastLane = li
		u := it.Entry.UserID
		h := heads[u]
		if in.LaneOf[u] != it.Lane {
			t.Errorf("user %s dispatched in lane %s, its lane is %s", u, it.Lane, in.LaneOf[u])
		}
		if got[u] >= len(h.Due) || h.Due[got[u]] != it.Entry {
			t.Errorf("user %s item %d is %v, not its next due entry", u, got[u], it.Entry)
		}
		got[u]++
		perLane[li]++
	}
	if len(sel.Items) > in.GlobalBatchLimit {
		t.Errorf("%d items above GlobalBatchLimit %d", len(sel.Items), in.GlobalBatchLimit)
	}
	could := make([]int, len(in.Lanes)) // what each lane could dispatch without the global limit
	for _, h := range in.Heads {
		li, ok := laneIdx[in.LaneOf[h.UserID]]
		if !ok {
			continue
		}
		lc := in.Lanes[li]
		if got[h.UserID] > lc.PerUserLimit {
			t.Errorf("user %s got %d, PerUserLimit %d", h.UserID, got[h.UserID], lc.PerUserLimit)
		}
		could[li] += min(len(h.Due), lc.PerUserLimit)
	}
	reserved := 0
	reserve := make([]int, len(in.Lanes))
	for li, lc := range in.Lanes {
		could[li] = min(could[li], lc.PerCycleLimit)
		if perLane[li] > lc.PerCycleLimit {
			t.Errorf("lane %s got %d, PerCycleLimit %d", lc.Lane, perLane[li], lc.PerCycleLimit)
		}
		reserve[li] = min(lc.MinShare, could[li], in.GlobalBatchLimit-reserved)
		reserved += reserve[li]
		if perLane[li] < reserve[li] {
			t.Errorf("lane %s got %d, below its reservation %d", lc.Lane, perLane[li], reserve[li])
		}
	}
	// Priority beyond the reservations.
	for lo := range in.Lanes {
		if perLane[lo] <= reserve[lo] {
			continue
		}
		for hi := range lo {
			if perLane[hi] < could[hi] {
				t.Errorf("lane %s got %d (> reserve %d) while higher lane %s got %d of %d",
					in.Lanes[lo].Lane, perLane[lo], reserve[lo], in.Lanes[hi].Lane, perLane[hi], could[hi])
			}
		}
	}
	// The batch is full unless every lane got all it could.
	total := 0
	for li := range in.Lanes {
		total += could[li]
	}
	if len(sel.Items) < min(total, in.GlobalBatchLimit) {
		t.Errorf("%d items, but lanes could use %d of %d", len(sel.Items), total, in.GlobalBatchLimit)
	}
	// Max-min fairness inside a lane.
	for _, u := range in.Heads {
		li, ok := laneIdx[in.LaneOf[u.UserID]]
		if !ok || got[u.UserID] >= min(len(u.Due), in.Lanes[li].PerUserLimit) {
			continue
		}
		for _, v := range in.Heads {
			if in.LaneOf[v.UserID] == in.LaneOf[u.UserID] && got[v.UserID] > got[u.UserID]+1 {
				t.Errorf("%s got %d while %s, which wanted more, got %d", v.UserID, got[v.UserID], u.UserID, got[u.UserID])
			}
		}
	}
	// Turn order inside a lane: an earlier user never gets fewer items than a later one,
	// unless it wanted fewer.
	for i, u := range in.Heads {
		li, ok := laneIdx[in.LaneOf[u.UserID]]
		if !ok {
			continue
		}
		for _, v := range in.Heads[i+1:] {
			if in.LaneOf[v.UserID] != in.LaneOf[u.UserID] {
				continue
			}
			first, later := u, v
			if compareTurns(v, u) < 0 {
				first, later = v, u
			}
			wants := min(len(first.Due), in.Lanes[li].PerUserLimit)
			if got[first.UserID] < min(wants, got[later.UserID]) {
				t.Errorf("%s got %d, ahead of it in turn order %s got %d", later.UserID, got[later.UserID], first.UserID, got[first.UserID])
			}
		}
	}
	// Shed: exactly, sorted, once each.
	var want []string
	for _, h := range in.Heads {
		_, routed := laneIdx[in.LaneOf[h.UserID]]
		hasDue := len(h.Due) > 0 || h.More
		if hasDue && (!routed || h.More || got[h.UserID] < len(h.Due)) {
			want = append(want, h.UserID)
		}
	}
	slices.Sort(want)
	if !slices.Equal(want, sel.ShedUserIDs) {
		t.Errorf("ShedUserIDs %v, want %v", sel.ShedUserIDs, want)
	}
}

func TestSelectKeepsEveryFairnessRule(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genSelectInput(t)
		checkSelection(t, in, Select(in))
	})
}

func TestCheckSelectionCatchesBrokenRules(t *testing.T) {
	// The property checker must fail on selections that break the rules.
	in := SelectInput{
		Heads:  []duework.Head{head("a", at(-2), 1, 2, 3), head("b", at(-1), 1, 2, 3), head("c", time.Time{}, 1)},
		LaneOf: map[string]Lane{"a": "pro", "b": "pro", "c": "free"},
		Lanes: []LaneCapacity{
			{Lane: "pro", PerUserLimit: 3, PerCycleLimit: 4},
			{Lane: "free", PerUserLimit: 1, PerCycleLimit: 1},
		},
		GlobalBatchLimit: 4,
	}
	good := Select(in)
	r := &recorder{}
	if checkSelection(r, in, good); len(r.msgs) > 0 {
		t.Fatalf("good selection flagged: %v", r.msgs)
	}
	pick := func(lane Lane, user string, k int) Selected {
		return Selected{Entry: in.Heads[map[string]int{"a": 0, "b": 1, "c": 2}[user]].Due[k], Lane: lane}
	}
	broken := map[string]Selection{
		"unfair":        {Items: []Selected{pick("pro", "a", 0), pick("pro", "a", 1), pick("pro", "a", 2), pick("pro", "b", 0)}, ShedUserIDs: []string{"b", "c"}},
		"priority":      {Items: []Selected{pick("pro", "a", 0), pick("pro", "b", 0), pick("pro", "a", 1), pick("free", "c", 0)}, ShedUserIDs: []string{"a", "b"}},
		"shed missing":  {Items: good.Items, ShedUserIDs: []string{"a"}},
		"shed unsorted": {Items: good.Items, ShedUserIDs: []string{"c", "b", "a"}},
		"over global":   {Items: append(slices.Clone(good.Items), pick("free", "c", 0)), ShedUserIDs: []string{"a", "b"}},
		"wrong order":   {Items: []Selected{pick("pro", "a", 1), pick("pro", "b", 0), pick("pro", "a", 0), pick("pro", "b", 1)}, ShedUserIDs: good.ShedUserIDs},
		"turn order":    {Items: []Selected{pick("pro", "b", 0), pick("pro", "b", 1), pick("pro", "a", 0), pick("free", "c", 0)}, ShedUserIDs: []string{"a", "b"}},
	}
	for name, sel := range broken {
		r := &recorder{}
		checkSelection(r, in, sel)
		if len(r.msgs) == 0 {
			t.Errorf("%s: checker found nothing wrong with %v", name, picks(sel))
		}
	}
}

type recorder struct{ msgs []string }

func (r *recorder) Errorf(format string, args ...any) {
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
