package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/duework/indextest"
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

// plans is a LaneFor whose answers a test changes as it goes, and which counts its calls.
type plans struct {
	mu     sync.Mutex
	lanes  map[string]Lane
	fail   map[string]error
	panics map[string]bool
	calls  map[string]int
}

func newPlans(lanes map[string]Lane) *plans {
	return &plans{lanes: lanes, fail: map[string]error{}, panics: map[string]bool{}, calls: map[string]int{}}
}

func (p *plans) laneFor(_ context.Context, user string) (Lane, error) {
	p.mu.Lock()
	p.calls[user]++
	lane, err, panics := p.lanes[user], p.fail[user], p.panics[user]
	p.mu.Unlock()
	if panics {
		panic("plan store corrupt for " + user)
	}
	if err != nil {
		return "", err
	}
	if lane == "" {
		return "", fmt.Errorf("no plan for %q", user)
	}
	return lane, nil
}

func (p *plans) set(user string, lane Lane) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lanes[user] = lane
}

// took returns the calls so far, per user, and forgets them.
func (p *plans) took() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.calls
	p.calls = map[string]int{}
	return out
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

// unroutedIDs returns the users of a batch's Unrouted.
func unroutedIDs(b Batch) []string {
	var out []string
	for _, u := range b.Unrouted {
		out = append(out, u.UserID)
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

// allDue returns every entry visible at now, in DueBefore's order.
func allDue(t rapid.TB, idx duework.Index, now time.Time) []duework.Entry {
	t.Helper()
	es, err := idx.DueBefore(context.Background(), now, duework.MaxLimit)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// complete completes every item of b with its entry due again at next.
func complete(t rapid.TB, idx duework.Index, b Batch, next time.Time) {
	t.Helper()
	for _, it := range b.Items {
		e := it.Claim.Entry
		e.DueAt, e.LastRunAt = next, next
		if err := idx.Complete(context.Background(), tenant(t, e.UserID), it.Claim, e); err != nil {
			t.Fatal(err)
		}
	}
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

func oneLaneConfig(perUser, perCycle, global int) Config {
	return Config{Lanes: oneLane(perUser, perCycle), GlobalBatchLimit: global, LaneFor: everyoneFree, ClaimFor: time.Minute}
}

func TestDispatchRoutesNewUsersAndServesThemInTheSameCycle(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := &hookIndex{Index: newIndex()}
		schedule(t, idx, backlog("noisy", 10, -100)...)
		schedule(t, idx, ent("carol", "c", -5), ent("quiet", "q", -1), ent("later", "l", 100))
		d := mustNew(t, idx, twoLanes())

		b := mustDispatch(t, d, t0)
		if diff := cmp.Diff([]string{"pro:noisy/k000", "pro:carol/c", "pro:noisy/k001", "free:quiet/q"}, itemPicks(b)); diff != "" {
			t.Errorf("items (-want +got):\n%s", diff)
		}
		want := Batch{
			ShedUserIDs: []string{"noisy"},
			Lanes: []LaneReport{
				{Lane: "pro", Users: 2, Dispatched: 3, Shed: 1, OldestDue: at(-100),
					Overdue: []Overdue{{UserID: "noisy", DueAt: at(-100)}, {UserID: "carol", DueAt: at(-5)}}},
				{Lane: "free", Users: 1, Dispatched: 1, OldestDue: at(-1), Overdue: []Overdue{{UserID: "quiet", DueAt: at(-1)}}},
			},
		}
		if diff := cmp.Diff(want, b, cmpopts.IgnoreFields(Batch{}, "Items"), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("batch (-want +got):\n%s", diff)
		}
		for _, it := range b.Items {
			if !it.Claim.Until.Equal(t0.Add(time.Minute)) {
				t.Errorf("%v claimed until %v, want now + ClaimFor", it.Claim.Entry.Key(), it.Claim.Until)
			}
		}
		wantOps := []string{"Groups", "Ready", "Route", "Release", "Ready", "Ready", "Claim"}
		if diff := cmp.Diff(wantOps, idx.ops()); diff != "" {
			t.Errorf("Index calls (-want +got):\n%s", diff)
		}
		// The new users now stand in their lanes' queues.
		if got := readyUsers(t, idx, "pro", t0.Add(time.Second)); !slices.Equal(got, []string{"noisy"}) {
			t.Errorf("pro's queue after the cycle: %v, want noisy (carol's one entry is claimed)", got)
		}
		if got := readyUsers(t, idx, "", t0.Add(time.Hour)); !slices.Equal(got, []string{"later"}) {
			t.Errorf("unrouted after the cycle: %v, want only later, due after it", got)
		}

		// While the claims last, the next cycle hands out only the rest.
		b = mustDispatch(t, d, t0.Add(time.Second))
		if diff := cmp.Diff([]string{"pro:noisy/k002", "pro:noisy/k003"}, itemPicks(b)); diff != "" {
			t.Errorf("second cycle (-want +got):\n%s", diff)
		}
		// Once they end, unfinished work is due again: nothing was lost.
		if due := allDue(t, idx, t0.Add(90*time.Second)); len(due) != 12 {
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
		if ops := idx.ops(); slices.Contains(ops, "Claim") || slices.Contains(ops, "Route") {
			t.Errorf("an empty cycle called %v", ops)
		}
	})
}

func TestDispatchSendsAServedUserToTheBack(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := newIndex()
		users := []string{"u1", "u2", "u3", "u4", "u5"}
		for i, u := range users {
			schedule(t, idx, backlog(u, 3, -10+i)...)
		}
		route(t, idx, "free", users...)
		d := mustNew(t, idx, oneLaneConfig(1, 2, 10))
		var got []string
		for c := range 5 {
			b := mustDispatch(t, d, t0.Add(time.Duration(c)*time.Second))
			got = append(got, strings.Join(itemPicks(b), " "))
		}
		want := []string{
			"free:u1/k000 free:u2/k000",
			"free:u3/k000 free:u4/k000",
			"free:u5/k000 free:u1/k001",
			"free:u2/k001 free:u3/k001",
			"free:u4/k001 free:u1/k002", // u1 and u5, both served at t0+2s, tie on Turn
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("cycles (-want +got):\n%s", diff)
		}
	})
}

func TestDispatchServesEveryUserWithinCeilUOverLCycles(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		checkStarvationBound(t, newIndex(), 10, 3, 2, 2)
	})
}

func TestDispatchServesEveryUserWithinCeilUOverLCyclesProperty(t *testing.T) {
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
// times deeper than the others' depth entries and older than all of them) continuously
// ready in one lane of per-cycle limit limit: each cycle's items are completed due again at
// once, never with a DueAt before the completion's now. Every user must be served in every
// window of ceil(users/limit) consecutive cycles.
func checkStarvationBound(t rapid.TB, idx duework.Index, users, limit, perUser, depth int) {
	names := []string{"noisy"}
	schedule(t, idx, backlog("noisy", 1000*depth, -1_000_000)...)
	for u := 1; u < users; u++ {
		name := fmt.Sprintf("u%02d", u)
		names = append(names, name)
		schedule(t, idx, backlog(name, depth, -u)...)
	}
	cfg := oneLaneConfig(perUser, limit, 1000)
	cfg.ClaimFor = 30 * time.Second
	d := mustNew(t, idx, cfg)
	bound := (users + limit - 1) / limit
	lastServed := map[string]int{} // cycle index; absent: never
	for c := range 3*bound + 2 {
		now := t0.Add(time.Duration(c) * time.Minute)
		b := mustDispatch(t, d, now)
		complete(t, idx, b, now) // "run now" again: due at the completion's now
		for _, it := range b.Items {
			lastServed[it.Claim.Entry.UserID] = c
		}
		for _, u := range names {
			since, ok := lastServed[u]
			if !ok {
				since = -1
			}
			if c-since >= bound {
				t.Fatalf("cycle %d: %s last served in cycle %d, the bound is %d cycles (%d users, per-cycle limit %d)",
					c, u, since, bound, users, limit)
			}
		}
	}
}

func TestDispatchCallsLaneForOnlyForUsersItRoutesOrServes(t *testing.T) {
	const batch = 1_000
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := &hookIndex{Index: newIndex()}
		ready := 100_000
		if _, isModel := idx.Index.(*indextest.Model); isModel {
			// The reference Model reads every row for each user's ReadyAt, so a call
			// costs users × rows: 3.9 s at 10,000 users. It shows the same rule on fewer.
			ready = 3_000
		}
		ctx := context.Background()
		lanes := map[string]Lane{}
		var routed []string
		for u := range ready {
			id := fmt.Sprintf("u%06d", u)
			lanes[id] = "free"
			routed = append(routed, id)
			if err := idx.Schedule(ctx, tenant(t, id), ent(id, "feed", -u%5000)); err != nil {
				t.Fatal(err)
			}
		}
		route(t, idx, "free", routed...)
		var stale []string
		for u := range 150 { // new users and users of a lane the Config no longer names
			id := fmt.Sprintf("n%03d", u)
			lanes[id] = "free"
			schedule(t, idx, ent(id, "feed", -u))
			if u%3 == 0 {
				stale = append(stale, id)
			}
		}
		route(t, idx, "plus", stale...)
		p := newPlans(lanes)
		cfg := oneLaneConfig(1, batch, batch)
		cfg.LaneFor = p.laneFor
		d := mustNew(t, idx, cfg)
		for c := range 2 {
			idx.recorded()
			b := mustDispatch(t, d, t0.Add(time.Duration(c)*time.Second))
			if len(b.Items) != batch {
				t.Fatalf("cycle %d dispatched %d items, want %d", c, len(b.Items), batch)
			}
			calls := p.took()
			allowed := map[string]bool{}
			for _, it := range b.Items {
				allowed[it.Claim.Entry.UserID] = true
			}
			for _, cl := range idx.recorded() {
				if cl.op == "Ready" && cl.query.Group != "free" {
					for _, u := range cl.users {
						allowed[u] = true
					}
				}
			}
			for u, n := range calls {
				if !allowed[u] || n != 1 {
					t.Errorf("cycle %d: LaneFor(%s) called %d times; it was neither routed nor served", c, u, n)
				}
			}
			if len(calls) > len(allowed) || len(allowed) > cfg.GlobalBatchLimit+cfg.GlobalBatchLimit {
				t.Errorf("cycle %d: %d LaneFor calls for %d users routed or served", c, len(calls), len(allowed))
			}
			t.Logf("cycle %d: %d LaneFor calls, %d items, %d users ready", c, len(calls), len(b.Items), ready+150)
		}
	})
}

func TestDispatchNeverLetsAFailingLaneForBlockNewUsers(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := &hookIndex{Index: newIndex()}
		errDown := errors.New("entitlements down")
		p := newPlans(map[string]Lane{"bad3": "gold"})
		p.fail["bad1"] = errDown
		p.panics["bad2"] = true
		// The failing users stand first in the unrouted queue, with old work.
		schedule(t, idx, ent("bad1", "k", -300), ent("bad2", "k", -299), ent("bad3", "k", -298))
		cfg := oneLaneConfig(1, 10, 10)
		cfg.LaneFor, cfg.RouteLimit = p.laneFor, 3
		cfg.HoldFor, cfg.RetryAfter = 5*time.Second, time.Minute
		d := mustNew(t, idx, cfg)

		reads := map[string]int{} // routing reads per failing user
		served := map[string]bool{}
		for c := range 30 { // every 10 s for five minutes; two new users a cycle
			now := t0.Add(time.Duration(c) * 10 * time.Second)
			for i := range 2 {
				u := fmt.Sprintf("g%02d", 2*c+i)
				p.set(u, "free")
				schedule(t, idx, duework.Entry{UserID: u, WorkKey: "k", DueAt: now})
			}
			idx.recorded()
			b := mustDispatch(t, d, now)
			for _, cl := range idx.recorded() {
				if cl.op == "Ready" && cl.query.Group == "" {
					for _, u := range cl.users {
						if strings.HasPrefix(u, "bad") {
							reads[u]++
						}
					}
				}
			}
			for _, it := range b.Items {
				served[it.Claim.Entry.UserID] = true
			}
			for _, u := range b.Unrouted {
				if !strings.HasPrefix(u.UserID, "bad") {
					t.Errorf("cycle %d: %s unrouted: %v", c, u.UserID, u.Err)
				}
			}
			if c == 0 {
				if diff := cmp.Diff([]string{"bad1", "bad2", "bad3"}, unroutedIDs(b)); diff != "" {
					t.Fatalf("unrouted (-want +got):\n%s", diff)
				}
				for i, is := range []error{errDown, errLaneForPanic, ErrUnknownLane} {
					if !errors.Is(b.Unrouted[i].Err, is) {
						t.Errorf("%s's reason %v does not wrap %v", b.Unrouted[i].UserID, b.Unrouted[i].Err, is)
					}
				}
			}
		}
		// Every new user was served, each in the cycle it arrived in or the next.
		for i := range 60 {
			if u := fmt.Sprintf("g%02d", i); !served[u] && i < 58 {
				t.Errorf("%s never served", u)
			}
		}
		// A failing user costs one routing read per RetryAfter: cycles over 300 s read it at
		// 0, 60, 120, 180 and 240 s.
		for _, u := range []string{"bad1", "bad2", "bad3"} {
			if reads[u] != 5 {
				t.Errorf("%s was read for routing %d times in five minutes, want once a minute (5)", u, reads[u])
			}
		}
		// Their work is still due.
		var stillDue []string
		for _, e := range allDue(t, idx, t0.Add(time.Hour)) {
			if strings.HasPrefix(e.UserID, "bad") {
				stillDue = append(stillDue, e.UserID)
			}
		}
		if diff := cmp.Diff([]string{"bad1", "bad2", "bad3"}, stillDue); diff != "" {
			t.Errorf("the failing users' work (-want +got):\n%s", diff)
		}
	})
}

func TestDispatchRoutesUsersOfALaneTheConfigNoLongerNames(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := newIndex()
		schedule(t, idx, ent("p1", "k", -10), ent("p2", "k", -9), ent("f1", "k", -8))
		route(t, idx, "plus", "p1", "p2") // a lane of an earlier Config
		route(t, idx, "free", "f1")
		p := newPlans(map[string]Lane{"p1": "pro", "p2": "free", "f1": "free"})
		cfg := twoLanes()
		cfg.LaneFor = p.laneFor
		b := mustDispatch(t, mustNew(t, idx, cfg), t0)
		if diff := cmp.Diff([]string{"pro:p1/k", "free:p2/k", "free:f1/k"}, itemPicks(b)); diff != "" {
			t.Errorf("items (-want +got):\n%s", diff)
		}
		if got := readyUsers(t, idx, "plus", t0.Add(time.Hour)); len(got) != 0 {
			t.Errorf("users still in the lane the Config no longer names: %v", got)
		}
		if diff := cmp.Diff(map[string]int{"p1": 1, "p2": 1, "f1": 1}, p.took()); diff != "" {
			t.Errorf("LaneFor calls (-want +got):\n%s", diff)
		}
	})
}

func TestDispatchSplitsRouteLimitBetweenNewAndStaleUsers(t *testing.T) {
	cases := []struct {
		name          string
		unrouted      int
		stale         int
		limit         int
		wantUnrouted  int // users the unrouted group's read asks for
		wantStale     int // users the stale group's read asks for, 0: no read
		wantReadTotal int
	}{
		{"both ready", 10, 10, 5, 3, 2, 5},
		{"few new users leave the rest to stale ones", 1, 10, 5, 3, 4, 5},
		{"no stale users", 10, 0, 5, 5, 0, 5},
		{"no new users", 0, 10, 5, 0, 5, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			idx := &hookIndex{Index: newIndexForCase()}
			lanes := map[string]Lane{}
			for i := range c.unrouted {
				u := fmt.Sprintf("n%02d", i)
				lanes[u] = "free"
				schedule(t, idx, ent(u, "k", -i))
			}
			for i := range c.stale {
				u := fmt.Sprintf("s%02d", i)
				lanes[u] = "free"
				schedule(t, idx, ent(u, "k", -i))
				route(t, idx, "plus", u)
			}
			cfg := oneLaneConfig(1, 100, 100)
			cfg.LaneFor, cfg.RouteLimit = laneMap(lanes), c.limit
			mustDispatch(t, mustNew(t, idx, cfg), t0)
			asked := map[string]int{}
			read := 0
			for _, cl := range idx.recorded() {
				if cl.op == "Ready" && cl.query.Group != "free" {
					asked[cl.query.Group] = cl.query.Users
					read += len(cl.users)
					if cl.query.PerUser != 1 || cl.query.Hold != defaultRetryAfter {
						t.Errorf("routing read %+v, want PerUser 1 and Hold RetryAfter", cl.query)
					}
				}
			}
			if asked[""] != c.wantUnrouted || asked["plus"] != c.wantStale || read != c.wantReadTotal {
				t.Errorf("routing reads asked %v and read %d users, want unrouted %d, stale %d, %d read",
					asked, read, c.wantUnrouted, c.wantStale, c.wantReadTotal)
			}
		})
	}
}

// newIndexForCase is the Index of table tests that need only one.
func newIndexForCase() duework.Index { return indexes[0].new() }

func TestRerouteAppliesAPlanChangeAtOnce(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := newIndex()
		schedule(t, idx, ent("a", "k", -10), ent("b", "k", -9), ent("carol", "k", -1), ent("dan", "k", -2))
		route(t, idx, "free", "a", "b", "carol", "dan")
		p := newPlans(map[string]Lane{"a": "free", "b": "free", "carol": "free", "dan": "free"})
		cfg := Config{
			Lanes: []LaneCapacity{
				{Lane: "pro", PerUserLimit: 1, PerCycleLimit: 10},
				{Lane: "free", PerUserLimit: 1, PerCycleLimit: 2},
			},
			GlobalBatchLimit: 10, LaneFor: p.laneFor, ClaimFor: time.Minute,
		}
		d := mustNew(t, idx, cfg)
		// carol upgrades: she would wait behind a and b in the free lane.
		p.set("carol", "pro")
		p.set("dan", "gold")
		p.panics["b"] = true
		err := d.Reroute(context.Background(), "carol", "dan", "b", "nobody")
		if !errors.Is(err, ErrUnknownLane) || !errors.Is(err, errLaneForPanic) || !strings.Contains(err.Error(), `"nobody"`) {
			t.Errorf("Reroute error %v, want dan's unknown lane, b's panic and nobody's missing plan", err)
		}
		if diff := cmp.Diff(map[string]int{"carol": 1, "dan": 1, "b": 1, "nobody": 1}, p.took()); diff != "" {
			t.Errorf("LaneFor calls (-want +got):\n%s", diff)
		}
		b := mustDispatch(t, d, t0)
		if diff := cmp.Diff([]string{"pro:carol/k", "free:a/k", "free:b/k"}, itemPicks(b)); diff != "" {
			t.Errorf("the cycle after Reroute (-want +got):\n%s", diff)
		}
		if err := d.Reroute(context.Background()); err != nil {
			t.Errorf("Reroute of nobody: %v", err)
		}
	})
}

func TestDispatchMovesServedUsersWhoseLaneChanged(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := newIndex()
		schedule(t, idx, backlog("up", 3, -10)...)
		schedule(t, idx, backlog("flaky", 3, -9)...)
		schedule(t, idx, backlog("stay", 3, -8)...)
		route(t, idx, "free", "up", "flaky", "stay")
		p := newPlans(map[string]Lane{"up": "pro", "flaky": "free", "stay": "free"})
		p.fail["flaky"] = errors.New("timeout")
		cfg := twoLanes()
		cfg.LaneFor = p.laneFor
		d := mustNew(t, idx, cfg)

		b := mustDispatch(t, d, t0)
		if diff := cmp.Diff([]string{"free:up/k000", "free:flaky/k000", "free:stay/k000"}, itemPicks(b)); diff != "" {
			t.Errorf("first cycle, before the change is seen (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"flaky"}, unroutedIDs(b)); diff != "" || !strings.Contains(b.Unrouted[0].Err.Error(), `stays in lane "free"`) {
			t.Errorf("unrouted (-want +got):\n%s%v", diff, b.Unrouted)
		}
		if diff := cmp.Diff(map[string]int{"up": 1, "flaky": 1, "stay": 1}, p.took()); diff != "" {
			t.Errorf("LaneFor calls: once per served user (-want +got):\n%s", diff)
		}
		b = mustDispatch(t, d, t0.Add(time.Second))
		if diff := cmp.Diff([]string{"pro:up/k001", "pro:up/k002", "free:flaky/k001", "free:stay/k001"}, itemPicks(b)); diff != "" {
			t.Errorf("second cycle, up in its new lane, flaky where it was (-want +got):\n%s", diff)
		}
	})
}

func TestDispatchReportsWaitingSince(t *testing.T) {
	lanes := func(proCycle, freeShare int) Config {
		return Config{
			Lanes: []LaneCapacity{
				{Lane: "pro", PerUserLimit: 1, PerCycleLimit: proCycle},
				{Lane: "free", PerUserLimit: 1, PerCycleLimit: 10, MinShare: freeShare},
				{Lane: "idle", PerUserLimit: 1, PerCycleLimit: 10},
			},
			GlobalBatchLimit: 4, LaneFor: everyoneFree, ClaimFor: time.Minute,
		}
	}
	cases := []struct {
		name      string
		cfg       Config
		users     []int
		pro, free time.Time
	}{
		// pro reads 2 and serves both: it waits since the next one's turn (the page's
		// Next); free reads 2 (4 − 2), serves both, and f3 waits.
		{"the page's Next", lanes(2, 0), []int{2, 2, 0}, at(-98), at(-48)},
		// pro fills the batch; free reads nothing to serve and waits since f1's turn.
		{"a lane left with nothing", lanes(10, 0), []int{4, 0, 0}, time.Time{}, at(-50)},
		// free's reservation cuts two of the four users pro read.
		{"read and cut", lanes(10, 2), []int{4, 2, 0}, at(-98), at(-48)},
	}
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				idx := newIndex()
				for i, u := range []string{"p1", "p2", "p3", "p4"} {
					schedule(t, idx, ent(u, "k", -100+i))
				}
				for i, u := range []string{"f1", "f2", "f3"} {
					schedule(t, idx, ent(u, "k", -50+i))
				}
				route(t, idx, "pro", "p1", "p2", "p3", "p4")
				route(t, idx, "free", "f1", "f2", "f3")
				b := mustDispatch(t, mustNew(t, idx, c.cfg), t0)
				var users []int
				for _, l := range b.Lanes {
					users = append(users, l.Users)
				}
				if !slices.Equal(users, c.users) || !b.Lanes[0].WaitingSince.Equal(c.pro) || !b.Lanes[1].WaitingSince.Equal(c.free) || !b.Lanes[2].WaitingSince.IsZero() {
					t.Errorf("lanes %+v, want users %v, pro waiting since %v, free since %v, idle zero", b.Lanes, c.users, c.pro, c.free)
				}
				if c.users[1] == 0 && b.Lanes[1].Shed != 0 {
					t.Errorf("the lane left with nothing shed %d users: its one read does not count", b.Lanes[1].Shed)
				}
				// Nothing stays held: every user not served is ready again at once.
				ready := len(readyUsers(t, idx, "pro", t0)) + len(readyUsers(t, idx, "free", t0))
				if ready+len(b.Items) != 7 {
					t.Errorf("%d users ready after serving %d of 7: some are still held", ready, len(b.Items))
				}
			})
		}
	})
}

func TestDispatchReadsOnlyWhatEachLaneCouldBeGiven(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := &hookIndex{Index: newIndex()}
		schedule(t, idx, backlog("p1", 3, -20)...)
		schedule(t, idx, backlog("p2", 3, -19)...)
		route(t, idx, "pro", "p1", "p2")
		for i := range 5 {
			u := fmt.Sprintf("plus%d", i)
			schedule(t, idx, ent(u, "k", -10+i))
			route(t, idx, "plus", u)
			u = fmt.Sprintf("free%d", i)
			schedule(t, idx, ent(u, "k", -10+i))
			route(t, idx, "free", u)
		}
		cfg := Config{
			Lanes: []LaneCapacity{
				{Lane: "pro", PerUserLimit: 2, PerCycleLimit: 3},
				{Lane: "plus", PerUserLimit: 1, PerCycleLimit: 10, MinShare: 1},
				{Lane: "free", PerUserLimit: 1, PerCycleLimit: 10},
			},
			GlobalBatchLimit: 5, LaneFor: everyoneFree, ClaimFor: time.Minute, HoldFor: 3 * time.Second,
		}
		b := mustDispatch(t, mustNew(t, idx, cfg), t0)
		var got []duework.ReadyQuery
		for _, c := range idx.recorded() {
			if c.op == "Ready" {
				got = append(got, c.query)
			}
		}
		want := []duework.ReadyQuery{
			{Group: "pro", Now: t0, Users: 3, PerUser: 2, Hold: 3 * time.Second},  // min(3, 5 − 0)
			{Group: "plus", Now: t0, Users: 2, PerUser: 1, Hold: 3 * time.Second}, // pro's order is 3: max(1, 5 − 3)
			{Group: "free", Now: t0, Users: 1, PerUser: 1},                        // nothing left: one unheld user, for WaitingSince
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Ready calls (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"pro:p1/k000", "pro:p2/k000", "pro:p1/k001", "plus:plus0/k", "plus:plus1/k"}, itemPicks(b)); diff != "" {
			t.Errorf("items (-want +got):\n%s", diff)
		}
		if b.Lanes[2].Users != 0 || !b.Lanes[2].WaitingSince.Equal(at(-10)) {
			t.Errorf("free lane %+v, want no users read, waiting since free0's turn", b.Lanes[2])
		}
	})
}

func TestDispatchDoesNotRefillOrShedALostClaim(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := &hookIndex{Index: newIndex()}
		schedule(t, idx, ent("a", "k", -3), ent("b", "k", -2), ent("c", "k", -1))
		route(t, idx, "free", "a", "b", "c")
		// Another dispatcher claims b's entry between our read and our claim.
		idx.beforeClaim = func([]duework.Key) {
			if _, err := idx.Index.Claim(context.Background(), []duework.Key{{UserID: "b", WorkKey: "k"}}, t0, t0.Add(time.Hour)); err != nil {
				t.Error(err)
			}
		}
		b := mustDispatch(t, mustNew(t, idx, oneLaneConfig(1, 2, 10)), t0)
		if diff := cmp.Diff([]string{"free:a/k"}, itemPicks(b)); diff != "" {
			t.Errorf("a lost claim is not refilled (-want +got):\n%s", diff)
		}
		want := []LaneReport{{Lane: "free", Users: 2, Dispatched: 1, LostClaims: 1, WaitingSince: at(-1),
			OldestDue: at(-3), Overdue: []Overdue{{UserID: "a", DueAt: at(-3)}, {UserID: "b", DueAt: at(-2)}}}}
		if diff := cmp.Diff(want, b.Lanes); diff != "" {
			t.Errorf("lane report (-want +got):\n%s", diff)
		}
		if len(b.ShedUserIDs) != 0 {
			t.Errorf("a lost claim shed %v", b.ShedUserIDs)
		}
		if got := readyUsers(t, idx, "free", t0); !slices.Equal(got, []string{"c"}) {
			t.Errorf("ready after the cycle: %v, want c only (a served, b claimed elsewhere)", got)
		}
	})
}

func TestDispatchIsDeterministic(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		rapid.Check(t, func(rt *rapid.T) {
			pop := genPopulation(rt)
			cfg := pop.config()
			a, b := newIndex(), newIndex()
			pop.load(rt, a)
			pop.load(rt, b)
			da, db := mustNew(rt, a, cfg), mustNew(rt, b, cfg)
			for c := range 3 {
				now := t0.Add(time.Duration(c) * 90 * time.Second)
				ba, bb := mustDispatch(rt, da, now), mustDispatch(rt, db, now)
				if diff := cmp.Diff(ba, bb, cmpopts.IgnoreFields(duework.Claim{}, "Token"), sameMessage); diff != "" {
					rt.Fatalf("cycle %d differs between two equal indexes (-a +b):\n%s", c, diff)
				}
			}
		})
	})
}

func TestDispatchHandsBackWhatItReadWhenCtxEnds(t *testing.T) {
	forEachIndex(t, func(t *testing.T, newIndex func() duework.Index) {
		idx := &hookIndex{Index: newIndex()}
		schedule(t, idx, ent("a", "k", -3), ent("b", "k", -2), ent("new", "k", -1))
		route(t, idx, "free", "a", "b")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		idx.beforeClaim = func([]duework.Key) { cancel() }
		cfg := oneLaneConfig(1, 10, 10)
		_, err := mustNew(t, idx, cfg).Dispatch(ctx, t0)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Dispatch = %v, want context.Canceled", err)
		}
		if got := readyUsers(t, idx, "free", t0); !slices.Equal(got, []string{"a", "b", "new"}) {
			t.Errorf("ready after the cancelled cycle: %v, want every user handed back", got)
		}
	})
}

// sameMessage compares errors by what they say.
var sameMessage = cmp.Comparer(func(a, b error) bool { return (a == nil) == (b == nil) && (a == nil || a.Error() == b.Error()) })

// --- random populations ---

// population is a random set of users, their lanes and backlogs, all unrouted.
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

func (p population) config() Config {
	return Config{Lanes: p.lanes, GlobalBatchLimit: p.global, LaneFor: laneMap(p.laneOf), ClaimFor: time.Minute}
}
