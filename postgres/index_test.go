package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
	"github.com/rotaworks/rota/tenancy"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func mustTC(tb fataler, user string) tenancy.Context {
	tb.Helper()
	tc, err := tenancy.NewContext(user)
	if err != nil {
		tb.Fatal(err)
	}
	return tc
}

func schedule(tb testing.TB, idx duework.Index, user, key string, due time.Time) duework.Entry {
	tb.Helper()
	e := duework.Entry{UserID: user, WorkKey: key, Tier: "hot", DueAt: due}
	if err := idx.Schedule(context.Background(), mustTC(tb, user), e); err != nil {
		tb.Fatal(err)
	}
	return e
}

func ready(tb testing.TB, idx duework.Index, q duework.ReadyQuery) duework.ReadyPage {
	tb.Helper()
	p, err := idx.Ready(context.Background(), q)
	if err != nil {
		tb.Fatalf("Ready(%+v): %v", q, err)
	}
	return p
}

// since shows t as an offset from t0, "-" for the zero time.
func since(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Sub(t0).String()
}

// showPage shows a page compactly: each head's user, LastServed, Turn and entries' keys (a
// "+" after them for More), then Next.
func showPage(p duework.ReadyPage) string {
	var b strings.Builder
	for _, h := range p.Heads {
		keys := make([]string, len(h.Due))
		for i, e := range h.Due {
			keys[i] = e.WorkKey
		}
		more := ""
		if h.More {
			more = "+"
		}
		fmt.Fprintf(&b, "%s(served %s turn %s [%s]%s) ", h.UserID, since(h.LastServed), since(h.Turn), strings.Join(keys, " "), more)
	}
	fmt.Fprintf(&b, "next %s", since(p.Next))
	return b.String()
}

func sameEntry(a, b duework.Entry) bool {
	return a.UserID == b.UserID && a.WorkKey == b.WorkKey && a.Tier == b.Tier && a.DueAt.Equal(b.DueAt) &&
		a.LastRunAt.Equal(b.LastRunAt) && a.MissStreak == b.MissStreak
}

func userIDs(p duework.ReadyPage) []string {
	out := make([]string, len(p.Heads))
	for i, h := range p.Heads {
		out[i] = h.UserID
	}
	return out
}

// Backend errors come back as the core's sentinels.
func TestErrorsTranslated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("not migrated", func(t *testing.T) {
		idx := postgres.NewIndex(pgtest.PoolIn(t, pgtest.Schema(t, "rota_test"), 2))
		_, err := idx.Ready(ctx, duework.ReadyQuery{Now: t0, Users: 1, PerUser: 1})
		if !errors.Is(err, postgres.ErrNotMigrated) {
			t.Fatalf("Ready on an empty schema = %v, want ErrNotMigrated", err)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		pool := pgtest.Pool(t)
		idx := postgres.NewIndex(pool)
		e := schedule(t, idx, "u", "k", t0)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		amy := mustTC(t, "u")
		c := duework.Claim{Entry: e, Token: 1, Until: t0.Add(time.Minute)}
		calls := map[string]error{}
		_, calls["Ready"] = idx.Ready(cctx, duework.ReadyQuery{Now: t0, Users: 1, PerUser: 1, Hold: time.Minute})
		calls["Route"] = idx.Route(cctx, []duework.Route{{UserID: "u", Group: "pro"}})
		_, calls["Groups"] = idx.Groups(cctx, t0)
		calls["Release"] = idx.Release(cctx, []string{"u"}, t0)
		_, calls["DueBefore"] = idx.DueBefore(cctx, t0, 1)
		_, calls["Claim"] = idx.Claim(cctx, []duework.Key{e.Key()}, t0, t0.Add(time.Minute))
		_, calls["Get"] = idx.Get(cctx, amy, "k")
		calls["Schedule"] = idx.Schedule(cctx, amy, duework.Entry{UserID: "u", WorkKey: "k2", DueAt: t0})
		_, calls["ScheduleMissing"] = idx.ScheduleMissing(cctx, amy, []duework.Entry{{UserID: "u", WorkKey: "k3", DueAt: t0}})
		calls["Unschedule"] = idx.Unschedule(cctx, amy, "k")
		calls["Complete"] = idx.Complete(cctx, amy, c, e)
		_, calls["CompleteMany"] = idx.CompleteMany(cctx, []duework.Done{{Tenant: amy, Claim: c, Next: e}})
		calls["UnscheduleClaimed"] = idx.UnscheduleClaimed(cctx, amy, c)
		_, calls["StartClaims"] = idx.StartClaims(cctx, []duework.Unclaim{{Tenant: amy, Claim: c}})
		_, calls["Unclaim"] = idx.Unclaim(cctx, []duework.Unclaim{{Tenant: amy, Claim: c}})
		_, calls["User"] = idx.User(cctx, "u", t0)
		_, calls["Entries"] = idx.Entries(cctx, "u", "", 1)
		for name, err := range calls {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s with a cancelled ctx = %v, want context.Canceled", name, err)
			}
		}
		if got, err := idx.DueBefore(ctx, t0, 10); err != nil || len(got) != 1 {
			t.Fatalf("after the cancelled calls DueBefore = %v, %v; want the one entry, untouched", got, err)
		}
		checkReadyAt(t, pool)
	})
}

// A time that the server cannot hold, or that pgx would wrap into another time on the way
// (it sends microseconds since 2000 in an int64), is duework.ErrInvalid before anything is
// sent — year 586,577 used to be stored as 2023 and the entry came due at once — and
// nothing changes. The bounds themselves are accepted.
func TestTimesOutOfRangeRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	idx := postgres.NewIndex(pool)
	amy := mustTC(t, "amy")
	seed := schedule(t, idx, "amy", "a", t0)
	far := time.Date(586_577, 1, 1, 0, 0, 0, 0, time.UTC)
	wrapped := time.Unix(math.MaxInt64, 0)
	early := time.Date(-10, 1, 1, 0, 0, 0, 0, time.UTC)
	with := func(f func(e *duework.Entry)) duework.Entry {
		e := duework.Entry{UserID: "amy", WorkKey: "b", Tier: "hot", DueAt: t0}
		f(&e)
		return e
	}
	seedClaim := duework.Claim{Entry: seed, Token: 1, Until: t0.Add(time.Minute)}
	calls := map[string]error{
		"Schedule DueAt year 586,577":      idx.Schedule(ctx, amy, with(func(e *duework.Entry) { e.DueAt = far })),
		"Schedule DueAt Unix(MaxInt64)":    idx.Schedule(ctx, amy, with(func(e *duework.Entry) { e.DueAt = wrapped })),
		"Schedule DueAt year -10":          idx.Schedule(ctx, amy, with(func(e *duework.Entry) { e.DueAt = early })),
		"Schedule LastRunAt year 586,577":  idx.Schedule(ctx, amy, with(func(e *duework.Entry) { e.LastRunAt = far })),
		"Complete next DueAt year 586,577": idx.Complete(ctx, amy, seedClaim, with(func(e *duework.Entry) { e.WorkKey = "a"; e.DueAt = far })),
		"Release heldUntil year 586,577":   idx.Release(ctx, []string{"amy"}, far),
	}
	_, calls["ScheduleMissing with one DueAt year 586,577"] = idx.ScheduleMissing(ctx, amy, []duework.Entry{with(func(*duework.Entry) {}), with(func(e *duework.Entry) { e.WorkKey = "c"; e.DueAt = far })})
	_, calls["Claim until year 586,577"] = idx.Claim(ctx, []duework.Key{seed.Key()}, t0, far)
	_, calls["Claim now year 586,577"] = idx.Claim(ctx, []duework.Key{seed.Key()}, far, far.Add(time.Hour))
	_, calls["Ready Now year 586,577"] = idx.Ready(ctx, duework.ReadyQuery{Now: far, Users: 1, PerUser: 1})
	_, calls["Ready Now+Hold past MaxTime"] = idx.Ready(ctx, duework.ReadyQuery{Now: vocab.MaxTime.Add(-time.Hour), Users: 1, PerUser: 1, Hold: 2 * time.Hour})
	_, calls["Groups now year 586,577"] = idx.Groups(ctx, far)
	_, calls["DueBefore now year 586,577"] = idx.DueBefore(ctx, far, 1)
	for what, err := range calls {
		if !errors.Is(err, duework.ErrInvalid) {
			t.Errorf("%s = %v, want duework.ErrInvalid", what, err)
		}
	}
	errs, err := idx.CompleteMany(ctx, []duework.Done{{Tenant: amy, Claim: seedClaim, Next: with(func(e *duework.Entry) { e.WorkKey = "a"; e.DueAt = far })}})
	if err != nil || len(errs) != 1 || !errors.Is(errs[0], duework.ErrInvalid) {
		t.Errorf("CompleteMany with next DueAt year 586,577 = %v, %v; want one duework.ErrInvalid outcome", errs, err)
	}
	// Nothing changed: amy has the one entry, unclaimed, and nothing else is due ever.
	if got, err := idx.DueBefore(ctx, vocab.MaxTime, 10); err != nil || len(got) != 1 || !sameEntry(got[0], seed) {
		t.Fatalf("after the refused calls DueBefore(MaxTime) = %v, %v; want only %+v", got, err, seed)
	}
	// The bounds are stored (to the microsecond) and read back.
	last := with(func(e *duework.Entry) { e.DueAt = vocab.MaxTime; e.LastRunAt = vocab.MinTime.Add(time.Microsecond) })
	if err := idx.Schedule(ctx, amy, last); err != nil {
		t.Fatalf("Schedule at MaxTime: %v", err)
	}
	got, err := idx.Get(ctx, amy, "b")
	if err != nil || !got.DueAt.Equal(vocab.MaxTime.Truncate(time.Microsecond)) || !got.LastRunAt.Equal(last.LastRunAt) {
		t.Fatalf("Get of the entry at the bounds = %+v, %v", got, err)
	}
	if _, err := idx.Ready(ctx, duework.ReadyQuery{Now: vocab.MaxTime, Users: 1, PerUser: 1}); err != nil {
		t.Fatalf("Ready at MaxTime: %v", err)
	}
	if cs, err := idx.Claim(ctx, []duework.Key{seed.Key()}, t0, vocab.MaxTime); err != nil || len(cs) != 1 {
		t.Fatalf("Claim until MaxTime = %v, %v", cs, err)
	}
	checkReadyAt(t, pool)
}

// Limits above duework.MaxLimit are duework.ErrInvalid (PerUser math.MaxInt used to reach
// the server as a negative LIMIT and fail every dispatch); MaxLimit itself is served.
func TestLimitsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	idx := postgres.NewIndex(pgtest.Pool(t))
	schedule(t, idx, "amy", "a", t0)
	for _, q := range []duework.ReadyQuery{
		{Now: t0, Users: 1, PerUser: math.MaxInt},
		{Now: t0, Users: math.MaxInt, PerUser: 1},
		{Now: t0, Users: 1, PerUser: duework.MaxLimit + 1},
	} {
		if _, err := idx.Ready(ctx, q); !errors.Is(err, duework.ErrInvalid) {
			t.Errorf("Ready(%+v) = %v, want duework.ErrInvalid", q, err)
		}
	}
	if _, err := idx.DueBefore(ctx, t0, math.MaxInt); !errors.Is(err, duework.ErrInvalid) {
		t.Errorf("DueBefore with limit MaxInt = %v, want duework.ErrInvalid", err)
	}
	p := ready(t, idx, duework.ReadyQuery{Now: t0, Users: duework.MaxLimit, PerUser: duework.MaxLimit})
	if got := showPage(p); got != "amy(served - turn 0s [a]) next -" {
		t.Errorf("Ready with MaxLimit users and entries = %s", got)
	}
	if got, err := idx.DueBefore(ctx, t0, duework.MaxLimit); err != nil || len(got) != 1 {
		t.Errorf("DueBefore with limit MaxLimit = %v, %v", got, err)
	}
}

// Bad input is refused in Go, before any statement: against a schema that was never
// migrated every such call still gets duework.ErrInvalid, not ErrNotMigrated. Tier is
// validated everywhere an entry is written, so a payload cannot ride the index.
func TestBadInputRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	idx := postgres.NewIndex(pgtest.PoolIn(t, pgtest.Schema(t, "rota_test"), 2))
	amy := mustTC(t, "amy")
	good := duework.Entry{UserID: "amy", WorkKey: "a", Tier: "hot", DueAt: t0}
	c := duework.Claim{Entry: good, Token: 1, Until: t0.Add(time.Minute)}
	tiers := map[string]string{"NUL": "nul\x00tier", "invalid UTF-8": "\xff\xfe", "escape": "\x1b[31mred", "10 MiB": strings.Repeat("x", 10<<20)}
	calls := map[string]error{}
	for name, tier := range tiers {
		bad := good
		bad.Tier = tier
		calls["Schedule with Tier "+name] = idx.Schedule(ctx, amy, bad)
		_, calls["ScheduleMissing with Tier "+name] = idx.ScheduleMissing(ctx, amy, []duework.Entry{good, bad})
		calls["Complete with Tier "+name] = idx.Complete(ctx, amy, c, bad)
		errs, err := idx.CompleteMany(ctx, []duework.Done{{Tenant: amy, Claim: c, Next: bad}})
		if err == nil && len(errs) == 1 {
			err = errs[0]
		}
		calls["CompleteMany with Tier "+name] = err
	}
	calls["Schedule with a NUL in WorkKey"] = idx.Schedule(ctx, amy, duework.Entry{UserID: "amy", WorkKey: "a\x00", DueAt: t0})
	calls["Route to a group with a NUL"] = idx.Route(ctx, []duework.Route{{UserID: "amy", Group: "pro\x00"}})
	_, calls["Ready of a group with a NUL"] = idx.Ready(ctx, duework.ReadyQuery{Group: "pro\x00", Now: t0, Users: 1, PerUser: 1})
	_, calls["Ready with a negative Hold"] = idx.Ready(ctx, duework.ReadyQuery{Now: t0, Users: 1, PerUser: 1, Hold: -1})
	_, calls["Claim with until before now"] = idx.Claim(ctx, []duework.Key{good.Key()}, t0, t0.Add(-1))
	calls["UnscheduleClaimed of another user's claim"] = idx.UnscheduleClaimed(ctx, mustTC(t, "bo"), c)
	errs, err := idx.StartClaims(ctx, []duework.Unclaim{{Tenant: mustTC(t, "bo"), Claim: c}})
	if err == nil && len(errs) == 1 {
		err = errs[0]
	}
	calls["StartClaims of another user's claim"] = err
	for what, err := range calls {
		if !errors.Is(err, duework.ErrInvalid) {
			t.Errorf("%s = %v, want duework.ErrInvalid (refused before sending)", what, err)
		}
	}
}

// SQLSTATE 54000 (a value over a server limit, such as a key too long to index) is bad
// input, translated in the one place errors are.
func TestProgramLimitIsInvalid(t *testing.T) {
	t.Parallel()
	err := postgres.Interpret(context.Background(), "Index.Schedule", &pgconn.PgError{Code: "54000", Message: "index row size exceeds btree maximum"})
	if !errors.Is(err, duework.ErrInvalid) {
		t.Fatalf("54000 translates to %v, want duework.ErrInvalid", err)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		t.Fatalf("the translated error %v lost the *pgconn.PgError", err)
	}
}

// Claim skips a key whose IDs no entry could have (a NUL byte, which the server cannot
// even compare), as it skips an absent key, and claims the others.
func TestClaimSkipsInvalidKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	idx := postgres.NewIndex(pool)
	a := schedule(t, idx, "amy", "a", t0)
	b := schedule(t, idx, "amy", "b", t0)
	keys := []duework.Key{a.Key(), {UserID: "amy\x00", WorkKey: "a"}, {UserID: "amy", WorkKey: "b\x00"}, {UserID: "", WorkKey: "b"}, b.Key()}
	cs, err := idx.Claim(ctx, keys, t0, t0.Add(time.Minute))
	if err != nil || len(cs) != 2 || cs[0].Entry.Key() != a.Key() || cs[1].Entry.Key() != b.Key() {
		t.Fatalf("Claim with invalid keys among good ones = %+v, %v; want amy/a and amy/b claimed", cs, err)
	}
	if err := idx.Release(ctx, []string{"amy\x00", "amy"}, t0); err != nil {
		t.Fatalf("Release with an invalid user ID among good ones: %v", err)
	}
	if err := idx.Route(ctx, []duework.Route{{UserID: "amy\x00", Group: "pro"}, {UserID: "amy", Group: "pro"}}); err != nil {
		t.Fatalf("Route with an invalid user ID among good ones: %v", err)
	}
	checkReadyAt(t, pool)
}

// The server keeps microseconds: a claim's until is rounded up, so a claim never ends
// before the until it was given, even less than a microsecond after now.
func TestClaimUntilRoundsUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	idx := postgres.NewIndex(pgtest.Pool(t))
	e := schedule(t, idx, "u", "k", t0)
	now := t0.Add(time.Second + 300*time.Nanosecond)
	claims, err := idx.Claim(ctx, []duework.Key{e.Key()}, now, now.Add(400*time.Nanosecond))
	if err != nil || len(claims) != 1 {
		t.Fatalf("Claim = %v, %v", claims, err)
	}
	if claims[0].Until.Before(now.Add(400 * time.Nanosecond)) {
		t.Fatalf("claim until %v, before the asked %v", claims[0].Until, now.Add(400*time.Nanosecond))
	}
	if due, err := idx.DueBefore(ctx, now.Add(400*time.Nanosecond), 10); err != nil || len(due) != 0 {
		t.Fatalf("at the asked until the entry is visible again early: %v, %v", due, err)
	}
	if due, err := idx.DueBefore(ctx, claims[0].Until, 10); err != nil || len(due) != 1 {
		t.Fatalf("at the claim's Until the entry is not due again: %v, %v", due, err)
	}
	if p := ready(t, idx, duework.ReadyQuery{Now: claims[0].Until, Users: 1, PerUser: 1}); len(p.Heads) != 1 || !p.Heads[0].Turn.Equal(claims[0].Until) {
		t.Fatalf("at the claim's Until Ready = %s; want u back, its Turn the claim's end", showPage(p))
	}
}

// A hold ends at Now+Hold rounded up to the microsecond. Release matches the reader's own
// Now+Hold, nanoseconds and all, and nothing else: an instant a microsecond off ends no
// hold.
func TestReleaseMatchesNanosecondHold(t *testing.T) {
	t.Parallel()
	idx := postgres.NewIndex(pgtest.Pool(t))
	schedule(t, idx, "amy", "a", t0)
	schedule(t, idx, "bo", "a", t0)
	now := t0.Add(time.Second + 300*time.Nanosecond)
	q := duework.ReadyQuery{Now: now, Users: 2, PerUser: 1, Hold: 10*time.Second + 400*time.Nanosecond}
	heldUntil := now.Add(q.Hold) // t0 + 11.0000007s, stored as t0 + 11.000001s
	if got := userIDs(ready(t, idx, q)); !slices.Equal(got, []string{"amy", "bo"}) {
		t.Fatalf("first Ready = %v", got)
	}
	if got := userIDs(ready(t, idx, duework.ReadyQuery{Now: heldUntil.Add(-time.Microsecond), Users: 2, PerUser: 1})); len(got) != 0 {
		t.Fatalf("before the hold ends Ready = %v, want both held", got)
	}
	if got := userIDs(ready(t, idx, duework.ReadyQuery{Now: ceil(heldUntil), Users: 2, PerUser: 1})); len(got) != 2 {
		t.Fatalf("at the hold's end (rounded up) Ready = %v, want both", got)
	}
	ctx := context.Background()
	for _, off := range []time.Time{heldUntil.Truncate(time.Microsecond), ceil(heldUntil).Add(time.Microsecond)} {
		if err := idx.Release(ctx, []string{"amy", "bo"}, off); err != nil {
			t.Fatal(err)
		}
	}
	if got := userIDs(ready(t, idx, duework.ReadyQuery{Now: now, Users: 2, PerUser: 1})); len(got) != 0 {
		t.Fatalf("after Release at instants a microsecond off Ready = %v, want both still held", got)
	}
	if err := idx.Release(ctx, []string{"amy"}, heldUntil); err != nil {
		t.Fatal(err)
	}
	if got := userIDs(ready(t, idx, duework.ReadyQuery{Now: now, Users: 2, PerUser: 1})); !slices.Equal(got, []string{"amy"}) {
		t.Fatalf("after Release(amy, the reader's own Now+Hold) Ready = %v, want amy back", got)
	}
}

func ceil(t time.Time) time.Time {
	if r := t.Truncate(time.Microsecond); r.Before(t) {
		return r.Add(time.Microsecond)
	}
	return t
}

// Concurrent writers, readers, claimers, hand-backs, completers and routes with limits of
// the same few users, on one pool, never deadlock and leave every user's ReadyAt exact: a
// ReadyAt later than the truth would hide due work, an earlier one would put a user before
// its turn.
func TestReadyAtStaysExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	idx := postgres.NewIndex(pool)
	users := []string{"u1", "u2", "u3"}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := range 80 {
				u := users[(w+i)%len(users)]
				key := fmt.Sprintf("k%d", (w*7+i)%5)
				tc := mustTC(t, u)
				due := t0.Add(time.Duration((w*13+i*7)%50) * time.Second)
				now := t0.Add(time.Duration(i) * time.Second)
				var err error
				switch i % 8 {
				case 0, 1:
					err = idx.Schedule(ctx, tc, duework.Entry{UserID: u, WorkKey: key, DueAt: due})
				case 2:
					_, err = idx.ScheduleMissing(ctx, tc, []duework.Entry{{UserID: u, WorkKey: key, DueAt: due}, {UserID: u, WorkKey: "m", DueAt: due}})
				case 3, 4:
					var p duework.ReadyPage
					p, err = idx.Ready(ctx, duework.ReadyQuery{Now: now, Users: 2, PerUser: 2, Hold: time.Duration(w+1) * time.Second})
					if err != nil {
						break
					}
					keys := append(keysOf(p), duework.Key{UserID: u, WorkKey: key}, duework.Key{UserID: users[(w+1)%3], WorkKey: key})
					var cs []duework.Claim
					if cs, err = idx.Claim(ctx, keys, now, now.Add(30*time.Second)); err != nil {
						break
					}
					var done []duework.Done
					for _, c := range cs[:len(cs)/2] {
						next := c.Entry
						next.DueAt = now.Add(time.Duration(w) * time.Second)
						done = append(done, duework.Done{Tenant: mustTC(t, c.Entry.UserID), Claim: c, Next: next})
					}
					if _, err = idx.CompleteMany(ctx, done); err != nil {
						break
					}
					if len(cs) > 0 && i%3 == 0 {
						if err = idx.UnscheduleClaimed(ctx, mustTC(t, cs[0].Entry.UserID), cs[0]); errors.Is(err, duework.ErrClaimLost) {
							err = nil
						}
					}
					if len(cs) > 1 && i%3 == 1 && err == nil {
						last := cs[len(cs)-1]
						_, err = idx.Unclaim(ctx, []duework.Unclaim{{Tenant: mustTC(t, last.Entry.UserID), Claim: last}})
					}
					if err == nil {
						err = idx.Release(ctx, userIDs(p), now.Add(time.Duration(w+1)*time.Second))
					}
				case 5:
					limits := duework.Limits{Weight: i % 3, MaxInFlight: (w + i) % 3, Every: time.Duration(i%2) * 7 * time.Second, Burst: w % 2}
					err = idx.Route(ctx, []duework.Route{{UserID: u, Group: []string{"", "pro"}[i%2], Limits: limits}, {UserID: users[(w+2)%3], Group: ""}})
				case 6:
					_, err = idx.Groups(ctx, now)
				case 7:
					err = idx.Unschedule(ctx, tc, key)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	checkReadyAt(t, pool)
}

// Claiming again an entry whose claim ended replaces the end its user's ReadyAt may have
// counted: the user's next visible instant is then the end of its other claim, not the
// replaced one (which a ReadyAt kept without looking again would still say, putting the user
// in the queue before anything of it is visible).
func TestClaimAgainReplacesTheEndedClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	idx := postgres.NewIndex(pool)
	s := func(d int) time.Time { return t0.Add(time.Duration(d) * time.Second) }
	a, b := schedule(t, idx, "u", "a", t0), schedule(t, idx, "u", "b", t0)
	for _, c := range []struct {
		key       duework.Key
		now, till time.Time
	}{{a.Key(), s(0), s(10)}, {b.Key(), s(1), s(20)}, {a.Key(), s(15), s(60)}} {
		got, err := idx.Claim(ctx, []duework.Key{c.key}, c.now, c.till)
		if err != nil || len(got) != 1 {
			t.Fatalf("Claim(%v) at %s = %v, %v; want one claim", c.key, since(c.now), got, err)
		}
	}
	checkReadyAt(t, pool)
	if got := showPage(ready(t, idx, duework.ReadyQuery{Now: s(19), Users: 10, PerUser: 5})); got != "next -" {
		t.Errorf("Ready at t0+19s = %s; want nothing (b is claimed until t0+20s, a until t0+60s)", got)
	}
	if got, want := showPage(ready(t, idx, duework.ReadyQuery{Now: s(20), Users: 10, PerUser: 5})), "u(served 15s turn 20s [b]) next -"; got != want {
		t.Errorf("Ready at t0+20s = %s; want %s", got, want)
	}
}

// Ready and Claim reuse their read buffers from call to call: what one call returned stays
// as it was through the calls after it.
func TestResultsOwnTheirMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	idx := postgres.NewIndex(pgtest.Pool(t))
	for _, u := range []string{"amy", "bo"} {
		for k := range 3 {
			schedule(t, idx, u, fmt.Sprintf("%s%d", u, k), t0.Add(time.Duration(k)*time.Second))
		}
	}
	if err := idx.Route(ctx, []duework.Route{{UserID: "bo", Group: "pro"}}); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Minute)
	first := ready(t, idx, duework.ReadyQuery{Now: now, Users: 10, PerUser: 10})
	const want = "amy(served - turn 0s [amy0 amy1 amy2]) next -"
	if got := showPage(first); got != want {
		t.Fatalf("Ready = %s, want %s", got, want)
	}
	claims, err := idx.Claim(ctx, []duework.Key{{UserID: "amy", WorkKey: "amy0"}, {UserID: "amy", WorkKey: "amy9"}, {UserID: "amy", WorkKey: "amy2"}}, now, now.Add(time.Minute))
	if err != nil || len(claims) != 2 || claims[0].Entry.WorkKey != "amy0" || claims[1].Entry.WorkKey != "amy2" {
		t.Fatalf("Claim = %v, %v; want amy0 and amy2", claims, err)
	}
	wantClaims := fmt.Sprint(claims)
	for range 3 {
		ready(t, idx, duework.ReadyQuery{Group: "pro", Now: now, Users: 10, PerUser: 10})
		if _, err := idx.Claim(ctx, []duework.Key{{UserID: "bo", WorkKey: "bo1"}}, now, now.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if got := showPage(first); got != want {
		t.Errorf("the first page changed under later reads:\n got %s\nwant %s", got, want)
	}
	if got := fmt.Sprint(claims); got != wantClaims {
		t.Errorf("the first claims changed under later claims:\n got %s\nwant %s", got, wantClaims)
	}
}
