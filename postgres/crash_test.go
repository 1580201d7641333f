package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// crashFixture is a migrated schema with 10 users u0…u9 holding 3 entries k0…k2 each, due
// at t0, t0+1s and t0+2s, and the keys of all 30 as user:key, sorted.
func crashFixture(t *testing.T) (schema string, setup *pgxpool.Pool, want []string) {
	t.Helper()
	schema = pgtest.Schema(t, "rota_test")
	setup = pgtest.PoolIn(t, schema, 2)
	if err := postgres.Migrate(context.Background(), setup); err != nil {
		t.Fatal(err)
	}
	idx := postgres.NewIndex(setup)
	for u := range 10 {
		for k := range 3 {
			e := schedule(t, idx, fmt.Sprintf("u%d", u), fmt.Sprintf("k%d", k), t0.Add(time.Duration(k)*time.Second))
			want = append(want, e.UserID+":"+e.WorkKey)
		}
	}
	slices.Sort(want)
	return schema, setup, want
}

// headKeys lists a page's entries as user:key, sorted.
func headKeys(p duework.ReadyPage) []string {
	var out []string
	for _, h := range p.Heads {
		for _, e := range h.Due {
			out = append(out, e.UserID+":"+e.WorkKey)
		}
	}
	slices.Sort(out)
	return out
}

func claimKeys(cs []duework.Claim) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Entry.UserID+":"+c.Entry.WorkKey)
	}
	slices.Sort(out)
	return out
}

func keysOf(p duework.ReadyPage) []duework.Key {
	var out []duework.Key
	for _, h := range p.Heads {
		for _, e := range h.Due {
			out = append(out, e.Key())
		}
	}
	return out
}

// A dispatcher that reads the queue with a hold and dies before it claims (its pool closed)
// hides its users from every other reader for the hold at most: until then another
// dispatcher, on its own pool, reads none of them; from the hold's end it reads all of them,
// in the same turn order, and claims every entry.
func TestDeadReaderHidesUsersForHoldAtMost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, setup, want := crashFixture(t)
	const hold = 30 * time.Second
	now := t0.Add(time.Minute)
	q := duework.ReadyQuery{Now: now, Users: 100, PerUser: 3, Hold: hold}

	doomedPool := pgtest.PoolIn(t, schema, 2)
	first := ready(t, postgres.NewIndex(doomedPool), q)
	if got := headKeys(first); !slices.Equal(got, want) {
		t.Fatalf("the first dispatcher read %v, want all of %v", got, want)
	}
	doomedPool.Close() // the process dies between Ready and Claim

	survivor := postgres.NewIndex(pgtest.PoolIn(t, schema, 2))
	for _, at := range []time.Time{now, now.Add(hold / 2), now.Add(hold - time.Microsecond)} {
		if p := ready(t, survivor, duework.ReadyQuery{Now: at, Users: 100, PerUser: 3, Hold: hold}); len(p.Heads) != 0 || !p.Next.IsZero() {
			t.Fatalf("at now%+v, while the dead dispatcher's hold lasts, another read %s", at.Sub(now), showPage(p))
		}
	}
	again := ready(t, survivor, duework.ReadyQuery{Now: now.Add(hold), Users: 100, PerUser: 3, Hold: hold})
	if got, want := showPage(again), showPage(first); got != want {
		t.Fatalf("once the hold ended the survivor read\n%s\nwant what the dead one read\n%s", got, want)
	}
	cs, err := survivor.Claim(ctx, keysOf(again), now.Add(hold), now.Add(hold+time.Minute))
	if err != nil || !slices.Equal(claimKeys(cs), want) {
		t.Fatalf("the survivor claimed %v, %v; want all of %v", claimKeys(cs), err, want)
	}
	checkReadyAt(t, setup)
}

// A worker that dies holding claims (its dispatcher's pool closed, nothing completed) loses
// nothing: the entries stay hidden until the claims end, then every one of them is visible
// again without anyone touching it, its user's Turn the claims' end; the dead worker's late
// Complete is then ErrClaimLost, and the new claimant's succeeds.
func TestDeadWorkerLeavesClaimsToExpire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, setup, want := crashFixture(t)
	const claimFor = 5 * time.Minute
	now := t0.Add(time.Minute)
	q := duework.ReadyQuery{Now: now, Users: 100, PerUser: 3, Hold: time.Minute}

	doomedPool := pgtest.PoolIn(t, schema, 2)
	doomed := postgres.NewIndex(doomedPool)
	first, err := doomed.Claim(ctx, keysOf(ready(t, doomed, q)), now, now.Add(claimFor))
	if err != nil || !slices.Equal(claimKeys(first), want) {
		t.Fatalf("the first dispatcher claimed %v, %v; want all of %v", claimKeys(first), err, want)
	}
	doomedPool.Close() // the process dies holding every claim

	survivor := postgres.NewIndex(pgtest.PoolIn(t, schema, 2))
	end := first[0].Until
	if p := ready(t, survivor, duework.ReadyQuery{Now: end.Add(-time.Microsecond), Users: 100, PerUser: 3}); len(p.Heads) != 0 {
		t.Fatalf("while the dead worker's claims last, another dispatcher read %s", showPage(p))
	}
	again := ready(t, survivor, duework.ReadyQuery{Now: end, Users: 100, PerUser: 3, Hold: time.Minute})
	if got := headKeys(again); !slices.Equal(got, want) {
		t.Fatalf("once the claims ended the survivor read %v, want all of %v", got, want)
	}
	for _, h := range again.Heads {
		if !h.Turn.Equal(end) || !h.LastServed.Equal(now) {
			t.Fatalf("%s's Turn %v, LastServed %v; want the claims' end %v and the dead claim's now %v", h.UserID, h.Turn, h.LastServed, end, now)
		}
	}
	second, err := survivor.Claim(ctx, keysOf(again), end, end.Add(claimFor))
	if err != nil || !slices.Equal(claimKeys(second), want) {
		t.Fatalf("the survivor claimed %v, %v; want all of %v", claimKeys(second), err, want)
	}
	old := first[0]
	if err := survivor.Complete(ctx, mustTC(t, old.Entry.UserID), old, old.Entry); !errors.Is(err, duework.ErrClaimLost) {
		t.Fatalf("the dead worker's late Complete after the entry was claimed again = %v, want ErrClaimLost", err)
	}
	var done []duework.Done
	for _, c := range second {
		next := c.Entry
		next.DueAt = end.Add(time.Hour)
		done = append(done, duework.Done{Tenant: mustTC(t, c.Entry.UserID), Claim: c, Next: next})
	}
	errs, err := survivor.CompleteMany(ctx, done)
	if err != nil || errors.Join(errs...) != nil {
		t.Fatalf("completing the survivor's claims: %v, %v", errs, err)
	}
	var n int
	if err := setup.QueryRow(ctx, `SELECT count(*) FROM rota_due`).Scan(&n); err != nil || n != len(want) {
		t.Fatalf("%d entries left of %d (%v)", n, len(want), err)
	}
	checkReadyAt(t, setup)
}

// A worker that dies holding a capped user's every slot frees them when its claims end,
// with no sweep: until then no dispatcher, on any pool, claims more of that user, however
// much of its work is due; from the claims' end it is ready again with all its slots, and
// its ended claims are claimed again within the cap.
func TestDeadWorkerSlotsFreeWhenClaimsEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, setup, _ := crashFixture(t)
	const claimFor = 5 * time.Minute
	now := t0.Add(time.Minute)
	users := make([]duework.Route, 10)
	for u := range users {
		users[u] = duework.Route{UserID: fmt.Sprintf("u%d", u), Limits: duework.Limits{MaxInFlight: 2}}
	}
	if err := postgres.NewIndex(setup).Route(ctx, users); err != nil {
		t.Fatal(err)
	}
	q := duework.ReadyQuery{Now: now, Users: 100, PerUser: 3, Hold: time.Minute}

	doomedPool := pgtest.PoolIn(t, schema, 2)
	doomed := postgres.NewIndex(doomedPool)
	page := ready(t, doomed, q)
	for _, h := range page.Heads {
		if len(h.Due) != 2 || !h.More {
			t.Fatalf("Ready gave %s %d entries (More %v); want its cap, 2, and More", h.UserID, len(h.Due), h.More)
		}
	}
	first, err := doomed.Claim(ctx, keysOf(page), now, now.Add(claimFor))
	if err != nil || len(first) != 20 {
		t.Fatalf("the first dispatcher claimed %v, %v; want two of each user", claimKeys(first), err)
	}
	doomedPool.Close() // the process dies holding every slot

	survivor := postgres.NewIndex(pgtest.PoolIn(t, schema, 2))
	end := first[0].Until
	var all []duework.Key
	for u := range 10 {
		for k := range 3 {
			all = append(all, duework.Key{UserID: fmt.Sprintf("u%d", u), WorkKey: fmt.Sprintf("k%d", k)})
		}
	}
	if p := ready(t, survivor, duework.ReadyQuery{Now: end.Add(-time.Microsecond), Users: 100, PerUser: 3}); len(p.Heads) != 0 {
		t.Fatalf("while the dead worker's claims last, another dispatcher read %s", showPage(p))
	}
	if cs, err := survivor.Claim(ctx, all, end.Add(-time.Microsecond), end.Add(claimFor)); err != nil || len(cs) != 0 {
		t.Fatalf("a claim of every key while the dead worker holds the slots = %v, %v; want none", claimKeys(cs), err)
	}
	if st := userState(t, survivor, "u3", end.Add(-time.Microsecond)); st.InFlight != 2 || !st.Turn.Equal(end) {
		t.Fatalf("User(u3) while the dead claims last = %+v; want 2 in flight, Turn their end", st)
	}
	again := ready(t, survivor, duework.ReadyQuery{Now: end, Users: 100, PerUser: 3, Hold: time.Minute})
	if len(again.Heads) != 10 {
		t.Fatalf("once the claims ended the survivor read %s; want every user", showPage(again))
	}
	for _, h := range again.Heads {
		if h.InFlight != 0 || len(h.Due) != 2 || !h.Turn.Equal(end) {
			t.Fatalf("%s at the claims' end: InFlight %d, %d Due, Turn %v; want 0, 2 (its cap) and %v", h.UserID, h.InFlight, len(h.Due), h.Turn, end)
		}
	}
	second, err := survivor.Claim(ctx, all, end, end.Add(claimFor))
	if err != nil || len(second) != 20 {
		t.Fatalf("the survivor claimed %v, %v; want two of each user, within the cap", claimKeys(second), err)
	}
	checkReadyAt(t, setup)
}

// dyingIndex is a dispatcher's Index whose process dies between its Ready and its Claim:
// the Claim closes the pool (so the cycle cannot hand its users back either) and fails.
type dyingIndex struct {
	*postgres.Index
	pool *pgxpool.Pool
}

func (x dyingIndex) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	x.pool.Close()
	return nil, errors.New("the process died")
}

// dispatchConfig is the crash tests' one lane, "all", taking every entry of every user.
func dispatchConfig() dispatch.Config {
	return dispatch.Config{
		Lanes:            []dispatch.LaneCapacity{{Lane: "all", PerUserLimit: 3, PerCycleLimit: 100}},
		GlobalBatchLimit: 100,
		LaneFor:          func(context.Context, string) (dispatch.Lane, error) { return "all", nil },
		ClaimFor:         5 * time.Minute,
		HoldFor:          30 * time.Second,
	}
}

// A Dispatcher whose process dies between its Ready and its Claim hides the users it read
// for HoldFor at most: another Dispatcher, on its own pool, dispatches none of their entries
// until then, and every one of them from the hold's end.
func TestDeadDispatcherHidesUsersForHoldForAtMost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, setup, want := crashFixture(t)
	routeAll(t, setup, "all")
	cfg := dispatchConfig()
	now := t0.Add(time.Minute)

	doomedPool := pgtest.PoolIn(t, schema, 2)
	doomed, err := dispatch.New(dyingIndex{postgres.NewIndex(doomedPool), doomedPool}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := doomed.Dispatch(ctx, now); err == nil {
		t.Fatalf("the dying dispatcher's cycle succeeded: %v", itemKeys(b))
	}

	survivor, err := dispatch.New(postgres.NewIndex(pgtest.PoolIn(t, schema, 2)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{now, now.Add(cfg.HoldFor - time.Microsecond)} {
		b, err := survivor.Dispatch(ctx, at)
		if err != nil || len(b.Items) != 0 {
			t.Fatalf("at now%+v, while the dead dispatcher's hold lasts, another dispatched %v (%v)", at.Sub(now), itemKeys(b), err)
		}
	}
	b, err := survivor.Dispatch(ctx, now.Add(cfg.HoldFor))
	if err != nil || !slices.Equal(itemKeys(b), want) {
		t.Fatalf("once the hold ended the survivor dispatched %v, %v; want all of %v", itemKeys(b), err, want)
	}
	checkReadyAt(t, setup)
}

// A Dispatcher that claims a batch and dies (its pool closed, nothing completed) loses
// nothing: another Dispatcher, on its own pool, finds the entries hidden until the claims
// end and dispatches every one of them again at that instant; the dead one's claims are
// lost.
func TestCrashedDispatcherLosesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, setup, want := crashFixture(t)
	cfg := dispatchConfig()
	now := t0.Add(time.Minute)

	doomedPool := pgtest.PoolIn(t, schema, 2)
	doomed, err := dispatch.New(postgres.NewIndex(doomedPool), cfg)
	if err != nil {
		t.Fatal(err)
	}
	first, err := doomed.Dispatch(ctx, now) // routes the users, then serves them
	if err != nil || !slices.Equal(itemKeys(first), want) {
		t.Fatalf("the first dispatcher claimed %v, %v; want all of %v", itemKeys(first), err, want)
	}
	doomedPool.Close() // the process dies holding every claim

	six := postgres.NewIndex(pgtest.PoolIn(t, schema, 2))
	survivor, err := dispatch.New(six, cfg)
	if err != nil {
		t.Fatal(err)
	}
	early, err := survivor.Dispatch(ctx, now.Add(cfg.ClaimFor-time.Microsecond))
	if err != nil || len(early.Items) != 0 {
		t.Fatalf("while the dead dispatcher's claims last, another dispatched %v (%v)", itemKeys(early), err)
	}
	again, err := survivor.Dispatch(ctx, now.Add(cfg.ClaimFor))
	if err != nil || !slices.Equal(itemKeys(again), want) {
		t.Fatalf("once the claims ended the survivor dispatched %v, %v; want all of %v", itemKeys(again), err, want)
	}
	old := first.Items[0].Claim
	if err := six.Complete(ctx, mustTC(t, old.Entry.UserID), old, old.Entry); !errors.Is(err, duework.ErrClaimLost) {
		t.Fatalf("completing the dead dispatcher's claim after it was re-claimed = %v, want ErrClaimLost", err)
	}
	var done []duework.Done
	for _, it := range again.Items {
		next := it.Claim.Entry
		next.DueAt = now.Add(time.Hour)
		done = append(done, duework.Done{Tenant: mustTC(t, next.UserID), Claim: it.Claim, Next: next})
	}
	if errs, err := six.CompleteMany(ctx, done); err != nil || errors.Join(errs...) != nil {
		t.Fatalf("completing the survivor's claims: %v, %v", errs, err)
	}
	checkReadyAt(t, setup)
}

// itemKeys lists a batch's entries as user:key, sorted.
func itemKeys(b dispatch.Batch) []string {
	var out []string
	for _, it := range b.Items {
		out = append(out, it.Claim.Entry.UserID+":"+it.Claim.Entry.WorkKey)
	}
	slices.Sort(out)
	return out
}
