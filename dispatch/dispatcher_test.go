package dispatch

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/rotaworks/rota/duework"
)

// laneMap resolves users through a fixed map; users missing from it are an error.
func laneMap(m map[string]Lane) LaneFor {
	return func(_ context.Context, user string) (Lane, error) {
		if lane, ok := m[user]; ok {
			return lane, nil
		}
		return "", fmt.Errorf("no plan for %q", user)
	}
}

func mustNew(t rapid.TB, idx duework.Index, cfg Config) *Dispatcher {
	t.Helper()
	d, err := New(idx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustDispatch(t rapid.TB, d *Dispatcher, now time.Time) Batch {
	t.Helper()
	b, err := d.Dispatch(context.Background(), now)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// itemPicks renders a batch's items as "lane:user/key".
func itemPicks(b Batch) []string {
	out := make([]string, 0, len(b.Items))
	for _, it := range b.Items {
		out = append(out, fmt.Sprintf("%s:%s/%s", it.Lane, it.Claim.Entry.UserID, it.Claim.Entry.WorkKey))
	}
	return out
}

// backlog returns n entries of user, keyed k000…, due one second apart from first.
func backlog(user string, n, first int) []duework.Entry {
	out := make([]duework.Entry, n)
	for i := range out {
		out[i] = ent(user, fmt.Sprintf("k%03d", i), first+i)
	}
	return out
}

// allDue returns every unclaimed entry due at now, in the ordering contract's order.
func allDue(t rapid.TB, idx duework.Index, now time.Time) []duework.Entry {
	t.Helper()
	es, err := idx.DueBefore(context.Background(), now, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func twoLanes() Config {
	return Config{
		Lanes: []LaneCapacity{
			{Lane: "pro", PerUserLimit: 2, PerCycleLimit: 3},
			{Lane: "free", PerUserLimit: 1, PerCycleLimit: 5},
		},
		GlobalBatchLimit: 4,
		LaneFor:          laneMap(map[string]Lane{"noisy": "pro", "carol": "pro", "quiet": "free", "later": "free"}),
		ClaimFor:         time.Minute,
	}
}

func TestDispatchCycle(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := newIndex()
		schedule(t, idx, backlog("noisy", 10, -100)...)
		schedule(t, idx, ent("carol", "c", -5), ent("quiet", "q", -1), ent("later", "l", 100))
		d := mustNew(t, idx, twoLanes())

		b := mustDispatch(t, d, t0)
		want := Batch{
			Items:       nil, // checked through itemPicks
			ShedUserIDs: []string{"noisy"},
			Lanes: []LaneReport{
				{Lane: "pro", Users: 2, Dispatched: 3, Shed: 1},
				{Lane: "free", Users: 1, Dispatched: 1},
			},
		}
		if diff := cmp.Diff([]string{"pro:noisy/k000", "pro:carol/c", "pro:noisy/k001", "free:quiet/q"}, itemPicks(b)); diff != "" {
			t.Errorf("items (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, b, cmpopts.IgnoreFields(Batch{}, "Items"), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("batch (-want +got):\n%s", diff)
		}
		for _, it := range b.Items {
			if !it.Claim.Until.Equal(t0.Add(time.Minute)) {
				t.Errorf("rule 6: %v claimed until %v, want now + ClaimFor", it.Claim.Entry.Key(), it.Claim.Until)
			}
		}

		// While the claims last, the next cycle hands out only the rest.
		b = mustDispatch(t, d, t0.Add(time.Second))
		if diff := cmp.Diff([]string{"pro:noisy/k002", "pro:noisy/k003"}, itemPicks(b)); diff != "" {
			t.Errorf("second cycle (-want +got):\n%s", diff)
		}
		// Once they end, unfinished work is due again: nothing was lost.
		due := allDue(t, idx, t0.Add(90*time.Second))
		if len(due) != 12 {
			t.Errorf("after the claims ended %d entries are due, want 12", len(due))
		}
	})
}

func TestDispatchNothingDue(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := &hookIndex{Index: newIndex()}
		schedule(t, idx, ent("quiet", "q", 100))
		b := mustDispatch(t, mustNew(t, idx, twoLanes()), t0)
		if len(b.Items)+len(b.ShedUserIDs)+len(b.Unrouted) != 0 || len(b.Lanes) != 2 {
			t.Errorf("empty cycle: %+v", b)
		}
		if len(idx.claims) != 0 {
			t.Errorf("Claim called with nothing selected: %v", idx.claims)
		}
	})
}

func TestDispatchRule1StarvationBound(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		checkStarvationBound(t, newIndex(), 10, 3, 2, 2)
	})
}

func TestDispatchRule1StarvationBoundProperty(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		rapid.Check(t, func(rt *rapid.T) {
			users := rapid.IntRange(1, 40).Draw(rt, "users")
			limit := rapid.IntRange(1, 12).Draw(rt, "perCycle")
			perUser := rapid.IntRange(1, 3).Draw(rt, "perUser")
			depth := rapid.IntRange(1, 2).Draw(rt, "depth")
			checkStarvationBound(rt, newIndex(), users, limit, perUser, depth)
		})
	})
}

// checkStarvationBound keeps users users (one of them, "noisy", with a backlog a thousand
// times deeper and older than the others' depth entries) continuously due in one lane of
// per-cycle limit limit: each cycle's items are completed due again before the next cycle.
// Every user must be served in every window of ceil(users/limit) consecutive cycles.
func checkStarvationBound(t rapid.TB, idx duework.Index, users, limit, perUser, depth int) {
	ctx := context.Background()
	names := []string{"noisy"}
	schedule(t, idx, backlog("noisy", 1000*depth, -1_000_000)...)
	for u := 1; u < users; u++ {
		name := fmt.Sprintf("u%02d", u)
		names = append(names, name)
		schedule(t, idx, backlog(name, depth, -u)...)
	}
	d := mustNew(t, idx, Config{
		Lanes:            []LaneCapacity{{Lane: "free", PerUserLimit: perUser, PerCycleLimit: limit}},
		GlobalBatchLimit: 1000,
		LaneFor:          func(context.Context, string) (Lane, error) { return "free", nil },
		ClaimFor:         30 * time.Second,
	})
	bound := (users + limit - 1) / limit
	cycles := 3*bound + 2
	lastServed := map[string]int{} // cycle index; absent: never
	for c := range cycles {
		now := t0.Add(time.Duration(c) * time.Minute)
		b := mustDispatch(t, d, now)
		for _, it := range b.Items {
			lastServed[it.Claim.Entry.UserID] = c
			next := it.Claim.Entry
			next.DueAt = now.Add(time.Second) // due again by the next cycle
			next.LastRunAt = now
			if err := idx.Complete(ctx, tenant(t, next.UserID), it.Claim, next); err != nil {
				t.Fatal(err)
			}
		}
		for _, u := range names {
			since, ok := lastServed[u]
			if !ok {
				since = -1
			}
			if c-since >= bound {
				t.Fatalf("rule 1: cycle %d: %s last served in cycle %d, bound is %d cycles (%d users, per-cycle limit %d)",
					c, u, since, bound, users, limit)
			}
		}
	}
}

func TestDispatchRule5Unrouted(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		errNoPlan := errors.New("entitlements down")
		lanes := map[string]Lane{"a": "pro", "b": "free", "c": "free", "gold": "gold"}
		cfg := twoLanes()
		cfg.LaneFor = func(_ context.Context, user string) (Lane, error) {
			if user == "broken" {
				return "", errNoPlan
			}
			return lanes[user], nil
		}
		build := func(withUnrouted bool) duework.Index {
			idx := newIndex()
			schedule(t, idx, backlog("a", 3, -10)...)
			schedule(t, idx, ent("b", "k", -9), ent("c", "k", -8))
			if withUnrouted {
				schedule(t, idx, backlog("broken", 2, -50)...)
				schedule(t, idx, ent("gold", "k", -60))
			}
			return idx
		}
		idx := build(true)
		b := mustDispatch(t, mustNew(t, idx, cfg), t0)
		if len(b.Unrouted) != 2 || b.Unrouted[0].UserID != "broken" || b.Unrouted[1].UserID != "gold" {
			t.Fatalf("rule 5: Unrouted %v, want broken and gold in UserID order", b.Unrouted)
		}
		if !errors.Is(b.Unrouted[0].Err, errNoPlan) {
			t.Errorf("rule 5: broken's reason %v does not wrap the LaneFor error", b.Unrouted[0].Err)
		}
		if !errors.Is(b.Unrouted[1].Err, ErrUnknownLane) {
			t.Errorf("rule 5: gold's reason %v is not ErrUnknownLane", b.Unrouted[1].Err)
		}
		if !slices.Contains(b.ShedUserIDs, "broken") || !slices.Contains(b.ShedUserIDs, "gold") {
			t.Errorf("rule 4: unrouted users not shed: %v", b.ShedUserIDs)
		}
		var stillDue []string
		for _, e := range allDue(t, idx, t0) {
			if e.UserID == "broken" || e.UserID == "gold" {
				stillDue = append(stillDue, e.Key().UserID+"/"+e.WorkKey)
			}
		}
		if diff := cmp.Diff([]string{"gold/k", "broken/k000", "broken/k001"}, stillDue); diff != "" {
			t.Errorf("rule 5: unrouted work not due (-want +got):\n%s", diff)
		}
		// Everyone else is dispatched exactly as if the unrouted users did not exist.
		plain := mustDispatch(t, mustNew(t, build(false), cfg), t0)
		if diff := cmp.Diff(itemPicks(plain), itemPicks(b)); diff != "" {
			t.Errorf("rule 5: routed users' batch changed (-without +with unrouted):\n%s", diff)
		}
	})
}

func TestDispatchRule6LostClaims(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := &hookIndex{Index: newIndex()}
		schedule(t, idx, ent("a", "k", -3), ent("b", "k", -2), ent("c", "k", -1))
		// Another dispatcher claims b's entry between our DueHeads and our Claim.
		idx.beforeClaim = func(keys []duework.Key) {
			if _, err := idx.Index.Claim(context.Background(), []duework.Key{{UserID: "b", WorkKey: "k"}}, t0, t0.Add(time.Hour)); err != nil {
				t.Error(err)
			}
		}
		d := mustNew(t, idx, Config{
			Lanes:            []LaneCapacity{{Lane: "free", PerUserLimit: 1, PerCycleLimit: 2}},
			GlobalBatchLimit: 10,
			LaneFor:          func(context.Context, string) (Lane, error) { return "free", nil },
			ClaimFor:         time.Minute,
		})
		b := mustDispatch(t, d, t0)
		if diff := cmp.Diff([]string{"free:a/k"}, itemPicks(b)); diff != "" {
			t.Errorf("rule 6: a lost claim is not refilled (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]LaneReport{{Lane: "free", Users: 3, Dispatched: 1, Shed: 1, LostClaims: 1}}, b.Lanes); diff != "" {
			t.Errorf("rule 6: lane report (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"c"}, b.ShedUserIDs); diff != "" {
			t.Errorf("rule 6: a lost claim does not shed its user (-want +got):\n%s", diff)
		}
	})
}

func TestDispatchRule6ConcurrentDispatchers(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		rapid.Check(t, func(rt *rapid.T) {
			idx := newIndex()
			pop := genPopulation(rt)
			pop.load(rt, idx)
			cfg := pop.config(rt)
			cfg.ClaimFor = time.Duration(rapid.IntRange(1, 5).Draw(rt, "claimMinutes")) * time.Minute
			ds := []*Dispatcher{mustNew(rt, idx, cfg), mustNew(rt, idx, cfg)}

			type handout struct {
				now   time.Time
				claim duework.Claim
			}
			var mu sync.Mutex
			var handouts []handout
			for step := range rapid.IntRange(1, 4).Draw(rt, "steps") {
				now := t0.Add(time.Duration(step) * time.Minute)
				var wg sync.WaitGroup
				for _, d := range ds {
					wg.Go(func() {
						b, err := d.Dispatch(context.Background(), now)
						if err != nil {
							rt.Error(err)
							return
						}
						mu.Lock()
						defer mu.Unlock()
						for _, it := range b.Items {
							handouts = append(handouts, handout{now, it.Claim})
						}
					})
				}
				wg.Wait()
			}
			last := map[duework.Key]handout{}
			for _, h := range handouts {
				k := h.claim.Entry.Key()
				if prev, ok := last[k]; ok && prev.claim.Until.After(h.now) && !h.now.Before(prev.now) {
					rt.Fatalf("rule 6: %v handed out at %v while its claim from %v lasts until %v", k, h.now, prev.now, prev.claim.Until)
				}
				if prev, ok := last[k]; !ok || prev.now.Before(h.now) {
					last[k] = h
				}
			}
		})
	})
}

func TestDispatchRule7Deterministic(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		rapid.Check(t, func(rt *rapid.T) {
			pop := genPopulation(rt)
			cfg := pop.config(rt)
			a, b := newIndex(), newIndex()
			pop.load(rt, a)
			pop.load(rt, b)
			da, db := mustNew(rt, a, cfg), mustNew(rt, b, cfg)
			for c := range 3 {
				now := t0.Add(time.Duration(c) * 90 * time.Second)
				ba, bb := mustDispatch(rt, da, now), mustDispatch(rt, db, now)
				if diff := cmp.Diff(ba, bb, cmpopts.IgnoreFields(duework.Claim{}, "Token"), sameMessage); diff != "" {
					rt.Fatalf("rule 7: cycle %d differs between two equal indexes (-a +b):\n%s", c, diff)
				}
			}
		})
	})
}

func TestDispatchRule8Cost(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := &hookIndex{Index: newIndex()}
		schedule(t, idx, backlog("noisy", 500, -1000)...)
		schedule(t, idx, ent("quiet", "q", -1), ent("carol", "c", -1), ent("later", "l", 100))
		calls := map[string]int{}
		cfg := twoLanes()
		route := cfg.LaneFor
		cfg.LaneFor = func(ctx context.Context, user string) (Lane, error) {
			calls[user]++
			return route(ctx, user)
		}
		b := mustDispatch(t, mustNew(t, idx, cfg), t0)
		if diff := cmp.Diff([]int{2}, idx.dueHeads); diff != "" {
			t.Errorf("rule 8: DueHeads perUser must be the largest PerUserLimit (-want +got):\n%s", diff)
		}
		if idx.dueBefore != 0 {
			t.Errorf("rule 8: Dispatch called DueBefore, which walks backlogs")
		}
		if len(idx.claims) != 1 || len(idx.claims[0]) != len(b.Items) {
			t.Errorf("rule 8: want one Claim of the %d selected keys, got %v", len(b.Items), idx.claims)
		}
		if diff := cmp.Diff(map[string]int{"noisy": 1, "quiet": 1, "carol": 1}, calls); diff != "" {
			t.Errorf("LaneFor must run once per user with due work (-want +got):\n%s", diff)
		}
	})
}

func TestDispatchIndexErrors(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		errDown := errors.New("index down")
		ctx := context.Background()
		for _, c := range []struct {
			name  string
			setup func(*hookIndex) context.Context
			is    error
		}{
			{"DueHeads fails", func(h *hookIndex) context.Context { h.dueHeadsErr = errDown; return ctx }, errDown},
			{"Claim fails", func(h *hookIndex) context.Context { h.claimErr = errDown; return ctx }, errDown},
			{"duplicate heads", func(h *hookIndex) context.Context { h.duplicateHeads = true; return ctx }, nil},
			{"cancelled", func(h *hookIndex) context.Context {
				cctx, cancel := context.WithCancel(ctx)
				cancel()
				return cctx
			}, context.Canceled},
		} {
			t.Run(c.name, func(t *testing.T) {
				idx := &hookIndex{Index: newIndex()}
				schedule(t, idx, ent("quiet", "q", -1), ent("carol", "c", -1))
				cctx := c.setup(idx)
				b, err := mustNew(t, idx, twoLanes()).Dispatch(cctx, t0)
				if err == nil || (c.is != nil && !errors.Is(err, c.is)) {
					t.Fatalf("Dispatch = %v, want an error wrapping %v", err, c.is)
				}
				if len(b.Items)+len(b.Lanes)+len(b.ShedUserIDs) != 0 {
					t.Errorf("a failed Dispatch returned a batch: %+v", b)
				}
				if due := allDue(t, idx.Index, t0); len(due) != 2 {
					t.Errorf("after a failed Dispatch %d entries are due, want 2: nothing claimed", len(due))
				}
			})
		}
	})
}

// sameMessage compares errors by what they say.
var sameMessage = cmp.Comparer(func(a, b error) bool { return (a == nil) == (b == nil) && (a == nil || a.Error() == b.Error()) })

// --- random populations ---

// population is a random set of users, their lanes and backlogs.
type population struct {
	lanes   []LaneCapacity
	global  int
	laneOf  map[string]Lane // users missing here make LaneFor fail
	entries []duework.Entry
}

func genPopulation(t *rapid.T) population {
	r := genRouting(t)
	p := population{lanes: r.lanes, global: r.global, laneOf: r.laneOf}
	for _, u := range r.users {
		for k := range rapid.IntRange(0, 8).Draw(t, "backlog") {
			due := rapid.IntRange(-300, 200).Draw(t, "dueAt") // some not yet due
			p.entries = append(p.entries, ent(u, fmt.Sprintf("w%02d", k), due))
		}
	}
	return p
}

func (p population) load(t rapid.TB, idx duework.Index) { schedule(t, idx, p.entries...) }

func (p population) config(*rapid.T) Config {
	return Config{Lanes: p.lanes, GlobalBatchLimit: p.global, LaneFor: laneMap(p.laneOf), ClaimFor: time.Minute}
}

func TestDispatchProperties(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		rapid.Check(t, func(rt *rapid.T) {
			ctx := context.Background()
			pop := genPopulation(rt)
			idx := newIndex()
			pop.load(rt, idx)
			cfg := pop.config(rt)
			d := mustNew(rt, idx, cfg)
			// A few earlier cycles give users different LastServed times and claims.
			for c := range rapid.IntRange(0, 2).Draw(rt, "earlier") {
				mustDispatch(rt, d, t0.Add(time.Duration(c-3)*40*time.Second))
			}

			now := t0
			before := allDue(rt, idx, now)
			perUser := 0
			for _, lc := range cfg.Lanes {
				perUser = max(perUser, lc.PerUserLimit)
			}
			heads, err := idx.DueHeads(ctx, now, perUser)
			if err != nil {
				rt.Fatal(err)
			}
			b := mustDispatch(rt, d, now)

			// Dispatch hands out exactly what Select chooses (no other dispatcher here).
			routed := map[string]Lane{}
			for _, h := range heads {
				if lane, ok := pop.laneOf[h.UserID]; ok && slices.ContainsFunc(cfg.Lanes, func(lc LaneCapacity) bool { return lc.Lane == lane }) {
					routed[h.UserID] = lane
				}
			}
			in := SelectInput{Heads: heads, LaneOf: routed, Lanes: cfg.Lanes, GlobalBatchLimit: cfg.GlobalBatchLimit}
			got := Selection{ShedUserIDs: b.ShedUserIDs}
			for _, it := range b.Items {
				got.Items = append(got.Items, Selected{Entry: it.Claim.Entry, Lane: it.Lane})
				if !it.Claim.Until.Equal(now.Add(cfg.ClaimFor)) {
					rt.Errorf("rule 6: claim until %v, want now + ClaimFor", it.Claim.Until)
				}
			}
			if diff := cmp.Diff(Select(in), got, cmpopts.EquateEmpty()); diff != "" {
				rt.Fatalf("Dispatch differs from Select over the same heads (-Select +Dispatch):\n%s", diff)
			}
			checkSelection(rt, in, got) // rules 1–4

			// Shed, from the index alone: users with due work who did not get all of it.
			dueCount, gotCount := map[string]int{}, map[string]int{}
			for _, e := range before {
				dueCount[e.UserID]++
			}
			for _, it := range b.Items {
				gotCount[it.Claim.Entry.UserID]++
			}
			var wantShed []string
			for u, n := range dueCount {
				if gotCount[u] < n {
					wantShed = append(wantShed, u)
				}
			}
			slices.Sort(wantShed)
			if diff := cmp.Diff(wantShed, b.ShedUserIDs, cmpopts.EquateEmpty()); diff != "" {
				rt.Fatalf("rule 4: ShedUserIDs (-want +got):\n%s", diff)
			}

			// Nothing deleted: every entry not dispatched is still due, and every entry exists.
			dispatched := map[duework.Key]bool{}
			for _, it := range b.Items {
				dispatched[it.Claim.Entry.Key()] = true
			}
			var wantAfter []duework.Entry
			for _, e := range before {
				if !dispatched[e.Key()] {
					wantAfter = append(wantAfter, e)
				}
			}
			// In DueBefore's own order: what is left is the earlier result less what went out.
			if diff := cmp.Diff(wantAfter, allDue(rt, idx, now), cmpopts.EquateEmpty()); diff != "" {
				rt.Fatalf("rule 4: due work after the cycle (-want +got):\n%s", diff)
			}
			for _, e := range pop.entries {
				if _, err := idx.Get(ctx, tenant(rt, e.UserID), e.WorkKey); err != nil {
					rt.Fatalf("rule 4: %v gone after a cycle: %v", e.Key(), err)
				}
			}

			// Unrouted: every user with due work whose lane failed, in order.
			var wantUnrouted []string
			for _, h := range heads {
				if _, ok := routed[h.UserID]; !ok {
					wantUnrouted = append(wantUnrouted, h.UserID)
				}
			}
			var gotUnrouted []string
			for _, u := range b.Unrouted {
				gotUnrouted = append(gotUnrouted, u.UserID)
			}
			if diff := cmp.Diff(wantUnrouted, gotUnrouted, cmpopts.EquateEmpty()); diff != "" {
				rt.Fatalf("rule 5: Unrouted (-want +got):\n%s", diff)
			}

			// Lane reports, in Config order.
			want := make([]LaneReport, len(cfg.Lanes))
			for i, lc := range cfg.Lanes {
				want[i].Lane = lc.Lane
				for _, h := range heads {
					if routed[h.UserID] == lc.Lane {
						want[i].Users++
						if slices.Contains(b.ShedUserIDs, h.UserID) {
							want[i].Shed++
						}
					}
				}
				for _, it := range b.Items {
					if it.Lane == lc.Lane {
						want[i].Dispatched++
					}
				}
			}
			if diff := cmp.Diff(want, b.Lanes); diff != "" {
				rt.Fatalf("lane reports (-want +got):\n%s", diff)
			}
		})
	})
}

func TestDispatchRule8AllocsDoNotFollowBacklog(t *testing.T) {
	// Speed lives in BenchmarkDispatchNoisyBacklog; allocations are counts, so rule 8 can be
	// pinned here: a cycle over duework.Memory allocates as often and as many bytes whether
	// the noisy user's due backlog is 100 or 20,000 entries deep.
	measure := func(depth int) (allocs, bytes float64) {
		idx := duework.NewMemory()
		schedule(t, idx, backlog("noisy", depth, -1_000_000)...)
		for u := range 200 {
			schedule(t, idx, ent(fmt.Sprintf("u%03d", u), "feed", -u))
		}
		d := mustNew(t, idx, Config{
			Lanes:            []LaneCapacity{{Lane: "free", PerUserLimit: 3, PerCycleLimit: 150}},
			GlobalBatchLimit: 150,
			LaneFor:          func(context.Context, string) (Lane, error) { return "free", nil },
			ClaimFor:         time.Minute,
		})
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
		t.Errorf("rule 8: a cycle allocates more with a deeper backlog: %.0f allocations and %.0f bytes at 20,000, %.0f and %.0f at 100",
			deepN, deepB, shallowN, shallowB)
	}
}
