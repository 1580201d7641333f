package postgres_test

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

func hash(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

const (
	contentionUsers   = 1_000
	contentionEntries = 100_000
	noisyEntries      = 50_050 // user000 holds these; the 999 others hold 50 each

	// The contention tests run this many dispatchers, each for this many cycles at the
	// same instants one second apart, claiming for claimFor.
	dispatchers = 4
	cycles      = 25
	claimFor    = 20 * time.Second
)

// contentionFixture loads contentionEntries entries of contentionUsers users, all due at t0,
// user000 with noisyEntries of them, and returns the schema and a setup pool on it.
func contentionFixture(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	schema := pgtest.Schema(t, "rota_test")
	setup := pgtest.PoolIn(t, schema, 2)
	if err := postgres.Migrate(context.Background(), setup); err != nil {
		t.Fatal(err)
	}
	users := make([]string, contentionUsers)
	counts := make([]int, contentionUsers)
	for i := range users {
		users[i] = fmt.Sprintf("user%03d", i)
		counts[i] = (contentionEntries - noisyEntries) / (contentionUsers - 1)
	}
	counts[0] = noisyEntries
	pgtest.LoadDue(t, setup, users, counts, func(int) time.Time { return t0 })
	return schema, setup
}

type claimRecord struct {
	c   duework.Claim
	now time.Time
}

// Four readers, each with its own pool, run the Index calls of a dispatch cycle at the same
// instants over 100,000 entries of 1,000 tenants: each reads the front of the queue with a
// hold (Ready), claims what it read, releases the users it did not serve, and its worker
// completes most items in one CompleteMany and abandons the rest, whose claims must end on
// their own.
// Afterwards: they read disjoint users at every instant and lost (almost) no claim to each
// other; no entry was handed out twice while a claim on it lasted; each page was in turn
// order; every tenant was served within ceil(U/L)+1 cycles, however deep user000's
// backlog; and nothing was lost.
func TestContentionFourReaders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, setup := contentionFixture(t)
	const (
		users   = 50 // per Ready
		perUser = 3
		holdFor = 5 * time.Second
	)
	base := t0.Add(time.Hour)
	at := func(cycle int) time.Time { return base.Add(time.Duration(cycle) * time.Second) }
	idxs := make([]*postgres.Index, dispatchers)
	for i := range idxs {
		idxs[i] = postgres.NewIndex(pgtest.PoolIn(t, schema, 2))
	}

	var (
		mu        sync.Mutex
		claims    []claimRecord
		completes = map[uint64]duework.Entry{} // by claim token: the next entry written
		asked     int
		lastServe = map[string]int{} // by user: the last cycle that served it
		maxGap    int
	)
	for cycle := range cycles {
		now := at(cycle)
		read := make([][]string, dispatchers)
		var wg sync.WaitGroup
		for d, idx := range idxs {
			wg.Go(func() {
				q := duework.ReadyQuery{Now: now, Users: users, PerUser: perUser, Hold: holdFor}
				page, err := idx.Ready(ctx, q)
				if err != nil {
					t.Errorf("Ready: %v", err)
					return
				}
				for i, h := range page.Heads {
					if h.Turn.After(now) || (i > 0 && cmp.Or(page.Heads[i-1].Turn.Compare(h.Turn), cmp.Compare(page.Heads[i-1].UserID, h.UserID)) >= 0) {
						t.Errorf("cycle %d: page out of turn order or not ready: %s", cycle, showPage(page))
					}
					read[d] = append(read[d], h.UserID)
				}
				keys := keysOf(page)
				got, err := idx.Claim(ctx, keys, now, now.Add(claimFor))
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				served := map[string]bool{}
				for _, c := range got {
					served[c.Entry.UserID] = true
				}
				var unserved []string
				for _, h := range page.Heads {
					if !served[h.UserID] {
						unserved = append(unserved, h.UserID)
					}
				}
				if err := idx.Release(ctx, unserved, now.Add(holdFor)); err != nil {
					t.Errorf("Release: %v", err)
				}
				var done []duework.Done
				for _, c := range got {
					if hash(fmt.Sprint(c.Token))%10 == 0 {
						continue // abandoned: the claim must end by itself
					}
					next := c.Entry
					next.LastRunAt = now
					next.DueAt = now.Add(time.Duration(5+hash(c.Entry.WorkKey+c.Entry.UserID)%40) * time.Second)
					done = append(done, duework.Done{Tenant: mustTC(t, c.Entry.UserID), Claim: c, Next: next})
				}
				errs, err := idx.CompleteMany(ctx, done)
				if err != nil {
					t.Errorf("CompleteMany: %v", err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				asked += len(keys)
				for _, c := range got {
					claims = append(claims, claimRecord{c: c, now: now})
				}
				for i, err := range errs {
					if err != nil {
						t.Errorf("CompleteMany item %d: %v", i, err)
						continue
					}
					completes[done[i].Claim.Token] = done[i].Next
				}
				for u := range served {
					if last, ok := lastServe[u]; ok {
						maxGap = max(maxGap, cycle-last)
					} else {
						maxGap = max(maxGap, cycle+1)
					}
					lastServe[u] = cycle
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		seen := map[string]int{}
		for d, us := range read {
			for _, u := range us {
				if other, ok := seen[u]; ok {
					t.Errorf("cycle %d: dispatchers %d and %d both read %s at the same instant", cycle, other, d, u)
				}
				seen[u] = d
			}
		}
	}

	redispatched := checkNoDoubleClaims(t, claims, completes)
	lost := asked - len(claims)
	if lost*100 > len(claims) {
		t.Errorf("%d of %d keys read were lost to another dispatcher: more than 1%%", lost, asked)
	}
	// Every tenant has due work all along (50 entries, at most 3 a cycle), so the turn queue
	// serves each within ceil(U/L) cycles, L = 4 × 50 users a cycle; one more for a user
	// passed over while another call held its row.
	if bound := (contentionUsers+dispatchers*users-1)/(dispatchers*users) + 1; maxGap > bound || len(lastServe) != contentionUsers {
		t.Errorf("served %d of %d tenants, the longest wait %d cycles; want all, within %d", len(lastServe), contentionUsers, maxGap, bound)
	}
	if redispatched == 0 || len(claims) < 10_000 {
		t.Fatalf("only %d items dispatched, %d re-dispatched: the test did not exercise contention", len(claims), redispatched)
	}

	// None lost: every entry is still scheduled, and once every claim has ended each of the
	// 1,000 tenants is ready again.
	var n int
	if err := setup.QueryRow(ctx, `SELECT count(*) FROM rota_due`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != contentionEntries {
		t.Fatalf("%d entries left of %d", n, contentionEntries)
	}
	p := ready(t, postgres.NewIndex(setup), duework.ReadyQuery{Now: at(cycles).Add(24 * time.Hour), Users: 2 * contentionUsers, PerUser: 1})
	if len(p.Heads) != contentionUsers {
		t.Fatalf("a day later Ready found %d users of %d", len(p.Heads), contentionUsers)
	}
	checkReadyAt(t, setup)
	t.Logf("%d cycles × %d dispatchers claimed %d items (%d re-dispatches of an entry, %d keys lost to another dispatcher), longest wait %d cycles", cycles, dispatchers, len(claims), redispatched, lost, maxGap)
}

// Concurrent Ready calls with a hold, on separate pools, at the same instant never return
// the same user, and between them return every ready user.
func TestConcurrentReadersDisjoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.Schema(t, "rota_test")
	setup := pgtest.PoolIn(t, schema, 2)
	if err := postgres.Migrate(ctx, setup); err != nil {
		t.Fatal(err)
	}
	const n = 400
	users, counts := make([]string, n), make([]int, n)
	for i := range users {
		users[i], counts[i] = fmt.Sprintf("u%03d", i), 2
	}
	pgtest.LoadDue(t, setup, users, counts, func(i int) time.Time { return t0.Add(time.Duration(i%7) * time.Second) })
	now := t0.Add(time.Minute)
	const readers, rounds = 4, 3
	got := make([][]string, readers)
	var wg sync.WaitGroup
	for r := range readers {
		idx := postgres.NewIndex(pgtest.PoolIn(t, schema, 2))
		wg.Go(func() {
			for range rounds {
				p, err := idx.Ready(ctx, duework.ReadyQuery{Now: now, Users: 30, PerUser: 1, Hold: time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				got[r] = append(got[r], userIDs(p)...)
			}
		})
	}
	wg.Wait()
	seen := map[string]int{}
	total := 0
	for r, us := range got {
		total += len(us)
		for _, u := range us {
			if other, ok := seen[u]; ok {
				t.Fatalf("readers %d and %d both got %s", other, r, u)
			}
			seen[u] = r
		}
	}
	if total != readers*rounds*30 {
		t.Fatalf("the readers got %d users, want %d", total, readers*rounds*30)
	}
	rest := ready(t, postgres.NewIndex(setup), duework.ReadyQuery{Now: now, Users: n, PerUser: 1})
	if len(rest.Heads)+total != n {
		t.Fatalf("after the readers %d users were left unheld, want %d", len(rest.Heads), n-total)
	}
	for _, u := range userIDs(rest) {
		if _, ok := seen[u]; ok {
			t.Fatalf("%s is held by a reader but another Ready returned it", u)
		}
	}
}

var contentionLanes = []dispatch.LaneCapacity{
	{Lane: "pro", PerUserLimit: 3, PerCycleLimit: 120},
	{Lane: "free", PerUserLimit: 2, PerCycleLimit: 200},
}

func contentionLane(user string) dispatch.Lane {
	if hash(user)%5 == 0 {
		return "pro"
	}
	return "free"
}

// capped reports whether a contention tenant has an in-flight cap, of 2.
func capped(user string) bool { return hash(user)%7 == 0 }

const contentionCap = 2

// Four Dispatchers, each with its own pool, cycle at the same instants over 100,000
// entries of 1,000 tenants in two lanes — one in seven of them routed ahead with
// MaxInFlight 2, the others unrouted — while workers complete most items of a cycle at the
// next cycle's instant, before it dispatches, and abandon some, whose claims must end on
// their own. Afterwards: every tenant was routed to its lane and served; no entry was
// handed out twice while a claim on it lasted; no capped tenant had more than 2 claims in
// flight at any instant, counted from the claims handed out (made by then, not completed
// before, ending after), and the cap was reached; lost claims were under 1% of the items;
// each cycle kept its caps; and nothing was lost.
func TestContentionFourDispatchers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, setup := contentionFixture(t)
	base := t0.Add(time.Hour)
	at := func(cycle int) time.Time { return base.Add(time.Duration(cycle) * time.Second) }
	laneFor := func(_ context.Context, user string) (dispatch.Lane, error) { return contentionLane(user), nil }
	limitsFor := func(_ context.Context, user string) (duework.Limits, error) {
		if capped(user) {
			return duework.Limits{MaxInFlight: contentionCap}, nil
		}
		return duework.Limits{}, nil
	}
	var routes []duework.Route
	for i := range contentionUsers {
		if u := fmt.Sprintf("user%03d", i); capped(u) {
			routes = append(routes, duework.Route{UserID: u, Group: string(contentionLane(u)), Limits: duework.Limits{MaxInFlight: contentionCap}})
		}
	}
	if err := postgres.NewIndex(setup).Route(ctx, routes); err != nil {
		t.Fatal(err)
	}
	type disp struct {
		d       *dispatch.Dispatcher
		idx     *postgres.Index
		pending []duework.Done // the last cycle's items its worker completes next
	}
	ds := make([]*disp, dispatchers)
	for i := range ds {
		idx := postgres.NewIndex(pgtest.PoolIn(t, schema, 4))
		d, err := dispatch.New(idx, dispatch.Config{Lanes: contentionLanes, GlobalBatchLimit: 250, LaneFor: laneFor, LimitsFor: limitsFor, ClaimFor: claimFor})
		if err != nil {
			t.Fatal(err)
		}
		ds[i] = &disp{d: d, idx: idx}
	}
	limits := map[dispatch.Lane]dispatch.LaneCapacity{}
	for _, lc := range contentionLanes {
		limits[lc.Lane] = lc
	}

	var (
		mu        sync.Mutex
		claims    []claimRecord
		completes = map[uint64]duework.Entry{}
		doneAt    = map[uint64]int{} // by claim token: the cycle whose instant completed it
		served    = map[string]bool{}
		items     int
		lost      int
	)
	for cycle := range cycles {
		now := at(cycle)
		var wg sync.WaitGroup
		for _, x := range ds {
			wg.Go(func() {
				done := x.pending
				x.pending = nil
				errs, err := x.idx.CompleteMany(ctx, done)
				if err != nil {
					t.Errorf("CompleteMany: %v", err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for i, err := range errs {
					if err != nil {
						t.Errorf("CompleteMany item %d: %v", i, err)
						continue
					}
					completes[done[i].Claim.Token] = done[i].Next
					doneAt[done[i].Claim.Token] = cycle
				}
			})
		}
		wg.Wait()
		for _, x := range ds {
			wg.Go(func() {
				b, err := x.d.Dispatch(ctx, now)
				if err != nil {
					t.Errorf("Dispatch: %v", err)
					return
				}
				if len(b.Items) > 250 {
					t.Errorf("cycle %d dispatched %d items, over the global limit 250", cycle, len(b.Items))
				}
				perUser, perLane := map[string]int{}, map[dispatch.Lane]int{}
				for _, it := range b.Items {
					u := it.Claim.Entry.UserID
					perUser[u]++
					perLane[it.Lane]++
					if it.Lane != contentionLane(u) {
						t.Errorf("cycle %d: %s served in lane %s, its lane is %s", cycle, u, it.Lane, contentionLane(u))
					}
					if perUser[u] > limits[it.Lane].PerUserLimit {
						t.Errorf("cycle %d: %s got %d items, over lane %s's PerUserLimit", cycle, u, perUser[u], it.Lane)
					}
					if hash(fmt.Sprint(it.Claim.Token))%10 == 0 {
						continue // abandoned: the claim must end by itself
					}
					next := it.Claim.Entry
					next.LastRunAt = at(cycle + 1)
					next.DueAt = at(cycle + 1).Add(time.Duration(5+hash(next.WorkKey+u)%40) * time.Second)
					x.pending = append(x.pending, duework.Done{Tenant: mustTC(t, u), Claim: it.Claim, Next: next})
				}
				for lane, n := range perLane {
					if n > limits[lane].PerCycleLimit {
						t.Errorf("cycle %d: lane %s dispatched %d, over its PerCycleLimit", cycle, lane, n)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				items += len(b.Items)
				for _, l := range b.Lanes {
					lost += l.LostClaims
				}
				for _, it := range b.Items {
					claims = append(claims, claimRecord{c: it.Claim, now: now})
					served[it.Claim.Entry.UserID] = true
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
	}
	checkNoDoubleClaims(t, claims, completes)
	// In flight at cycle c's instant, while its dispatchers claim: made at or before it,
	// not completed at an earlier instant or before it dispatched, ending after it.
	reached := 0
	for cycle := range cycles {
		now := at(cycle)
		inFlight := map[string]int{}
		for _, cr := range claims {
			if c, ok := doneAt[cr.c.Token]; cr.now.After(now) || (ok && c <= cycle) || !cr.c.Until.After(now) {
				continue
			}
			inFlight[cr.c.Entry.UserID]++
		}
		for u, n := range inFlight {
			if capped(u) && n > contentionCap {
				t.Errorf("cycle %d: %s, capped at %d, had %d claims in flight", cycle, u, contentionCap, n)
			}
			if capped(u) && n == contentionCap {
				reached++
			}
		}
	}
	if reached == 0 {
		t.Errorf("no capped tenant ever had %d claims in flight: the test did not exercise the cap", contentionCap)
	}
	if lost*100 > items {
		t.Errorf("%d claims lost to another dispatcher for %d items: more than 1%%", lost, items)
	}
	if len(served) != contentionUsers {
		t.Errorf("served %d of %d tenants", len(served), contentionUsers)
	}
	var n, unrouted int
	if err := setup.QueryRow(ctx, `SELECT (SELECT count(*) FROM rota_due), (SELECT count(*) FROM rota_users WHERE group_name NOT IN ('pro', 'free'))`).Scan(&n, &unrouted); err != nil {
		t.Fatal(err)
	}
	if n != contentionEntries || unrouted != 0 {
		t.Fatalf("%d entries left of %d, %d users unrouted", n, contentionEntries, unrouted)
	}
	checkReadyAt(t, setup)
	t.Logf("%d cycles × %d dispatchers dispatched %d items, %d claims lost to another dispatcher, %d user-instants at the cap", cycles, dispatchers, items, lost, reached)
}

// checkNoDoubleClaims checks that no entry was handed out twice while its claim lasted:
// consecutive claims of one entry (in token order, which is claim order) are separated by
// a successful Complete (completes holds the next entry it wrote, by token) or by the end
// of the earlier claim; and each token is new. It returns how many claims re-claimed an
// entry.
func checkNoDoubleClaims(t *testing.T, claims []claimRecord, completes map[uint64]duework.Entry) int {
	t.Helper()
	byKey := map[duework.Key][]claimRecord{}
	tokens := map[uint64]bool{}
	for _, cr := range claims {
		if tokens[cr.c.Token] {
			t.Fatalf("token %d handed out twice", cr.c.Token)
		}
		tokens[cr.c.Token] = true
		byKey[cr.c.Entry.Key()] = append(byKey[cr.c.Entry.Key()], cr)
	}
	redispatched := 0
	for k, crs := range byKey {
		slices.SortFunc(crs, func(a, b claimRecord) int { return cmp.Compare(a.c.Token, b.c.Token) })
		for i := 1; i < len(crs); i++ {
			a, b := crs[i-1], crs[i]
			redispatched++
			if next, ok := completes[a.c.Token]; ok {
				if b.now.Before(next.DueAt) {
					t.Errorf("%v: claimed at %v, before the DueAt %v its completion wrote", k, b.now, next.DueAt)
				}
				continue
			}
			if b.now.Before(a.c.Until) {
				t.Errorf("%v: claimed again at %v (token %d) while claim %d lasted until %v", k, b.now, b.c.Token, a.c.Token, a.c.Until)
			}
		}
	}
	return redispatched
}
