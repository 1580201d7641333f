package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

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

// Step 5 sets rota_users' autovacuum threshold, so the dead entries serves leave at the
// front of each queue are vacuumed after 10,000 serves rather than a fifth of the table;
// a schema migrated by an older release gets it too.
func TestMigrateSetsQueueVacuumThreshold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.PoolIn(t, pgtest.Schema(t, "rota_test"), 2)
	if err := postgres.MigrateTo(ctx, pool, 4); err != nil {
		t.Fatal(err)
	}
	var opts []string
	read := func() {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT coalesce(reloptions, '{}') FROM pg_class
			WHERE oid = to_regclass(quote_ident(current_schema()) || '.rota_users')`).Scan(&opts); err != nil {
			t.Fatal(err)
		}
	}
	read()
	if slices.Contains(opts, "autovacuum_vacuum_threshold=10000") {
		t.Fatalf("at step 4 rota_users already has %v", opts)
	}
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	read()
	for _, want := range []string{"fillfactor=70", "autovacuum_vacuum_scale_factor=0", "autovacuum_vacuum_threshold=10000"} {
		if !slices.Contains(opts, want) {
			t.Errorf("rota_users options %v lack %s", opts, want)
		}
	}
}

// A database that an older release left at step 1 (the v1 due-work index) or step 2 (plus
// the lease and task state), with entries, claims, LastServed and a lease in it, upgrades in
// place: every entry, claim and LastServed survives, each user's Turn comes out as
// max(ReadyAt, LastServed) with ReadyAt counting claims' ends, the claim tokens go on
// growing, and the lease is still held.
func TestMigrateUpgradesPopulatedSchema(t *testing.T) {
	t.Parallel()
	for _, from := range []int{1, 2} {
		t.Run(fmt.Sprintf("from=%d", from), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := pgtest.PoolIn(t, pgtest.Schema(t, "rota_test"), 2)
			if err := postgres.MigrateTo(ctx, pool, from); err != nil {
				t.Fatal(err)
			}
			s := func(d int) time.Time { return t0.Add(time.Duration(d) * time.Second) }
			// The rows as the v1 Index wrote them: free_at is the earliest unclaimed due_at.
			if _, err := pool.Exec(ctx, `
				INSERT INTO rota_users (user_id, last_served, free_at) VALUES
					('amy', $1, $2), ('bo', NULL, $3), ('cy', $4, NULL), ('di', NULL, NULL)`,
				s(10), s(-5), s(20), s(50)); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, `
				INSERT INTO rota_due (user_id, work_key, tier, due_at, last_run_at, miss_streak, claim_token, claim_until) VALUES
					('amy', 'a', 'hot', $1, $2, 2, NULL, NULL),
					('amy', 'b', 'cold', $3, NULL, 0, nextval('rota_claim_token'), $4),
					('bo', 'c', '', $5, NULL, 0, NULL, NULL),
					('di', 'd', 'hot', $6, NULL, 1, nextval('rota_claim_token'), $7)`,
				s(-5), s(-100), s(-1), s(30), s(20), s(-60), s(40)); err != nil {
				t.Fatal(err)
			}
			lease := postgres.NewLease(pool, "heavy", time.Hour)
			var grant maintenance.Grant
			if from >= 2 {
				g, err := lease.Acquire(ctx, "daemon-a", time.Hour, t0)
				if err != nil {
					t.Fatal(err)
				}
				grant = g
			}
			var tokB, tokD int64
			if err := pool.QueryRow(ctx, `SELECT (SELECT claim_token FROM rota_due WHERE work_key = 'b'), (SELECT claim_token FROM rota_due WHERE work_key = 'd')`).Scan(&tokB, &tokD); err != nil {
				t.Fatal(err)
			}

			if err := postgres.Migrate(ctx, pool); err != nil {
				t.Fatalf("Migrate from step %d: %v", from, err)
			}
			checkReadyAt(t, pool)
			idx := postgres.NewIndex(pool)

			// Every entry survives, field by field.
			want := []duework.Entry{
				{UserID: "amy", WorkKey: "a", Tier: "hot", DueAt: s(-5), LastRunAt: s(-100), MissStreak: 2},
				{UserID: "amy", WorkKey: "b", Tier: "cold", DueAt: s(-1)},
				{UserID: "bo", WorkKey: "c", DueAt: s(20)},
				{UserID: "di", WorkKey: "d", Tier: "hot", DueAt: s(-60), MissStreak: 1},
			}
			for _, w := range want {
				got, err := idx.Get(ctx, mustTC(t, w.UserID), w.WorkKey)
				if err != nil || !sameEntry(got, w) {
					t.Errorf("after the upgrade Get(%s/%s) = %+v, %v; want %+v", w.UserID, w.WorkKey, got, err, w)
				}
			}
			// Turns: amy max(ReadyAt −5s, LastServed 10s); bo its due 20s; di the end of its
			// claim, 40s; cy has no entries and is in no queue.
			page := ready(t, idx, duework.ReadyQuery{Now: s(45), Users: 10, PerUser: 5})
			if got, want := showPage(page), "amy(served 10s turn 10s [a b]) bo(served - turn 20s [c]) di(served - turn 40s [d]) next -"; got != want {
				t.Errorf("after the upgrade Ready at t0+45s =\n%s\nwant\n%s", got, want)
			}
			page = ready(t, idx, duework.ReadyQuery{Now: s(25), Users: 10, PerUser: 5})
			if got, want := showPage(page), "amy(served 10s turn 10s [a]) bo(served - turn 20s [c]) next -"; got != want {
				t.Errorf("after the upgrade Ready at t0+25s =\n%s\nwant\n%s (amy/b stays claimed until t0+30s)", got, want)
			}
			// Claims survive: their claimants can still check and complete them.
			claimB := duework.Claim{Entry: want[1], Token: uint64(tokB), Until: s(30)}
			if err := idx.CheckClaim(ctx, mustTC(t, "amy"), claimB); err != nil {
				t.Errorf("after the upgrade amy/b's claim is gone: %v", err)
			}
			claimD := duework.Claim{Entry: want[3], Token: uint64(tokD), Until: s(40)}
			if err := idx.Complete(ctx, mustTC(t, "di"), claimD, duework.Entry{UserID: "di", WorkKey: "d", DueAt: s(100)}); err != nil {
				t.Errorf("after the upgrade di/d's claimant cannot complete: %v", err)
			}
			// cy's LastServed survived its entries: its next entry queues behind it.
			schedule(t, idx, "cy", "e", s(0))
			page = ready(t, idx, duework.ReadyQuery{Now: s(60), Users: 10, PerUser: 5})
			if got, want := showPage(page), "amy(served 10s turn 10s [a b]) bo(served - turn 20s [c]) cy(served 50s turn 50s [e]) next -"; got != want {
				t.Errorf("after the upgrade Ready at t0+60s =\n%s\nwant\n%s", got, want)
			}
			// Tokens go on growing from the sequence.
			cs, err := idx.Claim(ctx, []duework.Key{{UserID: "amy", WorkKey: "a"}}, s(60), s(120))
			if err != nil || len(cs) != 1 || cs[0].Token <= uint64(max(tokB, tokD)) {
				t.Errorf("a claim after the upgrade = %+v, %v; want a token above %d", cs, err, max(tokB, tokD))
			}
			if from >= 2 {
				cur, held, err := lease.Current(ctx, t0.Add(time.Minute))
				if err != nil || !held || cur.Token != grant.Token || cur.Holder != "daemon-a" {
					t.Errorf("after the upgrade the lease is %+v, held %v, %v; want %+v", cur, held, err, grant)
				}
			} else if _, err := lease.Acquire(ctx, "daemon-a", time.Minute, t0); err != nil {
				t.Errorf("after the upgrade from step 1 the lease is unusable: %v", err)
			}
			checkReadyAt(t, pool)
		})
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
