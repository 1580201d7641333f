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

// The flow-control rules of Select: weights scale the per-user caps, bursts hand a lane's
// room left to users with more work once everyone had its fair part, and users held back
// by their own limits are not shed.

// weighted returns h with weight w.
func weighted(h duework.Head, w int) duework.Head {
	h.Limits.Weight = w
	return h
}

// heldBy returns h cut by its own in-flight cap: More, with the cap set.
func heldBy(h duework.Head, maxInFlight int) duework.Head {
	h.Limits.MaxInFlight = maxInFlight
	h.More = true
	return h
}

func burstLane(perUser, burst, perCycle int) []LaneCapacity {
	return []LaneCapacity{{Lane: "free", PerUserLimit: perUser, PerUserBurst: burst, PerCycleLimit: perCycle}}
}

func TestSelectScalesFairCapsByWeight(t *testing.T) {
	// PerUserLimit 1: a of weight 3 may have 3 items, in rounds with the others.
	in := SelectInput{
		Heads: []duework.Head{
			weighted(head("a", at(-3), 1, 2, 3, 4, 5), 3),
			head("b", at(-2), 1, 2, 3),
			weighted(head("c", at(-1), 1, 2, 3), 2),
		},
		LaneOf:           allIn("free", "a", "b", "c"),
		Lanes:            oneLane(1, 10),
		GlobalBatchLimit: 10,
	}
	sel := Select(in)
	want := []string{"free:a/k0", "free:b/k0", "free:c/k0", "free:a/k1", "free:c/k1", "free:a/k2"}
	if diff := cmp.Diff(want, picks(sel)); diff != "" {
		t.Errorf("weighted rounds (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, sel.ShedUserIDs); diff != "" {
		t.Errorf("users left with work are shed (-want +got):\n%s", diff)
	}
}

func TestSelectBurstsOnceEveryUserHadItsFairPart(t *testing.T) {
	heads := []duework.Head{
		head("a", at(-3), 1, 2, 3, 4, 5),
		head("b", at(-2), 1),
		head("c", at(-1), 1, 2, 3),
	}
	cases := []struct {
		name     string
		lanes    []LaneCapacity
		global   int
		want     []string
		wantShed []string
	}{
		{"no burst: PerUserLimit holds", burstLane(1, 0, 10), 10,
			[]string{"free:a/k0", "free:b/k0", "free:c/k0"}, []string{"a", "c"}},
		{"burst equal to PerUserLimit is none", burstLane(1, 1, 10), 10,
			[]string{"free:a/k0", "free:b/k0", "free:c/k0"}, []string{"a", "c"}},
		{"the room left goes on in rounds to users with more work", burstLane(1, 3, 10), 10,
			[]string{"free:a/k0", "free:b/k0", "free:c/k0", "free:a/k1", "free:c/k1", "free:a/k2", "free:c/k2"}, []string{"a"}},
		{"PerCycleLimit ends the burst mid-round", burstLane(1, 3, 5), 10,
			[]string{"free:a/k0", "free:b/k0", "free:c/k0", "free:a/k1", "free:c/k1"}, []string{"a", "c"}},
		{"no burst while a fair part is cut", burstLane(1, 3, 2), 10,
			[]string{"free:a/k0", "free:b/k0"}, []string{"a", "c"}},
		{"the global limit cuts the burst", burstLane(1, 3, 10), 4,
			[]string{"free:a/k0", "free:b/k0", "free:c/k0", "free:a/k1"}, []string{"a", "c"}},
		{"fair parts of two items, then the burst", burstLane(2, 5, 20), 20,
			[]string{"free:a/k0", "free:b/k0", "free:c/k0", "free:a/k1", "free:c/k1", "free:a/k2", "free:c/k2", "free:a/k3", "free:a/k4"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sel := Select(SelectInput{Heads: heads, LaneOf: allIn("free", "a", "b", "c"), Lanes: c.lanes, GlobalBatchLimit: c.global})
			if diff := cmp.Diff(c.want, picks(sel)); diff != "" {
				t.Errorf("items (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.wantShed, sel.ShedUserIDs, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("shed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSelectScalesBurstsByWeight(t *testing.T) {
	// PerUserLimit 1, PerUserBurst 2: a of weight 2 has a fair part of 2 and may reach 4.
	in := SelectInput{
		Heads:            []duework.Head{weighted(head("a", at(-2), 1, 2, 3, 4, 5, 6), 2), head("b", at(-1), 1, 2, 3)},
		LaneOf:           allIn("free", "a", "b"),
		Lanes:            burstLane(1, 2, 10),
		GlobalBatchLimit: 10,
	}
	want := []string{"free:a/k0", "free:b/k0", "free:a/k1", "free:a/k2", "free:b/k1", "free:a/k3"}
	sel := Select(in)
	if diff := cmp.Diff(want, picks(sel)); diff != "" {
		t.Errorf("weighted burst (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "b"}, sel.ShedUserIDs); diff != "" {
		t.Errorf("shed (-want +got):\n%s", diff)
	}
}

func TestSelectGivesFairPartsTheGlobalLimitBeforeBursts(t *testing.T) {
	// pro's lone user could burst to 4, but free's fair parts come first; then what is left
	// goes to the bursts, highest lane first.
	heads := []duework.Head{
		head("p", at(-9), 1, 2, 3, 4),
		head("q", at(-8), 1, 2, 3, 4),
		head("f1", at(-5), 1, 2), head("f2", at(-4), 1, 2),
	}
	laneOf := map[string]Lane{"p": "pro", "q": "plus", "f1": "free", "f2": "free"}
	lanes := []LaneCapacity{
		{Lane: "pro", PerUserLimit: 1, PerUserBurst: 4, PerCycleLimit: 10},
		{Lane: "plus", PerUserLimit: 1, PerUserBurst: 4, PerCycleLimit: 10},
		{Lane: "free", PerUserLimit: 1, PerUserBurst: 2, PerCycleLimit: 10},
	}
	cases := []struct {
		global int
		want   []string
	}{
		{3, []string{"pro:p/k0", "plus:q/k0", "free:f1/k0"}},
		{4, []string{"pro:p/k0", "plus:q/k0", "free:f1/k0", "free:f2/k0"}},
		{6, []string{"pro:p/k0", "pro:p/k1", "pro:p/k2", "plus:q/k0", "free:f1/k0", "free:f2/k0"}},
		{9, []string{"pro:p/k0", "pro:p/k1", "pro:p/k2", "pro:p/k3", "plus:q/k0", "plus:q/k1", "plus:q/k2", "free:f1/k0", "free:f2/k0"}},
		{20, []string{"pro:p/k0", "pro:p/k1", "pro:p/k2", "pro:p/k3", "plus:q/k0", "plus:q/k1", "plus:q/k2", "plus:q/k3",
			"free:f1/k0", "free:f2/k0", "free:f1/k1", "free:f2/k1"}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint("global ", c.global), func(t *testing.T) {
			sel := Select(SelectInput{Heads: heads, LaneOf: laneOf, Lanes: lanes, GlobalBatchLimit: c.global})
			if diff := cmp.Diff(c.want, picks(sel)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSelectDoesNotShedAUserHeldBackByItsOwnLimits(t *testing.T) {
	lanes := []LaneCapacity{{Lane: "free", PerUserLimit: 3, PerCycleLimit: 10}}
	rated := head("rated", at(-4), 1) // a rate that allows one item now
	rated.Limits.Every, rated.More = time.Minute, true
	cases := []struct {
		name     string
		h        duework.Head
		perCycle int
		shed     bool
	}{
		{"cut by its cap, got all its Due", heldBy(head("u", at(-5), 1, 2), 2), 10, false},
		{"cut by its rate, got all its Due", rated, 10, false},
		{"cut by its cap and then by the lane", heldBy(head("u", at(-5), 1, 2), 2), 1, true},
		{"a cap, but Due as long as the read: More is the lane's cut", heldBy(head("u", at(-5), 1, 2, 3), 5), 10, true},
		{"no cap nor rate: More is the lane's cut", func() duework.Head { h := head("u", at(-5), 1); h.More = true; return h }(), 10, true},
		{"a weight raises the read", weighted(heldBy(head("u", at(-5), 1, 2, 3), 9), 2), 10, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lanes[0].PerCycleLimit = c.perCycle
			sel := Select(SelectInput{Heads: []duework.Head{c.h}, LaneOf: allIn("free", c.h.UserID), Lanes: lanes, GlobalBatchLimit: 10})
			if got := len(sel.ShedUserIDs) > 0; got != c.shed {
				t.Errorf("shed %v, want %v (items %v)", sel.ShedUserIDs, c.shed, picks(sel))
			}
		})
	}
}

// --- reference model ---

// modelSelectFlow is Select with weights, bursts and limits written the obvious way: one
// item at a time, round by round over sorted users for the fair parts, then for the
// bursts, then slot by slot across lanes, fair parts before bursts.
func modelSelectFlow(in SelectInput) Selection {
	laneIndex := func(name Lane) int {
		for i, lc := range in.Lanes {
			if lc.Lane == name {
				return i
			}
		}
		return -1
	}
	weight := func(h duework.Head) int { return min(max(h.Limits.Weight, 1), duework.MaxWeight) }
	type user struct {
		h   duework.Head
		due []duework.Entry
	}
	byLane := make([][]user, len(in.Lanes))
	var unrouted []duework.Head
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
			unrouted = append(unrouted, h)
			continue
		}
		byLane[li] = append(byLane[li], user{h, due})
	}

	fair := make([][]duework.Entry, len(in.Lanes))
	burst := make([][]duework.Entry, len(in.Lanes))
	for li, lc := range in.Lanes {
		users := byLane[li]
		sort.SliceStable(users, func(i, j int) bool {
			a, b := users[i], users[j]
			if !a.h.Turn.Equal(b.h.Turn) {
				return a.h.Turn.Before(b.h.Turn)
			}
			return a.h.UserID < b.h.UserID
		})
		fairCap := func(u user) int { return max(lc.PerUserLimit, 0) * weight(u.h) }
		burstCap := func(u user) int {
			if lc.PerUserLimit < 1 {
				return 0
			}
			return max(lc.PerUserBurst, lc.PerUserLimit) * weight(u.h)
		}
		got := make([]int, len(users))
		for round := 0; ; round++ {
			added := false
			for i, u := range users {
				if len(fair[li]) >= lc.PerCycleLimit {
					break
				}
				if round < len(u.due) && round < fairCap(u) {
					fair[li] = append(fair[li], u.due[round])
					got[i]++
					added = true
				}
			}
			if !added {
				break
			}
		}
		everyone := true
		for i, u := range users {
			if got[i] < min(len(u.due), fairCap(u)) {
				everyone = false
			}
		}
		for everyone {
			added := false
			for i, u := range users {
				if len(fair[li])+len(burst[li]) >= lc.PerCycleLimit {
					break
				}
				if got[i] < min(len(u.due), burstCap(u)) {
					burst[li] = append(burst[li], u.due[got[i]])
					got[i]++
					added = true
				}
			}
			if !added {
				break
			}
		}
	}

	takeFair := make([]int, len(in.Lanes))
	takeBurst := make([]int, len(in.Lanes))
	slots := in.GlobalBatchLimit
	for li, lc := range in.Lanes {
		for takeFair[li] < lc.MinShare && takeFair[li] < len(fair[li]) && slots > 0 {
			takeFair[li]++
			slots--
		}
	}
	for li := range in.Lanes {
		for takeFair[li] < len(fair[li]) && slots > 0 {
			takeFair[li]++
			slots--
		}
	}
	for li := range in.Lanes {
		for takeBurst[li] < len(burst[li]) && slots > 0 {
			takeBurst[li]++
			slots--
		}
	}

	var sel Selection
	got := map[string]int{}
	for li, lc := range in.Lanes {
		for _, e := range append(slices.Clone(fair[li][:takeFair[li]]), burst[li][:takeBurst[li]]...) {
			sel.Items = append(sel.Items, Selected{Entry: e, Lane: lc.Lane})
			got[e.UserID]++
		}
	}
	for _, h := range unrouted {
		if len(h.Due) > 0 || h.More {
			sel.ShedUserIDs = append(sel.ShedUserIDs, h.UserID)
		}
	}
	for li, lc := range in.Lanes {
		read := max(lc.PerUserLimit, lc.PerUserBurst)
		for _, u := range byLane[li] {
			h := u.h
			held := h.More && (h.Limits.MaxInFlight > 0 || h.Limits.Every > 0) && len(h.Due) < read*weight(h)
			if got[h.UserID] < len(h.Due) || (h.More && !held) {
				sel.ShedUserIDs = append(sel.ShedUserIDs, h.UserID)
			}
		}
	}
	sort.Strings(sel.ShedUserIDs)
	return sel
}

// --- generators ---

// genFlowLanes draws lanes as genLanes does, each with a burst in three.
func genFlowLanes(t *rapid.T, global int) []LaneCapacity {
	lanes := genLanes(t, global)
	for i := range lanes {
		if rapid.IntRange(0, 2).Draw(t, "hasBurst") == 0 {
			lanes[i].PerUserBurst = lanes[i].PerUserLimit + rapid.IntRange(0, 4).Draw(t, "burstAbove")
		}
	}
	return lanes
}

// genLimits draws a user's limits: mostly zero, else a weight, a cap or a rate.
func genLimits(t *rapid.T) duework.Limits {
	var l duework.Limits
	if rapid.IntRange(0, 2).Draw(t, "weighted") == 0 {
		l.Weight = rapid.IntRange(0, 5).Draw(t, "weight")
	}
	switch rapid.IntRange(0, 3).Draw(t, "limit") {
	case 0:
		l.MaxInFlight = rapid.IntRange(1, 4).Draw(t, "maxInFlight")
	case 1:
		l.Every, l.Burst = time.Minute, rapid.IntRange(0, 3).Draw(t, "burst")
	}
	return l
}

// genFlowSelectInput draws a routing with bursts and, for each user, limits, a backlog and
// a Turn, as each lane's Ready would return them: up to max(PerUserLimit, PerUserBurst) ×
// weight entries, fewer when the user's cap or rate allows fewer now (then More).
func genFlowSelectInput(t *rapid.T) SelectInput {
	r := genRouting(t)
	r.lanes = genFlowLanes(t, r.global)
	in := SelectInput{Lanes: r.lanes, GlobalBatchLimit: r.global, LaneOf: r.laneOf}
	for _, id := range r.users {
		h := duework.Head{UserID: id, Turn: at(-60 * rapid.IntRange(0, 5).Draw(t, "turn")), Limits: genLimits(t)}
		read := 1
		for _, lc := range r.lanes {
			if lc.Lane == r.laneOf[id] {
				read = max(lc.PerUserLimit, lc.PerUserBurst)
			}
		}
		n := read * h.Limits.EffectiveWeight()
		if h.Limits.MaxInFlight > 0 || h.Limits.Every > 0 {
			n = min(n, rapid.IntRange(1, n+2).Draw(t, "allowed"))
		}
		backlog := rapid.IntRange(1, 12).Draw(t, "backlog")
		for k := range min(backlog, n) {
			h.Due = append(h.Due, ent(id, fmt.Sprintf("w%02d", k), rapid.IntRange(-30, 0).Draw(t, "due")))
		}
		slices.SortFunc(h.Due, compareEntries)
		h.More = backlog > len(h.Due)
		in.Heads = append(in.Heads, h)
	}
	return in
}

func TestSelectMatchesFlowModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genFlowSelectInput(t)
		if diff := cmp.Diff(modelSelectFlow(in), Select(in), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("Select differs from the reference model (-model +Select):\n%s", diff)
		}
		checkFlowSelection(t, in, Select(in))
	})
}

func TestSelectMatchesFlowModelOddInput(t *testing.T) {
	// Weights out of range, bursts below PerUserLimit, negative limits, empty heads, More
	// anywhere: Select still does what its doc says, as the model does.
	rapid.Check(t, func(t *rapid.T) {
		in := SelectInput{LaneOf: map[string]Lane{}, GlobalBatchLimit: rapid.IntRange(-1, 30).Draw(t, "global")}
		for range rapid.IntRange(0, 4).Draw(t, "lanes") {
			in.Lanes = append(in.Lanes, LaneCapacity{
				Lane:          rapid.SampledFrom(laneNames[:3]).Draw(t, "lane"),
				PerUserLimit:  rapid.IntRange(-1, 4).Draw(t, "perUser"),
				PerUserBurst:  rapid.IntRange(-1, 6).Draw(t, "perUserBurst"),
				PerCycleLimit: rapid.IntRange(-1, 20).Draw(t, "perCycle"),
				MinShare:      rapid.IntRange(-2, 20).Draw(t, "minShare"),
			})
		}
		for u := range rapid.IntRange(0, 40).Draw(t, "users") {
			id := fmt.Sprintf("u%02d", u)
			h := duework.Head{UserID: id, More: rapid.Bool().Draw(t, "more"), Turn: at(-rapid.IntRange(0, 3).Draw(t, "turn"))}
			h.Limits = duework.Limits{
				Weight:      rapid.SampledFrom([]int{-1, 0, 1, 2, 3, duework.MaxWeight + 1}).Draw(t, "weight"),
				MaxInFlight: rapid.IntRange(-1, 2).Draw(t, "maxInFlight"),
				Every:       time.Duration(rapid.IntRange(-1, 1).Draw(t, "every")),
			}
			for k := range rapid.IntRange(0, 7).Draw(t, "due") {
				h.Due = append(h.Due, ent(id, fmt.Sprintf("w%d", rapid.IntRange(0, 9).Draw(t, "key")*10+k), rapid.IntRange(-3, 0).Draw(t, "dueAt")))
			}
			in.LaneOf[id] = rapid.SampledFrom(laneNames).Draw(t, "laneOf")
			in.Heads = append(in.Heads, h)
		}
		in.Heads = rapid.Permutation(in.Heads).Draw(t, "order")
		if diff := cmp.Diff(modelSelectFlow(in), Select(in), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("Select differs from the reference model (-model +Select):\n%s", diff)
		}
	})
}

// unitFlow draws, over in, what leaves today's rules in force: every weight 0 or 1, zero
// limits otherwise, and every burst 0 or PerUserLimit.
func unitFlow(t *rapid.T, in SelectInput) SelectInput {
	in.Lanes = slices.Clone(in.Lanes)
	for i := range in.Lanes {
		if rapid.Bool().Draw(t, "burstIsLimit") {
			in.Lanes[i].PerUserBurst = in.Lanes[i].PerUserLimit
		}
	}
	in.Heads = slices.Clone(in.Heads)
	for i := range in.Heads {
		in.Heads[i].Limits = duework.Limits{Weight: rapid.IntRange(0, 1).Draw(t, "weight")}
	}
	return in
}

func TestSelectWithUnitWeightsIsTodaysSelection(t *testing.T) {
	// With every weight 1, no caps or rates and no bursts, every selection is exactly the
	// plain round robin of modelSelect, on well-formed and on odd input alike.
	t.Run("well-formed", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			in := unitFlow(t, genSelectInput(t))
			if diff := cmp.Diff(modelSelect(in), Select(in), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("Select differs from the round-robin model (-model +Select):\n%s", diff)
			}
		})
	})
	t.Run("odd", func(t *testing.T) {
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
				h := duework.Head{UserID: id, More: rapid.Bool().Draw(t, "more"), Turn: at(-rapid.IntRange(0, 3).Draw(t, "turn"))}
				for k := range rapid.IntRange(0, 5).Draw(t, "due") {
					h.Due = append(h.Due, ent(id, fmt.Sprintf("w%d", k), rapid.IntRange(-3, 0).Draw(t, "dueAt")))
				}
				in.LaneOf[id] = rapid.SampledFrom(laneNames).Draw(t, "laneOf")
				in.Heads = append(in.Heads, h)
			}
			in = unitFlow(t, in)
			if diff := cmp.Diff(modelSelect(in), Select(in), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("Select differs from the round-robin model (-model +Select):\n%s", diff)
			}
		})
	})
}

// checkFlowSelection checks the weight and burst rules stated directly, without the
// model: caps scaled by weight, bursts only once every fair part is whole and only with
// global slots no fair part wanted, rounds inside the burst, a full batch when lanes could
// use it, and the shedding rule for users held back by their own limits.
func checkFlowSelection(t interface{ Errorf(string, ...any) }, in SelectInput, sel Selection) {
	laneIdx := map[Lane]int{}
	for i, lc := range in.Lanes {
		if _, dup := laneIdx[lc.Lane]; !dup {
			laneIdx[lc.Lane] = i
		}
	}
	got := map[string]int{}
	perLane := make([]int, len(in.Lanes))
	for _, it := range sel.Items {
		got[it.Entry.UserID]++
		perLane[laneIdx[it.Lane]]++
	}
	type user struct {
		h                 duework.Head
		fairWant, allWant int
	}
	users := make([][]user, len(in.Lanes))
	for _, h := range in.Heads {
		li, ok := laneIdx[in.LaneOf[h.UserID]]
		if !ok {
			continue
		}
		lc, w := in.Lanes[li], h.Limits.EffectiveWeight()
		u := user{h: h, fairWant: min(len(h.Due), lc.PerUserLimit*w), allWant: min(len(h.Due), max(lc.PerUserBurst, lc.PerUserLimit)*w)}
		if got[h.UserID] > u.allWant {
			t.Errorf("%s got %d, above its burst cap %d", h.UserID, got[h.UserID], u.allWant)
		}
		users[li] = append(users[li], u)
	}
	fairAll, bursting := true, false
	could := 0
	for li, us := range users {
		lc := in.Lanes[li]
		fairSum, allSum, whole := 0, 0, true
		for _, u := range us {
			fairSum += u.fairWant
			allSum += u.allWant
			if got[u.h.UserID] < u.fairWant {
				whole = false
			}
		}
		could += min(allSum, lc.PerCycleLimit)
		if perLane[li] < min(fairSum, lc.PerCycleLimit) {
			fairAll = false
		}
		for _, u := range us {
			if got[u.h.UserID] > u.fairWant {
				bursting = true
				if !whole {
					t.Errorf("lane %s: %s bursts to %d while a user has not had its fair part", lc.Lane, u.h.UserID, got[u.h.UserID])
				}
			}
		}
		// Rounds inside the burst: a user that wanted more extra items never has two
		// fewer than another, nor fewer than a user after it in turn order.
		for _, u := range us {
			extraU := got[u.h.UserID] - u.fairWant
			if extraU < 0 || got[u.h.UserID] >= u.allWant {
				continue
			}
			for _, v := range us {
				extraV := got[v.h.UserID] - v.fairWant
				if extraV > extraU+1 || (extraV > extraU && compareTurns(v.h, u.h) > 0) {
					t.Errorf("lane %s: %s has %d extra items while %s, which wanted more, has %d", lc.Lane, v.h.UserID, extraV, u.h.UserID, extraU)
				}
			}
		}
	}
	if bursting && !fairAll {
		t.Errorf("a lane bursts while another lane's fair part is cut")
	}
	if len(sel.Items) < min(could, in.GlobalBatchLimit) {
		t.Errorf("%d items, but the lanes could use %d of %d", len(sel.Items), could, in.GlobalBatchLimit)
	}
	var want []string
	for _, h := range in.Heads {
		li, routed := laneIdx[in.LaneOf[h.UserID]]
		if !routed {
			if len(h.Due) > 0 || h.More {
				want = append(want, h.UserID)
			}
			continue
		}
		lc := in.Lanes[li]
		held := h.More && (h.Limits.MaxInFlight > 0 || h.Limits.Every > 0) &&
			len(h.Due) < max(lc.PerUserLimit, lc.PerUserBurst)*h.Limits.EffectiveWeight()
		if got[h.UserID] < len(h.Due) || (h.More && !held) {
			want = append(want, h.UserID)
		}
	}
	slices.Sort(want)
	if !slices.Equal(want, sel.ShedUserIDs) {
		t.Errorf("ShedUserIDs %v, want %v", sel.ShedUserIDs, want)
	}
}

func TestCheckFlowSelectionCatchesBrokenRules(t *testing.T) {
	in := SelectInput{
		Heads:            []duework.Head{head("a", at(-2), 1, 2, 3), head("b", at(-1), 1, 2, 3), heldBy(head("c", at(0), 1), 1)},
		LaneOf:           allIn("free", "a", "b", "c"),
		Lanes:            burstLane(1, 3, 5),
		GlobalBatchLimit: 5,
	}
	good := Select(in)
	r := &recorder{}
	if checkFlowSelection(r, in, good); len(r.msgs) > 0 {
		t.Fatalf("good selection flagged: %v", r.msgs)
	}
	pick := func(user string, k int) Selected {
		return Selected{Entry: in.Heads[map[string]int{"a": 0, "b": 1, "c": 2}[user]].Due[k], Lane: "free"}
	}
	broken := map[string]Selection{
		"burst before a fair part": {Items: []Selected{pick("a", 0), pick("a", 1), pick("b", 0), pick("b", 1)}, ShedUserIDs: []string{"a", "b", "c"}},
		"burst out of rounds":      {Items: []Selected{pick("a", 0), pick("b", 0), pick("c", 0), pick("a", 1), pick("a", 2)}, ShedUserIDs: []string{"b"}},
		"held-back user shed":      {Items: good.Items, ShedUserIDs: []string{"a", "b", "c"}},
		"room left unused":         {Items: good.Items[:3], ShedUserIDs: []string{"a", "b"}},
	}
	for name, sel := range broken {
		r := &recorder{}
		checkFlowSelection(r, in, sel)
		if len(r.msgs) == 0 {
			t.Errorf("%s: checker found nothing wrong with %v", name, picks(sel))
		}
	}
}
