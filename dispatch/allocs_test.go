package dispatch

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/rotaworks/rota/duework"
)

// fixedIndex serves the same pages at every Ready and claims every key but the lost ones,
// from slices built once: its calls allocate nothing, so AllocsPerRun over a Dispatch on it
// counts the Dispatcher's own allocations and nothing else.
type fixedIndex struct {
	duework.Index // nil: only the dispatcher's calls are made
	pages         map[string][]duework.Head
	claims        []duework.Claim
}

func (x *fixedIndex) Groups(context.Context, time.Time) ([]string, error) { return nil, nil }

func (x *fixedIndex) Ready(_ context.Context, q duework.ReadyQuery) (duework.ReadyPage, error) {
	heads := x.pages[q.Group]
	page := duework.ReadyPage{Heads: heads[:min(q.Users, len(heads))]}
	if q.Users < len(heads) {
		page.Next = heads[q.Users].Turn
	}
	return page, nil
}

func (x *fixedIndex) Route(context.Context, []duework.Route) error { return nil }

func (x *fixedIndex) Release(context.Context, []string, time.Time) error { return nil }

func (x *fixedIndex) Claim(context.Context, []duework.Key, time.Time, time.Time) ([]duework.Claim, error) {
	return x.claims, nil
}

// allocScenario is a cycle through Dispatch's main paths: two lanes, users shed by their
// cap and by the lane's limit, users read and cut, and one lost claim. No LaneFor fails:
// the reason is built with fmt.Errorf, whose sync.Pool the race detector empties at random,
// and the count must be exact under -race too. It returns the Config, without an Observer,
// the index, and the lane of every user.
func allocScenario(t rapid.TB) (Config, *fixedIndex, map[string]Lane) {
	t.Helper()
	x := &fixedIndex{pages: map[string][]duework.Head{}}
	laneOf := map[string]Lane{}
	for u := range 12 {
		user := fmt.Sprintf("u%02d", u)
		h := duework.Head{UserID: user, Turn: at(-100 + u)}
		for k := range 3 {
			h.Due = append(h.Due, ent(user, fmt.Sprintf("k%d", k), -100+u*3+k))
		}
		h.More = u == 0
		lane := Lane("free")
		if u < 4 {
			lane = "pro"
		}
		laneOf[user] = lane
		x.pages[string(lane)] = append(x.pages[string(lane)], h)
	}
	cfg := Config{
		Lanes: []LaneCapacity{
			{Lane: "pro", PerUserLimit: 3, PerCycleLimit: 8},
			{Lane: "free", PerUserLimit: 1, PerCycleLimit: 4, MinShare: 3},
		},
		GlobalBatchLimit: 10,
		LaneFor:          func(_ context.Context, user string) (Lane, error) { return laneOf[user], nil },
		ClaimFor:         time.Minute,
	}
	// Claim everything the cycle chooses but the first pick.
	for i, s := range Select(x.selectInput(cfg, laneOf)).Items {
		if i > 0 {
			x.claims = append(x.claims, duework.Claim{Entry: s.Entry, Token: uint64(i), Until: t0.Add(time.Minute)})
		}
	}
	return cfg, x, laneOf
}

// selectInput is what a Dispatcher's reads of x under cfg give Select.
func (x *fixedIndex) selectInput(cfg Config, laneOf map[string]Lane) SelectInput {
	in := SelectInput{LaneOf: laneOf, Lanes: cfg.Lanes, GlobalBatchLimit: cfg.GlobalBatchLimit}
	filled := 0
	for _, lc := range cfg.Lanes {
		n := min(lc.PerCycleLimit, max(lc.MinShare, cfg.GlobalBatchLimit-filled))
		page, _ := x.Ready(context.Background(), duework.ReadyQuery{Group: string(lc.Lane), Users: max(n, 1)})
		if n > 0 {
			in.Heads = append(in.Heads, page.Heads...)
			filled += fairLen(page.Heads, capsOf(lc), min(lc.PerCycleLimit, cfg.GlobalBatchLimit))
		}
	}
	return in
}

// dispatchAllocs is the number of allocations of one Dispatch of allocScenario under cfg.
func dispatchAllocs(t testing.TB, cfg Config, x *fixedIndex) float64 {
	t.Helper()
	d, err := New(x, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return testing.AllocsPerRun(50, func() {
		if _, err := d.Dispatch(context.Background(), t0); err != nil {
			t.Fatal(err)
		}
	})
}

// dispatchAllocsPin is what one Dispatch of allocScenario allocates, with or without an
// Observer: only what its Batch holds — the items, the lane reports, the shed users (sized
// exactly) and the lanes' Overdue (one backing array for every lane). Its working memory
// (the reads' per-lane slices, Select's orders, picks and counts, the claims' keys) is
// reused from cycle to cycle.
const dispatchAllocsPin = 4

func TestDispatchAllocatesAFixedCountPerCycle(t *testing.T) {
	cfg, x, _ := allocScenario(t)
	if got := dispatchAllocs(t, cfg, x); got != dispatchAllocsPin {
		t.Errorf("Dispatch allocates %v times per cycle, want exactly %v (update the pin if the change is intended)", got, float64(dispatchAllocsPin))
	}
	var n int
	cfg.Observer = countCycles{&n}
	if got := dispatchAllocs(t, cfg, x); got != dispatchAllocsPin {
		t.Errorf("Dispatch with an Observer allocates %v times per cycle, want %v: observing costs nothing", got, float64(dispatchAllocsPin))
	}
	if n == 0 {
		t.Error("the observer was never called")
	}
}

// TestDispatchOverMemoryAllocatesItsBatch pins that a Dispatch over duework.Memory
// allocates what its Batch holds and nothing per user read or entry claimed: its reads and
// claims go into the memory the Dispatcher kept from its last cycle, and the items are one
// allocation.
func TestDispatchOverMemoryAllocatesItsBatch(t *testing.T) {
	allocs := func(users int) float64 {
		idx := duework.NewMemory()
		for u := range users {
			user := fmt.Sprintf("u%04d", u)
			schedule(t, idx, ent(user, "a", -2), ent(user, "b", -1))
		}
		d := mustNew(t, idx, Config{
			Lanes:            []LaneCapacity{{Lane: "all", PerUserLimit: 1, PerCycleLimit: users}},
			GlobalBatchLimit: users,
			LaneFor:          func(context.Context, string) (Lane, error) { return "all", nil },
			ClaimFor:         time.Minute,
		})
		now := t0
		return testing.AllocsPerRun(20, func() {
			now = now.Add(time.Hour) // past the last run's claims
			b, err := d.Dispatch(context.Background(), now)
			if err != nil || len(b.Items) != users {
				t.Fatalf("Dispatch: %d items, %v; want %d", len(b.Items), err, users)
			}
		})
	}
	// The items, the lane reports, the shed users (each has a second entry) and the lane's
	// Overdue, and the list of groups that Index.Groups returns to the routing step.
	for _, users := range []int{10, 1000} {
		if got := allocs(users); got != 5 {
			t.Errorf("Dispatch over Memory of %d users allocates %v times per cycle, want 5", users, got)
		}
	}
}

// TestDispatchPairsEachChosenKeyWithItsClaim pins how Dispatch pairs claims with the
// chosen items whatever Claim returns: each item is a claim of its chosen key, no claim is
// handed out twice, every chosen key is dispatched or counted lost, and a conforming answer
// (the claimed keys' claims, in the order of keys) is paired exactly. Claims out of order,
// repeated or foreign, and a head that repeats an entry, break the Index contract and must
// still hand out nothing wrong.
func TestDispatchPairsEachChosenKeyWithItsClaim(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg, x, laneOf := allocScenario(rt)
		conforming := true
		if rapid.Bool().Draw(rt, "repeat an entry") {
			lane := rapid.SampledFrom([]string{"pro", "free"}).Draw(rt, "lane")
			h := &x.pages[lane][rapid.IntRange(0, len(x.pages[lane])-1).Draw(rt, "head")]
			h.Due = append(slices.Clone(h.Due[:1]), h.Due[:2]...)
			conforming = false
		}
		sel := Select(x.selectInput(cfg, laneOf))
		var pool []duework.Claim
		for i, s := range sel.Items {
			pool = append(pool, duework.Claim{Entry: s.Entry, Token: uint64(i + 1), Until: t0.Add(time.Minute)})
		}
		x.claims = nil
		var want []Item
		for i, c := range pool {
			if rapid.Bool().Draw(rt, "claimed") {
				x.claims = append(x.claims, c)
				want = append(want, Item{Claim: c, Lane: sel.Items[i].Lane})
			}
		}
		if rapid.Bool().Draw(rt, "foreign claim") {
			x.claims = append(x.claims, duework.Claim{Entry: ent("stranger", "s", 0), Token: 99})
			conforming = false
		}
		if len(x.claims) > 0 && rapid.Bool().Draw(rt, "claim twice") {
			c := x.claims[rapid.IntRange(0, len(x.claims)-1).Draw(rt, "twice")]
			c.Token += 100
			x.claims = append(x.claims, c)
			conforming = false
		}
		if rapid.Bool().Draw(rt, "shuffle") {
			x.claims = rapid.Permutation(x.claims).Draw(rt, "order")
			conforming = false
		}

		got := mustDispatch(rt, mustNew(rt, x, cfg), t0)
		if conforming {
			if diff := cmp.Diff(want, got.Items, cmpopts.EquateEmpty()); diff != "" {
				rt.Fatalf("items differ from the claims returned (-want +got):\n%s", diff)
			}
		}
		used := map[duework.Claim]bool{}
		chosen := map[Lane]map[duework.Key]int{}
		for _, s := range sel.Items {
			if chosen[s.Lane] == nil {
				chosen[s.Lane] = map[duework.Key]int{}
			}
			chosen[s.Lane][s.Entry.Key()]++
		}
		for _, it := range got.Items {
			if used[it.Claim] || !slices.Contains(x.claims, it.Claim) || chosen[it.Lane][it.Claim.Entry.Key()] == 0 {
				rt.Fatalf("item %+v: not a claim of a key chosen in its lane, or handed out twice", it)
			}
			used[it.Claim] = true
		}
		for _, l := range got.Lanes {
			n := 0
			for _, c := range chosen[l.Lane] {
				n += c
			}
			if l.Dispatched+l.LostClaims != n {
				rt.Fatalf("lane %s: %d dispatched and %d lost of %d chosen", l.Lane, l.Dispatched, l.LostClaims, n)
			}
		}
		if diff := cmp.Diff(sel.ShedUserIDs, got.ShedUserIDs, cmpopts.EquateEmpty()); diff != "" {
			rt.Fatalf("shed differs from Select's (-Select +Dispatch):\n%s", diff)
		}
	})
}

func TestDispatchAllocationsDoNotFollowBacklog(t *testing.T) {
	// Speed lives in BenchmarkDispatchNoisyBacklog; allocations are counts, so they can be
	// pinned here: a cycle over duework.Memory allocates as often and as many bytes whether
	// the noisy user's due backlog is 100 or 20,000 entries deep.
	measure := func(depth int) (allocs, bytes float64) {
		idx := duework.NewMemory()
		schedule(t, idx, backlog("noisy", depth, -1_000_000)...)
		users := []string{"noisy"}
		for u := range 200 {
			users = append(users, fmt.Sprintf("u%03d", u))
			schedule(t, idx, ent(users[len(users)-1], "feed", -u))
		}
		route(t, idx, "free", users...)
		d := mustNew(t, idx, oneLaneConfig(3, 150, 150))
		now := t0
		cycle := func() {
			now = now.Add(2 * time.Minute) // the previous cycle's claims have ended
			mustDispatch(t, d, now)
		}
		allocs = testing.AllocsPerRun(20, cycle)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 20 {
			cycle()
		}
		runtime.ReadMemStats(&after)
		return allocs, float64(after.TotalAlloc-before.TotalAlloc) / 20
	}
	shallowN, shallowB := measure(100)
	deepN, deepB := measure(20_000)
	t.Logf("per cycle: backlog 100: %.0f allocations, %.0f bytes; backlog 20,000: %.0f allocations, %.0f bytes", shallowN, shallowB, deepN, deepB)
	if deepN > shallowN*1.05+10 || deepB > shallowB*1.1+4096 {
		t.Errorf("a cycle allocates more with a deeper backlog: %.0f allocations and %.0f bytes at 20,000, %.0f and %.0f at 100",
			deepN, deepB, shallowN, shallowB)
	}
}

// countCycles is an Observer that counts the cycles it hears of.
type countCycles struct{ n *int }

func (c countCycles) ObserveDispatch(CycleInfo) { *c.n++ }
