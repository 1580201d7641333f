package rotadynamo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
)

// A fleet of dispatchers, each over an Index of its own on one table, as processes on
// several machines are, driven round by round on a simulated clock: every round they all
// dispatch at once at the round's instant, and each item is completed one to three rounds
// later, as workers of different speeds would. The fleet keeps what every round handed out
// and checks, round by round, what must hold across dispatchers.

var fleetT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	fleetStep     = 500 * time.Millisecond // between rounds
	fleetClaimFor = 10 * time.Second       // past any completion: no claim ends by time
	fleetEvery    = 2 * time.Second        // the rate of the rate-limited users
)

var fleetLane = dispatch.LaneCapacity{Lane: "free", PerUserLimit: 2, PerCycleLimit: 6}

// fleetTier has every entry due again two seconds after it ran.
var fleetTier = cadence.Backoff{Base: 2 * time.Second, Max: 2 * time.Second, Factor: 1}

type fleet struct {
	t      *testing.T
	idxs   []*Index
	reads  *readLog
	ds     []*dispatch.Dispatcher
	limits map[string]duework.Limits
	keys   []duework.Key
	rng    *rand.Rand

	live      map[duework.Key]liveClaim // handed out and not yet completed
	claimedAt map[string][]time.Time    // every claim of each user, in order
	completed map[duework.Key]int
}

type liveClaim struct {
	claim duework.Claim
	round int // the round that completes it
}

// newFleet schedules users u00… with perUser entries each, due at fleetT0, and builds one
// dispatcher per Index of idxs. The first sixth of the users may have one item in flight,
// the next sixth are served at most once per fleetEvery; the rest have no limits.
func newFleet(t *testing.T, idxs []*Index, users, perUser int) *fleet {
	f := &fleet{t: t, idxs: idxs, limits: map[string]duework.Limits{}, rng: rand.New(rand.NewPCG(1, 2)),
		live: map[duework.Key]liveClaim{}, claimedAt: map[string][]time.Time{}, completed: map[duework.Key]int{}}
	ctx := context.Background()
	for u := range users {
		id := fmt.Sprintf("u%02d", u)
		switch {
		case u < users/6:
			f.limits[id] = duework.Limits{MaxInFlight: 1}
		case u < users/3:
			f.limits[id] = duework.Limits{Every: fleetEvery}
		}
		var es []duework.Entry
		for j := range perUser {
			e := duework.Entry{UserID: id, WorkKey: fmt.Sprintf("s%d", j), Tier: "fleet", DueAt: fleetT0}
			es = append(es, e)
			f.keys = append(f.keys, e.Key())
		}
		if _, err := idxs[0].ScheduleMissing(ctx, mustTenant(t, id), es); err != nil {
			t.Fatal(err)
		}
	}
	cfg := dispatch.Config{
		Lanes: []dispatch.LaneCapacity{fleetLane}, GlobalBatchLimit: fleetLane.PerCycleLimit, ClaimFor: fleetClaimFor,
		LaneFor:   func(context.Context, string) (dispatch.Lane, error) { return fleetLane.Lane, nil },
		LimitsFor: func(_ context.Context, id string) (duework.Limits, error) { return f.limits[id], nil },
	}
	f.reads = &readLog{t: t, holder: map[string]int{}}
	for i, x := range idxs {
		d, err := dispatch.New(&holding{Index: x, id: i, log: f.reads}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		f.ds = append(f.ds, d)
	}
	return f
}

// round runs round r: every dispatcher at once, the checks, then the completions due.
func (f *fleet) round(ctx context.Context, r int) {
	f.t.Helper()
	now := fleetT0.Add(time.Duration(r) * fleetStep)
	batches := make([]dispatch.Batch, len(f.ds))
	errs := make([]error, len(f.ds))
	var wg sync.WaitGroup
	for i, d := range f.ds {
		wg.Go(func() { batches[i], errs[i] = d.Dispatch(ctx, now) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		f.t.Fatalf("round %d: %v", r, err)
	}
	for _, b := range batches {
		for _, it := range b.Items {
			k := it.Claim.Entry.Key()
			if prev, ok := f.live[k]; ok {
				f.t.Errorf("round %d: %s/%s claimed (token %d) while its claim %d is running", r, k.UserID, k.WorkKey, it.Claim.Token, prev.claim.Token)
			}
			f.live[k] = liveClaim{claim: it.Claim, round: r + 1 + f.rng.IntN(3)}
			f.claimedAt[k.UserID] = append(f.claimedAt[k.UserID], now)
		}
	}
	f.checkLimits(r, now)
	f.complete(ctx, r, now, false)
}

// checkLimits checks the caps: a capped user never has more claims running than its cap.
func (f *fleet) checkLimits(r int, now time.Time) {
	inFlight := map[string]int{}
	for k, l := range f.live {
		if l.claim.Until.After(now) {
			inFlight[k.UserID]++
		}
	}
	for id, n := range inFlight {
		if m := f.limits[id].MaxInFlight; m > 0 && n > m {
			f.t.Errorf("round %d: %s has %d claims in flight, its cap is %d", r, id, n, m)
		}
	}
}

// complete completes, through a dispatcher's Index picked at random, each claim due by
// round r (every claim when all), as a miss run at now.
func (f *fleet) complete(ctx context.Context, r int, now time.Time, all bool) {
	f.t.Helper()
	var done []duework.Done
	var keys []duework.Key
	for k, l := range f.live {
		if all || l.round <= r {
			next := duework.Advance(l.claim.Entry, fleetTier, false, now)
			done = append(done, duework.Done{Tenant: mustTenant(f.t, k.UserID), Claim: l.claim, Next: next})
			keys = append(keys, k)
		}
	}
	errs, err := f.idxs[f.rng.IntN(len(f.idxs))].CompleteMany(ctx, done)
	if err != nil {
		f.t.Fatalf("round %d: CompleteMany: %v", r, err)
	}
	for i, k := range keys {
		if errs[i] != nil {
			f.t.Errorf("round %d: completing %s/%s: %v", r, k.UserID, k.WorkKey, errs[i])
		}
		f.completed[k]++
		delete(f.live, k)
	}
}

// finish completes every claim still running and checks what the table holds: every entry
// ran, none is lost or claimed, each one's streak counts its completions, and no
// rate-limited user was served faster than its rate allows in any window.
func (f *fleet) finish(ctx context.Context, rounds int) {
	f.t.Helper()
	f.complete(ctx, rounds, fleetT0.Add(time.Duration(rounds)*fleetStep), true)
	for _, k := range f.keys {
		if f.completed[k] == 0 {
			f.t.Errorf("%s/%s never ran", k.UserID, k.WorkKey)
		}
		es, err := f.idxs[0].Entries(ctx, k.UserID, "", duework.MaxLimit)
		if err != nil {
			f.t.Fatal(err)
		}
		i := slices.IndexFunc(es, func(s duework.EntryState) bool { return s.Entry.WorkKey == k.WorkKey })
		switch {
		case i < 0:
			f.t.Errorf("%s/%s is lost", k.UserID, k.WorkKey)
		case !es[i].ClaimedUntil.IsZero():
			f.t.Errorf("%s/%s is still claimed after every claim was completed", k.UserID, k.WorkKey)
		case es[i].Entry.MissStreak != f.completed[k]:
			f.t.Errorf("%s/%s: streak %d after %d completions", k.UserID, k.WorkKey, es[i].Entry.MissStreak, f.completed[k])
		}
	}
	for id, ts := range f.claimedAt {
		if e := f.limits[id].Every; e > 0 {
			for i := range ts {
				for j := i; j < len(ts); j++ {
					if n, most := j-i+1, 1+int(ts[j].Sub(ts[i])/e); n > most {
						f.t.Errorf("%s: %d claims in [%v, %v], its rate allows %d", id, n, ts[i].Sub(fleetT0), ts[j].Sub(fleetT0), most)
					}
				}
			}
		}
	}
}

// fleetIndexes opens the stores of one fresh table n times, each over the client that
// wrap makes of the test's (nil: the test's itself), and returns their Indexes.
func fleetIndexes(t *testing.T, n, buckets int, wrap func(c api, table string) api) []*Index {
	t.Helper()
	c := testClient(t)
	table := tableName("rota-fleet")
	dropTable(t, c, table)
	var idxs []*Index
	for range n {
		var a api = c
		if wrap != nil {
			a = wrap(c, table)
		}
		st, err := openStores(context.Background(), a, table, StoresConfig{Buckets: buckets})
		if err != nil {
			t.Fatal(err)
		}
		idxs = append(idxs, st.Index)
	}
	return idxs
}

// Four dispatchers, each over an Index of its own on one table, dispatch at once round
// after round: their reads are disjoint (no Ready returns a user another holds), no entry
// is claimed while its claim runs, the caps and the rate hold across them, and every entry
// is served; afterwards nothing is lost and every completion is in the table.
func TestFourDispatchers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFleet(t, fleetIndexes(t, 4, 4, nil), 24, 3)
	const rounds = 24
	for r := range rounds {
		f.round(ctx, r)
	}
	f.finish(ctx, rounds)
}

// Two dispatchers whose clients answer the global indexes from copies several queries
// old, as DynamoDB's eventually consistent indexes may: a stale read costs a user skipped
// (its hold's condition fails), never an entry claimed twice nor one lost.
func TestStaleIndexReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stale := func(c api, table string) api { return &staleGSI{api: c, table: table, every: 5} }
	f := newFleet(t, fleetIndexes(t, 2, 2, stale), 18, 3)
	const rounds = 32
	for r := range rounds {
		f.round(ctx, r)
	}
	f.finish(ctx, rounds)
}

// holding is a dispatcher's Index that records, in a log shared by the fleet, which users
// its Ready calls returned with a hold and have not been claimed or released since, and
// fails the test when a Ready returns a user that another dispatcher holds: the
// dispatchers' reads must be disjoint.
type holding struct {
	*Index
	id  int
	log *readLog
}

type readLog struct {
	t      *testing.T
	mu     sync.Mutex
	holder map[string]int // user → the dispatcher holding it
}

func (h *holding) Ready(ctx context.Context, q duework.ReadyQuery) (duework.ReadyPage, error) {
	page, err := h.Index.Ready(ctx, q)
	if q.Hold > 0 {
		h.log.mu.Lock()
		for _, hd := range page.Heads {
			if other, ok := h.log.holder[hd.UserID]; ok && other != h.id {
				h.log.t.Errorf("dispatcher %d read %s while dispatcher %d holds it", h.id, hd.UserID, other)
			}
			h.log.holder[hd.UserID] = h.id
		}
		h.log.mu.Unlock()
	}
	return page, err
}

// drop forgets the holds of users before a call that ends them, so that no other
// dispatcher's read can come between.
func (h *holding) drop(users []string) {
	h.log.mu.Lock()
	defer h.log.mu.Unlock()
	for _, u := range users {
		if h.log.holder[u] == h.id {
			delete(h.log.holder, u)
		}
	}
}

func (h *holding) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	users := make([]string, len(keys))
	for i, k := range keys {
		users[i] = k.UserID
	}
	h.drop(users)
	return h.Index.Claim(ctx, keys, now, until)
}

func (h *holding) Release(ctx context.Context, userIDs []string, heldUntil time.Time) error {
	h.drop(userIDs)
	return h.Index.Release(ctx, userIDs, heldUntil)
}

// Copies of one item reach workers of two processes at once: across both, exactly one
// StartClaims of the claim succeeds and every other copy gets ErrClaimStarted, so the item
// runs once; the started claim can no longer be handed back, and it completes.
func TestStartClaimsAcrossProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	idxs := fleetIndexes(t, 2, 1, nil)
	tc := mustTenant(t, "ana")
	if err := idxs[0].Schedule(ctx, tc, duework.Entry{UserID: "ana", WorkKey: "jobs", DueAt: fleetT0}); err != nil {
		t.Fatal(err)
	}
	cs, err := idxs[1].Claim(ctx, []duework.Key{{UserID: "ana", WorkKey: "jobs"}}, fleetT0, fleetT0.Add(time.Minute))
	if err != nil || len(cs) != 1 {
		t.Fatalf("Claim = %v, %v", cs, err)
	}
	const copies = 8
	outcomes := make([]error, copies)
	var wg sync.WaitGroup
	for i := range copies {
		wg.Go(func() {
			errs, err := idxs[i%2].StartClaims(ctx, []duework.Unclaim{{Tenant: tc, Claim: cs[0]}})
			if err != nil {
				outcomes[i] = err
				return
			}
			outcomes[i] = errs[0]
		})
	}
	wg.Wait()
	started := 0
	for i, err := range outcomes {
		switch {
		case err == nil:
			started++
		case !errors.Is(err, duework.ErrClaimStarted):
			t.Errorf("copy %d: %v, want nil or ErrClaimStarted", i, err)
		}
	}
	if started != 1 {
		t.Fatalf("%d copies started the claim, want exactly 1", started)
	}
	if errs, err := idxs[0].Unclaim(ctx, []duework.Unclaim{{Tenant: tc, Claim: cs[0]}}); err != nil || !errors.Is(errs[0], duework.ErrClaimStarted) {
		t.Fatalf("Unclaim of the started claim = %v, %v; want ErrClaimStarted", errs, err)
	}
	next := duework.Advance(cs[0].Entry, fleetTier, true, fleetT0.Add(time.Second))
	if err := idxs[1].Complete(ctx, tc, cs[0], next); err != nil {
		t.Fatalf("Complete of the started claim: %v", err)
	}
}
