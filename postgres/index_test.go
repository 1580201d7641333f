package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
	"github.com/rotaworks/rota/tenancy"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func mustTC(tb testing.TB, user string) tenancy.Context {
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

// Migrate: several processes at once, then again — each step is applied exactly once.
func TestMigrateConcurrentAndIdempotent(t *testing.T) {
	t.Parallel()
	schema := pgtest.Schema(t, "rota_test")
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		pool := pgtest.PoolIn(t, schema, 2)
		wg.Go(func() { errs[i] = postgres.Migrate(context.Background(), pool) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent Migrate: %v", err)
	}
	pool := pgtest.PoolIn(t, schema, 2)
	if err := postgres.Migrate(context.Background(), pool); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	var n, distinct int
	if err := pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT version) FROM rota_schema_migrations`).Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	if n != distinct || n == 0 {
		t.Fatalf("rota_schema_migrations holds %d rows of %d versions; want each step once", n, distinct)
	}
}

// A schema left at an earlier step is upgraded to the latest, keeping its data.
func TestMigrateUpgrades(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	idx := postgres.NewIndex(pool)
	schedule(t, idx, "u", "k", t0)
	// Roll the schema back to step 1, as an older release left it.
	if _, err := pool.Exec(ctx, `DROP TABLE rota_leases, rota_task_fence, rota_task_state;
		DELETE FROM rota_schema_migrations WHERE version > 1`); err != nil {
		t.Fatal(err)
	}
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate from step 1: %v", err)
	}
	if _, err := postgres.NewLease(pool, "heavy", time.Hour).Acquire(ctx, "a", time.Minute, t0); err != nil {
		t.Fatalf("after the upgrade the lease is unusable: %v", err)
	}
	if _, err := idx.Get(ctx, mustTC(t, "u"), "k"); err != nil {
		t.Fatalf("after the upgrade the entry is gone: %v", err)
	}
}

// A database migrated by a newer release is refused, not downgraded.
func TestMigrateRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	if _, err := pool.Exec(context.Background(), `INSERT INTO rota_schema_migrations (version, name) VALUES (1000000, 'future')`); err != nil {
		t.Fatal(err)
	}
	if err := postgres.Migrate(context.Background(), pool); !errors.Is(err, postgres.ErrSchemaTooNew) {
		t.Fatalf("Migrate over a newer schema = %v, want ErrSchemaTooNew", err)
	}
}

// Backend errors come back as the core's sentinels.
func TestErrorsTranslated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("not migrated", func(t *testing.T) {
		idx := postgres.NewIndex(pgtest.PoolIn(t, pgtest.Schema(t, "rota_test"), 2))
		_, err := idx.DueHeads(ctx, t0, 1)
		if !errors.Is(err, postgres.ErrNotMigrated) {
			t.Fatalf("DueHeads on an empty schema = %v, want ErrNotMigrated", err)
		}
	})
	t.Run("data the server refuses is ErrInvalid", func(t *testing.T) {
		idx := postgres.NewIndex(pgtest.Pool(t))
		e := duework.Entry{UserID: "u", WorkKey: "k", Tier: "nul\x00tier", DueAt: t0}
		if err := idx.Schedule(ctx, mustTC(t, "u"), e); !errors.Is(err, duework.ErrInvalid) {
			t.Fatalf("Schedule with a NUL in Tier = %v, want duework.ErrInvalid", err)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		pool := pgtest.Pool(t)
		idx := postgres.NewIndex(pool)
		schedule(t, idx, "u", "k", t0)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		calls := map[string]error{}
		_, calls["DueHeads"] = idx.DueHeads(cctx, t0, 1)
		_, calls["DueBefore"] = idx.DueBefore(cctx, t0, 1)
		_, calls["Claim"] = idx.Claim(cctx, []duework.Key{{UserID: "u", WorkKey: "k"}}, t0, t0.Add(time.Minute))
		_, calls["Get"] = idx.Get(cctx, mustTC(t, "u"), "k")
		calls["Schedule"] = idx.Schedule(cctx, mustTC(t, "u"), duework.Entry{UserID: "u", WorkKey: "k2", DueAt: t0})
		calls["Unschedule"] = idx.Unschedule(cctx, mustTC(t, "u"), "k")
		e := duework.Entry{UserID: "u", WorkKey: "k", DueAt: t0}
		calls["Complete"] = idx.Complete(cctx, mustTC(t, "u"), duework.Claim{Entry: e, Token: 1}, e)
		lease := postgres.NewLease(pool, "heavy", time.Hour)
		_, calls["Lease.Acquire"] = lease.Acquire(cctx, "a", time.Minute, t0)
		_, _, calls["Lease.Current"] = lease.Current(cctx, t0)
		store := postgres.NewStateStore(pool)
		_, calls["StateStore.Load"] = store.Load(cctx)
		calls["StateStore.Save"] = store.Save(cctx, 1, maintenance.TaskState{Name: "x"})
		for name, err := range calls {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s with a cancelled ctx = %v, want context.Canceled", name, err)
			}
		}
		if got, err := idx.DueBefore(ctx, t0, 10); err != nil || len(got) != 1 {
			t.Fatalf("after the cancelled calls DueBefore = %v, %v; want the one entry, untouched", got, err)
		}
	})
}

// A claimed row leaves the due path at once and comes back, in its DueAt place, exactly
// when its claim ends — without anyone touching it.
func TestClaimedRowsReturnWhenClaimEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	idx := postgres.NewIndex(pgtest.Pool(t))
	a := schedule(t, idx, "a", "k1", t0)
	schedule(t, idx, "a", "k2", t0.Add(time.Second))
	schedule(t, idx, "b", "k1", t0.Add(2*time.Second))
	now := t0.Add(time.Minute)
	claims, err := idx.Claim(ctx, []duework.Key{a.Key()}, now, now.Add(time.Minute))
	if err != nil || len(claims) != 1 {
		t.Fatalf("Claim = %v, %v", claims, err)
	}
	heads, err := idx.DueHeads(ctx, now.Add(time.Minute-time.Microsecond), 5)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(headKeys(heads)); got != "[a:k2 b:k1]" {
		t.Fatalf("while claimed, DueHeads = %s; want the claimed a:k1 hidden", got)
	}
	heads, err = idx.DueHeads(ctx, now.Add(time.Minute), 5)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(headKeys(heads)); got != "[a:k1 a:k2 b:k1]" {
		t.Fatalf("once the claim ended, DueHeads = %s; want a:k1 back in its DueAt place", got)
	}
	if !heads[0].LastServed.Equal(now) {
		t.Fatalf("a's LastServed = %v, want the claim's now %v", heads[0].LastServed, now)
	}
	due, err := idx.DueBefore(ctx, now.Add(time.Minute), 10)
	if err != nil || len(due) != 3 || due[0].Key() != a.Key() {
		t.Fatalf("DueBefore after the claim ended = %v, %v; want a:k1 first", due, err)
	}
}

func headKeys(heads []duework.Head) []string {
	var out []string
	for _, h := range heads {
		for _, e := range h.Due {
			out = append(out, e.UserID+":"+e.WorkKey)
		}
	}
	return out
}

// checkSummary asserts the invariant DueHeads relies on: each user's free_at is NULL only
// when it has no unclaimed entries, and otherwise no later than the earliest due_at among
// them.
func checkSummary(t *testing.T, pool interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) {
	t.Helper()
	var bad []string
	var n int
	err := pool.QueryRow(context.Background(), `
		SELECT count(*), coalesce(array_agg(format('%s: free_at %s, earliest unclaimed due_at %s', u.user_id, u.free_at, w.free_at))
			FILTER (WHERE w.free_at IS NOT NULL AND (u.free_at IS NULL OR u.free_at > w.free_at)), '{}')
		FROM rota_users u LEFT JOIN (
			SELECT user_id, min(due_at) AS free_at FROM rota_due WHERE claim_until IS NULL GROUP BY user_id
		) w USING (user_id)`).Scan(&n, &bad)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Fatalf("rota_users.free_at is later than the truth for %d of %d users: %v", len(bad), n, bad)
	}
}

// Concurrent writers, claimers and completers of the same few users leave every user's
// summary exact: a summary later than the truth would hide due work from DueHeads.
func TestUserSummaryStaysExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	idx := postgres.NewIndex(pool)
	users := []string{"u1", "u2", "u3"}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := range 60 {
				u := users[(w+i)%len(users)]
				key := fmt.Sprintf("k%d", (w*7+i)%5)
				tc := mustTC(t, u)
				due := t0.Add(time.Duration((w*13+i*7)%50) * time.Second)
				switch i % 4 {
				case 0, 1:
					if err := idx.Schedule(ctx, tc, duework.Entry{UserID: u, WorkKey: key, DueAt: due}); err != nil {
						t.Error(err)
						return
					}
				case 2:
					now := t0.Add(time.Duration(i) * time.Second)
					cs, err := idx.Claim(ctx, []duework.Key{{UserID: u, WorkKey: key}, {UserID: users[(w+1)%3], WorkKey: key}}, now, now.Add(30*time.Second))
					if err != nil {
						t.Error(err)
						return
					}
					for _, c := range cs[:len(cs)/2] {
						next := c.Entry
						next.DueAt = now.Add(time.Duration(w) * time.Second)
						if err := idx.Complete(ctx, mustTC(t, c.Entry.UserID), c, next); err != nil && !errors.Is(err, duework.ErrClaimLost) {
							t.Error(err)
							return
						}
					}
				case 3:
					if err := idx.Unschedule(ctx, tc, key); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	checkSummary(t, pool)
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
}
