package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"pgregory.net/rapid"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// route sets user's limits (and group) through the Index.
func route(tb testing.TB, idx *postgres.Index, user, group string, l duework.Limits) {
	tb.Helper()
	if err := idx.Route(context.Background(), []duework.Route{{UserID: user, Group: group, Limits: l}}); err != nil {
		tb.Fatal(err)
	}
}

func userState(tb testing.TB, idx *postgres.Index, user string, now time.Time) duework.UserState {
	tb.Helper()
	st, err := idx.User(context.Background(), user, now)
	if err != nil {
		tb.Fatalf("User(%s): %v", user, err)
	}
	return st
}

func claimKeysOf(tb testing.TB, idx *postgres.Index, keys []duework.Key, now, until time.Time) []string {
	tb.Helper()
	cs, err := idx.Claim(context.Background(), keys, now, until)
	if err != nil {
		tb.Fatalf("Claim: %v", err)
	}
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Entry.WorkKey
	}
	return out
}

// Route stores the limits with the group, Every to the nanosecond, and User and Ready
// report them; a route with bad limits is duework.ErrInvalid naming the field, and nothing
// of the call is written, the other routes included.
func TestRouteStoresLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	idx := postgres.NewIndex(pool)
	schedule(t, idx, "amy", "a", t0)
	schedule(t, idx, "bo", "b", t0)
	l := duework.Limits{Weight: 7, MaxInFlight: 3, Every: time.Nanosecond, Burst: 5}
	route(t, idx, "amy", "pro", l)
	if st := userState(t, idx, "amy", t0); st.Group != "pro" || st.Limits != l {
		t.Fatalf("after Route User(amy) = %+v; want group pro and limits %+v", st, l)
	}
	p := ready(t, idx, duework.ReadyQuery{Group: "pro", Now: t0, Users: 5, PerUser: 1})
	if len(p.Heads) != 1 || p.Heads[0].Limits != l || p.Heads[0].InFlight != 0 {
		t.Fatalf("Ready of pro = %+v; want amy with limits %+v", p, l)
	}
	for _, bad := range []struct {
		field  string
		limits duework.Limits
	}{
		{"Weight", duework.Limits{Weight: duework.MaxWeight + 1}},
		{"Weight", duework.Limits{Weight: -1}},
		{"MaxInFlight", duework.Limits{MaxInFlight: duework.MaxLimit + 1}},
		{"Every", duework.Limits{Every: -time.Nanosecond}},
		{"Burst", duework.Limits{Burst: -1}},
	} {
		err := idx.Route(ctx, []duework.Route{{UserID: "bo", Group: "pro"}, {UserID: "amy", Group: "free", Limits: bad.limits}})
		if !errors.Is(err, duework.ErrInvalid) || !strings.Contains(err.Error(), bad.field) {
			t.Errorf("Route with %+v = %v; want duework.ErrInvalid naming %s", bad.limits, err, bad.field)
		}
	}
	if st := userState(t, idx, "amy", t0); st.Group != "pro" || st.Limits != l {
		t.Errorf("after the refused routes User(amy) = %+v; want it unchanged", st)
	}
	if st := userState(t, idx, "bo", t0); st.Group != "" {
		t.Errorf("after the refused routes User(bo) = %+v; want it unrouted", st)
	}
	// The largest limits are stored and read back.
	top := duework.Limits{Weight: duework.MaxWeight, MaxInFlight: duework.MaxLimit, Every: math.MaxInt64, Burst: duework.MaxLimit}
	route(t, idx, "bo", "", top)
	if st := userState(t, idx, "bo", t0); st.Limits != top {
		t.Errorf("User(bo) = %+v; want limits %+v", st, top)
	}
	checkReadyAt(t, pool)
}

// MaxInFlight: Claim claims no more of a user's keys than its free slots, in the order of
// the keys; a user with no free slot is not ready until a claim ends (by time, with no
// sweep) or is completed (at once); Ready gives it no more Due entries than its free
// slots, with More.
func TestMaxInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	idx := postgres.NewIndex(pool)
	s := func(d int) time.Time { return t0.Add(time.Duration(d) * time.Second) }
	var keys []duework.Key
	for _, k := range []string{"e", "d", "c", "b", "a"} {
		keys = append(keys, schedule(t, idx, "u", k, t0).Key())
	}
	route(t, idx, "u", "", duework.Limits{MaxInFlight: 2})
	if got := claimKeysOf(t, idx, keys, s(0), s(10)); !slices.Equal(got, []string{"e", "d"}) {
		t.Fatalf("Claim of 5 keys with MaxInFlight 2 = %v; want the first two in key order, e d", got)
	}
	if got := claimKeysOf(t, idx, keys, s(1), s(30)); len(got) != 0 {
		t.Fatalf("a second Claim with both slots taken = %v; want none", got)
	}
	if st := userState(t, idx, "u", s(1)); st.InFlight != 2 || !st.Turn.Equal(s(10)) {
		t.Fatalf("User(u) with two claims until t0+10s = %+v; want InFlight 2 and Turn t0+10s", st)
	}
	if got := showPage(ready(t, idx, duework.ReadyQuery{Now: s(9), Users: 5, PerUser: 5})); got != "next -" {
		t.Fatalf("Ready at t0+9s = %s; want nothing: no free slot", got)
	}
	// The claims end by time: at t0+10s both slots are free again, no call needed.
	p := ready(t, idx, duework.ReadyQuery{Now: s(10), Users: 5, PerUser: 5})
	if got := showPage(p); got != "u(served 0s turn 10s [a b]+) next -" || p.Heads[0].InFlight != 0 {
		t.Fatalf("Ready at t0+10s = %s (InFlight %d); want u with two entries and More, none in flight", got, p.Heads[0].InFlight)
	}
	cs, err := idx.Claim(ctx, keys[2:], s(10), s(20))
	if err != nil || len(cs) != 2 {
		t.Fatalf("Claim at t0+10s = %v, %v; want two", cs, err)
	}
	// A completion frees its slot at once.
	next := cs[0].Entry
	next.DueAt = s(100)
	if err := idx.Complete(ctx, mustTC(t, "u"), cs[0], next); err != nil {
		t.Fatal(err)
	}
	p = ready(t, idx, duework.ReadyQuery{Now: s(11), Users: 5, PerUser: 5})
	if len(p.Heads) != 1 || len(p.Heads[0].Due) != 1 || !p.Heads[0].More || p.Heads[0].InFlight != 1 || !p.Heads[0].Turn.Equal(s(10)) {
		t.Fatalf("Ready after the completion = %s (InFlight %v); want u with one entry and More, one in flight", showPage(p), p.Heads)
	}
	// Unclaim frees a slot too, and keeps LastServed.
	errs, err := idx.Unclaim(ctx, []duework.Unclaim{{Tenant: mustTC(t, "u"), Claim: cs[1]}})
	if err != nil || errs[0] != nil {
		t.Fatalf("Unclaim = %v, %v", errs, err)
	}
	if st := userState(t, idx, "u", s(11)); st.InFlight != 0 || !st.LastServed.Equal(s(10)) || !st.Turn.Equal(s(10)) {
		t.Fatalf("User(u) after the Unclaim = %+v; want nothing in flight, LastServed and Turn t0+10s", st)
	}
	checkReadyAt(t, pool)
}

// Rate: with Every and Burst, a user is claimed at most Burst items at once and then one
// per Every; its Turn is the instant its next item is allowed; Unclaim refunds nothing.
func TestRate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	idx := postgres.NewIndex(pool)
	s := func(d int) time.Time { return t0.Add(time.Duration(d) * time.Second) }
	var keys []duework.Key
	for k := range 8 {
		keys = append(keys, schedule(t, idx, "u", fmt.Sprintf("k%d", k), t0).Key())
	}
	route(t, idx, "u", "", duework.Limits{Every: 10 * time.Second, Burst: 3})
	if got := claimKeysOf(t, idx, keys, s(0), s(1)); len(got) != 3 {
		t.Fatalf("Claim with Burst 3 = %v; want three", got)
	}
	// The mark is t0+30s: the next item is allowed at t0+10s, and then one per 10 s.
	if st := userState(t, idx, "u", s(2)); !st.Turn.Equal(s(10)) {
		t.Fatalf("User(u) after the burst = %+v; want Turn t0+10s", st)
	}
	if got := showPage(ready(t, idx, duework.ReadyQuery{Now: s(9), Users: 5, PerUser: 5})); got != "next -" {
		t.Fatalf("Ready at t0+9s = %s; want nothing: the rate holds u back", got)
	}
	p := ready(t, idx, duework.ReadyQuery{Now: s(15), Users: 5, PerUser: 5})
	if len(p.Heads) != 1 || len(p.Heads[0].Due) != 1 || !p.Heads[0].More || !p.Heads[0].Turn.Equal(s(10)) {
		t.Fatalf("Ready at t0+15s = %s; want u, Turn t0+10s, with one entry (the rate's allowance) and More", showPage(p))
	}
	cs, err := idx.Claim(ctx, keys, s(15), s(16))
	if err != nil || len(cs) != 1 {
		t.Fatalf("Claim at t0+15s = %v, %v; want one", cs, err)
	}
	// Handing it back refunds nothing: the mark is now t0+40s, the next item at t0+20s.
	if _, err := idx.Unclaim(ctx, []duework.Unclaim{{Tenant: mustTC(t, "u"), Claim: cs[0]}}); err != nil {
		t.Fatal(err)
	}
	if st := userState(t, idx, "u", s(15)); !st.Turn.Equal(s(20)) {
		t.Fatalf("User(u) after the Unclaim = %+v; want Turn t0+20s", st)
	}
	// After a long pause the allowance is the burst again, never more.
	if got := claimKeysOf(t, idx, keys, s(1000), s(1001)); len(got) != 3 {
		t.Fatalf("Claim after a long pause = %v; want three, the burst", got)
	}
	checkReadyAt(t, pool)
}

// Weight: a user of weight w > 1 claimed k < w items moves only floor(L·k/w) µs from its
// Turn T towards now (L = now − T), where a user of weight 1 goes to now; k ≥ w moves it to
// now. Ready scales PerUser by the weight.
func TestWeightStride(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	idx := postgres.NewIndex(pool)
	for k := range 10 {
		schedule(t, idx, "heavy", fmt.Sprintf("k%d", k), t0)
		schedule(t, idx, "light", fmt.Sprintf("k%d", k), t0)
	}
	route(t, idx, "heavy", "", duework.Limits{Weight: 3})
	now := t0.Add(10*time.Second + 7*time.Microsecond)
	p := ready(t, idx, duework.ReadyQuery{Now: now, Users: 5, PerUser: 2})
	if len(p.Heads) != 2 || len(p.Heads[0].Due) != 6 || len(p.Heads[1].Due) != 2 {
		t.Fatalf("Ready with PerUser 2 = %s; want heavy (weight 3) with 6 entries, light with 2", showPage(p))
	}
	one := []duework.Key{{UserID: "heavy", WorkKey: "k0"}, {UserID: "light", WorkKey: "k0"}}
	if _, err := idx.Claim(ctx, one, now, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// L = 10,000,007 µs; heavy moves floor(L/3) = 3,333,335 µs.
	if st := userState(t, idx, "heavy", now); !st.Turn.Equal(t0.Add(3333335*time.Microsecond)) || !st.LastServed.Equal(now) {
		t.Fatalf("User(heavy) after one claim = %+v; want Turn t0+3.333335s, LastServed now", st)
	}
	if st := userState(t, idx, "light", now); !st.Turn.Equal(now) {
		t.Fatalf("User(light) after one claim = %+v; want Turn now", st)
	}
	// Three at once (k ≥ w) move it to now.
	later := now.Add(time.Second)
	three := []duework.Key{{UserID: "heavy", WorkKey: "k1"}, {UserID: "heavy", WorkKey: "k2"}, {UserID: "heavy", WorkKey: "k3"}}
	if cs, err := idx.Claim(ctx, three, later, later.Add(time.Hour)); err != nil || len(cs) != 3 {
		t.Fatalf("Claim of three = %v, %v", cs, err)
	}
	if st := userState(t, idx, "heavy", later); !st.Turn.Equal(later) {
		t.Fatalf("User(heavy) after three claims = %+v; want Turn %v", st, later)
	}
	checkReadyAt(t, pool)
}

// The largest limits and times at the edge of the range compute without overflow: the
// rate mark saturates at MaxTime, and the user is never ready again, its Turn MaxTime's last
// microsecond.
func TestLimitsSaturate(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	idx := postgres.NewIndex(pool)
	var keys []duework.Key
	for k := range 3 {
		keys = append(keys, schedule(t, idx, "u", fmt.Sprintf("k%d", k), t0).Key())
	}
	route(t, idx, "u", "", duework.Limits{Weight: duework.MaxWeight, MaxInFlight: duework.MaxLimit, Every: math.MaxInt64, Burst: duework.MaxLimit})
	if got := claimKeysOf(t, idx, keys[:2], t0, t0.Add(time.Hour)); len(got) != 2 {
		t.Fatalf("Claim = %v; want two", got)
	}
	st := userState(t, idx, "u", t0)
	if st.InFlight != 2 || st.Turn.Before(t0) {
		t.Fatalf("User(u) = %+v", st)
	}
	if p := ready(t, idx, duework.ReadyQuery{Now: vocab.MaxTime, Users: 1, PerUser: duework.MaxLimit}); len(p.Heads) != 1 {
		t.Fatalf("Ready at MaxTime = %s; want u", showPage(p))
	}
	// One item per Every of 292 years and a burst of a million: many claims saturate the
	// mark at MaxTime.
	route(t, idx, "u", "", duework.Limits{Every: math.MaxInt64, Burst: 1})
	if got := claimKeysOf(t, idx, keys[2:], vocab.MaxTime.Add(-time.Hour), vocab.MaxTime); len(got) != 1 {
		t.Fatalf("Claim near MaxTime = %v; want one", got)
	}
	if st := userState(t, idx, "u", vocab.MaxTime.Add(-time.Hour)); !st.Turn.Equal(vocab.MaxTime.Truncate(time.Microsecond)) {
		t.Fatalf("User(u) after a claim near MaxTime = %+v; want Turn %v", st, vocab.MaxTime.Truncate(time.Microsecond))
	}
	checkReadyAt(t, pool)
}

// User reports a user's place, ErrNotFound for a user the index does not store; Entries
// pages a user's entries by WorkKey, each with its claim's Until, and reads nothing of
// another user.
func TestUserAndEntries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	idx := postgres.NewIndex(pool)
	for _, k := range []string{"c", "a", "b", "d"} {
		schedule(t, idx, "amy", k, t0)
	}
	schedule(t, idx, "bo", "a", t0)
	if _, err := idx.User(ctx, "cy", t0); !errors.Is(err, duework.ErrNotFound) {
		t.Fatalf("User(cy) = %v; want ErrNotFound", err)
	}
	if _, err := idx.User(ctx, "", t0); !errors.Is(err, duework.ErrInvalid) {
		t.Fatalf("User(\"\") = %v; want ErrInvalid", err)
	}
	p := ready(t, idx, duework.ReadyQuery{Now: t0, Users: 1, PerUser: 1, Hold: time.Minute})
	if st := userState(t, idx, p.Heads[0].UserID, t0); !st.HeldUntil.Equal(t0.Add(time.Minute)) || !st.Turn.Equal(t0) {
		t.Fatalf("User of the held user = %+v; want HeldUntil t0+1m and Turn t0", st)
	}
	if st := userState(t, idx, p.Heads[0].UserID, t0.Add(time.Minute)); !st.HeldUntil.IsZero() {
		t.Fatalf("User once the hold ended = %+v; want no HeldUntil", st)
	}
	cs, err := idx.Claim(ctx, []duework.Key{{UserID: "amy", WorkKey: "b"}}, t0, t0.Add(time.Hour))
	if err != nil || len(cs) != 1 {
		t.Fatal(cs, err)
	}
	var got []string
	for after := ""; ; {
		page, err := idx.Entries(ctx, "amy", after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			got = append(got, fmt.Sprintf("%s:%s", e.Entry.WorkKey, since(e.ClaimedUntil)))
			after = e.Entry.WorkKey
		}
	}
	if want := []string{"a:-", "b:1h0m0s", "c:-", "d:-"}; !slices.Equal(got, want) {
		t.Fatalf("Entries of amy, 3 a page = %v; want %v", got, want)
	}
	if es, err := idx.Entries(ctx, "cy", "", 10); err != nil || len(es) != 0 {
		t.Fatalf("Entries of a user the index does not store = %v, %v; want none", es, err)
	}
	for _, bad := range []func() error{
		func() error { _, err := idx.Entries(ctx, "", "", 1); return err },
		func() error { _, err := idx.Entries(ctx, "amy", "a\x00", 1); return err },
		func() error { _, err := idx.Entries(ctx, "amy", "", 0); return err },
		func() error { _, err := idx.Entries(ctx, "amy", "", duework.MaxLimit+1); return err },
	} {
		if err := bad(); !errors.Is(err, duework.ErrInvalid) {
			t.Errorf("Entries with a bad argument = %v; want ErrInvalid", err)
		}
	}
}

// StartClaims starts a claim only when named with its own token and Until, each item
// under its own Context: a forged Until is ErrClaimLost, even one within the same
// microsecond, which the server would round onto the stored one; a bad item gets its
// validation error and marks nothing; a claim given twice is started once.
func TestStartClaimsCurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	idx := postgres.NewIndex(pool)
	a, b := schedule(t, idx, "amy", "a", t0), schedule(t, idx, "bo", "b", t0)
	cs, err := idx.Claim(ctx, []duework.Key{a.Key(), b.Key()}, t0, t0.Add(time.Minute))
	if err != nil || len(cs) != 2 {
		t.Fatal(cs, err)
	}
	stale := cs[1]
	stale.Token++
	later, nearly := cs[0], cs[0] // forged Untils: a microsecond later, and 500 ns later
	later.Until = later.Until.Add(time.Microsecond)
	nearly.Until = nearly.Until.Add(500 * time.Nanosecond)
	errs, err := idx.StartClaims(ctx, []duework.Unclaim{
		{Tenant: mustTC(t, "amy"), Claim: later},
		{Tenant: mustTC(t, "amy"), Claim: nearly},
		{Tenant: mustTC(t, "bo"), Claim: stale},
		{Tenant: mustTC(t, "amy"), Claim: cs[1]}, // bo's claim under amy
		{Claim: cs[0]},
		{Tenant: mustTC(t, "amy"), Claim: cs[0]},
		{Tenant: mustTC(t, "amy"), Claim: cs[0]},
	})
	if err != nil || len(errs) != 7 || !errors.Is(errs[0], duework.ErrClaimLost) || !errors.Is(errs[1], duework.ErrClaimLost) ||
		!errors.Is(errs[2], duework.ErrClaimLost) || !errors.Is(errs[3], duework.ErrInvalid) || errs[4] == nil ||
		errs[5] != nil || !errors.Is(errs[6], duework.ErrClaimStarted) {
		t.Fatalf("StartClaims = %v, %v; want ErrClaimLost, ErrClaimLost, ErrClaimLost, ErrInvalid, an error, nil, ErrClaimStarted", errs, err)
	}
	// bo's claim, named only forged or under amy, is current and unstarted.
	errs, err = idx.StartClaims(ctx, []duework.Unclaim{{Tenant: mustTC(t, "bo"), Claim: cs[1]}})
	if err != nil || len(errs) != 1 || errs[0] != nil {
		t.Fatalf("StartClaims of bo's claim = %v, %v; want nil", errs, err)
	}
}

// flowState is what a flow-control check reads of one user: its limits, rate mark,
// stride position, LastServed and Turn, and its entries with their claims.
type flowState struct {
	limits             duework.Limits
	mark               *big.Int
	pass, served, turn *time.Time
	entries            map[string]flowEntry
}

type flowEntry struct {
	due   time.Time
	until *time.Time
}

func readFlow(t *rapid.T, pool *pgxpool.Pool) map[string]*flowState {
	ctx := context.Background()
	out := map[string]*flowState{}
	rows, err := pool.Query(ctx, `SELECT user_id, weight, max_in_flight, every, burst, rate_mark::text, pass, last_served, turn FROM rota_users`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var w, m, b int
		var every int64
		var mark *string
		st := &flowState{entries: map[string]flowEntry{}}
		if err := rows.Scan(&id, &w, &m, &every, &b, &mark, &st.pass, &st.served, &st.turn); err != nil {
			t.Fatal(err)
		}
		st.limits = duework.Limits{Weight: w, MaxInFlight: m, Every: time.Duration(every), Burst: b}
		if mark != nil {
			st.mark, _ = new(big.Int).SetString(*mark, 10)
		}
		out[id] = st
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows, err = pool.Query(ctx, `SELECT user_id, work_key, due_at, claim_until FROM rota_due`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, key string
		var e flowEntry
		if err := rows.Scan(&id, &key, &e.due, &e.until); err != nil {
			t.Fatal(err)
		}
		out[id].entries[key] = e
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func nanos(tm time.Time) *big.Int {
	v := new(big.Int).Mul(big.NewInt(tm.Unix()), big.NewInt(1e9))
	return v.Add(v, big.NewInt(int64(tm.Nanosecond())))
}

// inFlightAt counts the user's claims that end after now.
func (st *flowState) inFlightAt(now time.Time) int {
	n := 0
	for _, e := range st.entries {
		if e.until != nil && e.until.After(now) {
			n++
		}
	}
	return n
}

// allowance is how many items the user's limits let it be claimed at now, the rules of
// duework.Index's "Flow control" written out: the least of its free slots and its rate
// allowance; -1 for no limit.
func (st *flowState) allowance(now time.Time) int64 {
	allow := int64(-1)
	if m := st.limits.MaxInFlight; m > 0 {
		allow = int64(max(0, m-st.inFlightAt(now)))
	}
	if e := st.limits.Every; e > 0 {
		b := int64(max(st.limits.Burst, 1))
		a := b
		if st.mark != nil && st.mark.Cmp(nanos(now)) > 0 {
			d := new(big.Int).Sub(st.mark, nanos(now))
			q, r := new(big.Int).QuoRem(d, big.NewInt(int64(e)), new(big.Int))
			if r.Sign() > 0 {
				q.Add(q, big.NewInt(1))
			}
			if q.Cmp(big.NewInt(b)) >= 0 {
				a = 0
			} else {
				a = b - q.Int64()
			}
		}
		if allow < 0 || a < allow {
			allow = a
		}
	}
	return allow
}

func visible(e flowEntry, now time.Time) bool {
	return !e.due.After(now) && (e.until == nil || !e.until.After(now))
}

// Claim, Ready, Route, Complete and Unclaim in random order over a few users with random
// limits, each Claim and Ready checked against the rules of duework.Index's "Flow
// control", computed from the stored state before the call: which keys Claim claims (in
// key order, within each user's free slots and rate allowance), the rate mark, stride
// position and LastServed it leaves, and how many Due entries Ready gives each head, with
// its InFlight. After every call the stored ReadyAt and Turn are checked (checkReadyAt).
func TestFlowControlRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	idx := postgres.NewIndex(pool)
	users := []string{"u0", "u1", "u2"}
	works := []string{"a", "b", "c", "d", "e"}
	everies := []time.Duration{0, 0, 700 * time.Nanosecond, time.Microsecond, time.Second, 2500 * time.Millisecond}
	rapid.Check(t, func(rt *rapid.T) {
		if _, err := pool.Exec(ctx, `DELETE FROM rota_due; DELETE FROM rota_users`); err != nil {
			rt.Fatal(err)
		}
		now := t0
		var claims []duework.Claim
		for range rapid.IntRange(5, 40).Draw(rt, "steps") {
			now = now.Add(time.Duration(rapid.SampledFrom([]int{0, 1, 250_000, 1_000_000, 3_000_000}).Draw(rt, "µs")) * time.Microsecond)
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op <= 1:
				u, k := rapid.SampledFrom(users).Draw(rt, "user"), rapid.SampledFrom(works).Draw(rt, "key")
				due := now.Add(time.Duration(rapid.IntRange(-3, 2).Draw(rt, "due")) * time.Second)
				if err := idx.Schedule(ctx, mustTC(rt, u), duework.Entry{UserID: u, WorkKey: k, DueAt: due}); err != nil {
					rt.Fatal(err)
				}
			case op == 2:
				l := duework.Limits{
					Weight:      rapid.IntRange(0, 4).Draw(rt, "weight"),
					MaxInFlight: rapid.IntRange(0, 3).Draw(rt, "cap"),
					Every:       rapid.SampledFrom(everies).Draw(rt, "every"),
					Burst:       rapid.IntRange(0, 3).Draw(rt, "burst"),
				}
				if err := idx.Route(ctx, []duework.Route{{UserID: rapid.SampledFrom(users).Draw(rt, "user"), Limits: l}}); err != nil {
					rt.Fatal(err)
				}
			case op <= 5:
				var keys []duework.Key
				for range rapid.IntRange(1, 8).Draw(rt, "keys") {
					keys = append(keys, duework.Key{UserID: rapid.SampledFrom(users).Draw(rt, "user"), WorkKey: rapid.SampledFrom(works).Draw(rt, "key")})
				}
				until := now.Add(time.Duration(rapid.IntRange(1, 4).Draw(rt, "for")) * time.Second)
				claims = append(claims, checkClaim(rt, pool, idx, keys, now, until)...)
			case op <= 7:
				checkReady(rt, pool, idx, duework.ReadyQuery{Now: now, Users: 3, PerUser: rapid.IntRange(1, 3).Draw(rt, "perUser")})
			case len(claims) > 0:
				i := rapid.IntRange(0, len(claims)-1).Draw(rt, "claim")
				c := claims[i]
				claims = slices.Delete(claims, i, i+1)
				tc := mustTC(rt, c.Entry.UserID)
				if op == 8 {
					next := c.Entry
					next.DueAt = now.Add(time.Second)
					if err := idx.Complete(ctx, tc, c, next); err != nil && !errors.Is(err, duework.ErrClaimLost) {
						rt.Fatal(err)
					}
				} else if _, err := idx.Unclaim(ctx, []duework.Unclaim{{Tenant: tc, Claim: c}}); err != nil {
					rt.Fatal(err)
				}
			}
			checkReadyAt(rt, pool)
		}
	})
}

// checkClaim runs Claim and checks it against the rules, from the state before it.
func checkClaim(t *rapid.T, pool *pgxpool.Pool, idx *postgres.Index, keys []duework.Key, now, until time.Time) []duework.Claim {
	before := readFlow(t, pool)
	want := map[duework.Key]bool{}
	k := map[string]int64{}
	for _, key := range keys {
		st := before[key.UserID]
		if st == nil || want[key] {
			continue
		}
		e, ok := st.entries[key.WorkKey]
		if !ok || !visible(e, now) {
			continue
		}
		if a := st.allowance(now); a >= 0 && k[key.UserID] >= a {
			continue
		}
		want[key] = true
		k[key.UserID]++
	}
	cs, err := idx.Claim(context.Background(), keys, now, until)
	if err != nil {
		t.Fatal(err)
	}
	got := map[duework.Key]bool{}
	for _, c := range cs {
		got[c.Entry.Key()] = true
	}
	if len(got) != len(want) {
		t.Fatalf("Claim(%v) at %s claimed %v; want %v", keys, since(now), got, want)
	}
	for key := range want {
		if !got[key] {
			t.Fatalf("Claim(%v) at %s claimed %v; want %v", keys, since(now), got, want)
		}
	}
	after := readFlow(t, pool)
	for u, n := range k {
		b, a := before[u], after[u]
		if !a.served.Equal(laterOf(b.served, now)) {
			t.Fatalf("%s: LastServed %v after a claim at %v, was %v", u, a.served, now, b.served)
		}
		if e := b.limits.Every; e > 0 {
			m := nanos(now)
			if b.mark != nil && b.mark.Cmp(m) > 0 {
				m = new(big.Int).Set(b.mark)
			}
			m.Add(m, new(big.Int).Mul(big.NewInt(n), big.NewInt(int64(e))))
			if m.Cmp(nanos(vocab.MaxTime)) > 0 {
				m = nanos(vocab.MaxTime)
			}
			if a.mark == nil || a.mark.Cmp(m) != 0 {
				t.Fatalf("%s: rate mark %v after %d claims at %v (Every %v), was %v; want %v", u, a.mark, n, now, e, b.mark, m)
			}
		}
		wantPass := laterOf(b.pass, now)
		w := int64(b.limits.EffectiveWeight())
		start := *b.turn
		if n < w && b.served != nil && b.served.Before(now) {
			// The stride starts no earlier than now − 3w·(now − LastServed).
			if lag := 3 * w * now.Sub(*b.served).Microseconds(); lag < now.Sub(vocab.MinTime).Microseconds() {
				start = laterOf(&start, now.Add(-time.Duration(lag)*time.Microsecond))
			}
		}
		if w > 1 && n < w && start.Before(now) {
			l := now.Sub(start).Microseconds()
			step := new(big.Int).Div(new(big.Int).Mul(big.NewInt(l), big.NewInt(n)), big.NewInt(w)).Int64()
			wantPass = laterOf(b.pass, start.Add(time.Duration(step)*time.Microsecond))
		}
		if !a.pass.Equal(wantPass) {
			t.Fatalf("%s: pass %v after %d claims at %v (weight %d, Turn %v, pass %v); want %v", u, a.pass, n, now, b.limits.Weight, b.turn, b.pass, wantPass)
		}
	}
	return cs
}

// laterOf is the later of a (nil for NULL) and b.
func laterOf(a *time.Time, b time.Time) time.Time {
	if a != nil && a.After(b) {
		return *a
	}
	return b
}

// checkReady runs Ready without a hold and checks each head's limits, InFlight, Due count
// (the least of its allowance and PerUser × weight, and of its visible entries) and More.
func checkReady(t *rapid.T, pool *pgxpool.Pool, idx *postgres.Index, q duework.ReadyQuery) {
	before := readFlow(t, pool)
	p, err := idx.Ready(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range p.Heads {
		st := before[h.UserID]
		n := 0
		for _, e := range st.entries {
			if visible(e, q.Now) {
				n++
			}
		}
		limit := int64(q.PerUser * st.limits.EffectiveWeight())
		if a := st.allowance(q.Now); a >= 0 && a < limit {
			limit = a
		}
		want := min(int64(n), limit)
		if int64(len(h.Due)) != want || h.More != (n > len(h.Due)) || h.Limits != st.limits || h.InFlight != st.inFlightAt(q.Now) || want == 0 {
			t.Fatalf("Ready at %s: head %s has %d Due (More %v), InFlight %d, limits %+v; want %d Due of %d visible, InFlight %d, limits %+v, and at least one",
				since(q.Now), h.UserID, len(h.Due), h.More, h.InFlight, h.Limits, want, n, st.inFlightAt(q.Now), st.limits)
		}
	}
}

// Claimers that skip Ready — stale, or racing — on four pools at once, each asking for
// every key of a capped user and of a rate-limited one at the same instant, get no more
// between them than the cap and the rate allow: the limits are decided under the users'
// row locks, after every earlier claim of theirs committed.
func TestLimitsHoldAcrossPools(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.Schema(t, "rota_test")
	setup := pgtest.PoolIn(t, schema, 2)
	if err := postgres.Migrate(ctx, setup); err != nil {
		t.Fatal(err)
	}
	idx := postgres.NewIndex(setup)
	var keys []duework.Key
	for k := range 12 {
		keys = append(keys, schedule(t, idx, "capped", fmt.Sprintf("k%02d", k), t0).Key())
		keys = append(keys, schedule(t, idx, "rated", fmt.Sprintf("k%02d", k), t0).Key())
	}
	route(t, idx, "capped", "", duework.Limits{MaxInFlight: 3})
	route(t, idx, "rated", "", duework.Limits{Every: 2 * time.Second, Burst: 2})
	idxs := make([]*postgres.Index, 4)
	for i := range idxs {
		idxs[i] = postgres.NewIndex(pgtest.PoolIn(t, schema, 2))
	}
	for round := range 6 {
		now := t0.Add(time.Duration(round) * time.Second)
		got := map[string]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				mine := slices.Clone(keys)
				slices.Reverse(mine[:w*3]) // each in an order of its own
				cs, err := idxs[w%len(idxs)].Claim(ctx, mine, now, now.Add(time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, c := range cs {
					got[c.Entry.UserID]++
				}
			})
		}
		wg.Wait()
		// The capped user's claims last one second, so each round has all 3 slots; the
		// rate allows the burst of 2 in the first round, then one every 2 s.
		wantRated := 2
		if round > 0 {
			wantRated = (round + 1) % 2
		}
		if got["capped"] != 3 || got["rated"] != wantRated {
			t.Fatalf("round %d: 8 claimers on 4 pools got %d of capped (cap 3) and %d of rated; want 3 and %d", round, got["capped"], got["rated"], wantRated)
		}
	}
	checkReadyAt(t, setup)
}
