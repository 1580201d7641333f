package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

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
	opts := relOptions(t, pool, "rota_users")
	if slices.Contains(opts, "autovacuum_vacuum_threshold=10000") {
		t.Fatalf("at step 4 rota_users already has %v", opts)
	}
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	opts = relOptions(t, pool, "rota_users")
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
			// Claims survive: their claimants can still start and complete them.
			claimB := duework.Claim{Entry: want[1], Token: uint64(tokB), Until: s(30)}
			if errs, err := idx.StartClaims(ctx, []duework.Unclaim{{Tenant: mustTC(t, "amy"), Claim: claimB}}); err != nil || errs[0] != nil {
				t.Errorf("after the upgrade StartClaims of amy/b's claim = %v, %v; want it current and unstarted", errs, err)
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

// Step 8 adds the claims' running_until to a populated rota_task_state and loses
// nothing: every row and field an earlier release wrote survives, and each running flag
// it left keeps the bound it had there with its default knobs — it counts for MaxHold +
// LeaseTTL (2 h 05 min) from its start, capped at the end of year 9999 — so a scheduler
// of this release starts that task once the bound has passed, not before.
func TestMigrateAddsTaskClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.PoolIn(t, pgtest.Schema(t, "rota_test"), 2)
	if err := postgres.MigrateTo(ctx, pool, 5); err != nil {
		t.Fatal(err)
	}
	late := time.Date(9999, 12, 31, 23, 0, 0, 0, time.UTC)
	// The rows as the earlier release's Save wrote them (the Class and Rank numbers are
	// maintenance's).
	if _, err := pool.Exec(ctx, `INSERT INTO rota_task_fence (token) VALUES (7)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO rota_task_state (name, class, rank, last_run_at, last_outcome, last_error, running, running_since,
			running_by, running_token, deferred_since, deferred_at, deferrals, defer_reason, defer_blocker) VALUES
			('verify', 1, 0, $1, 'failed', 'disk full', true, $2, 'daemon-a', 0, NULL, NULL, 0, '', ''),
			('reindex', 0, 2, NULL, '', '', true, $2, 'daemon-b', 7, NULL, NULL, 0, '', ''),
			('compact', 0, 1, $1, 'succeeded', '', false, NULL, '', 0, $3, $2, 4, 'lease-held', 'daemon-b'),
			('far', 1, 0, NULL, '', '', true, $4, 'daemon-a', 0, NULL, NULL, 0, '', '')`,
		t0.Add(-time.Hour), t0, t0.Add(-30*time.Minute), late); err != nil {
		t.Fatal(err)
	}
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate from step 5: %v", err)
	}
	snap, err := postgres.NewStateStore(pool).Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bound := 2*time.Hour + 5*time.Minute
	want := []maintenance.TaskState{
		{Name: "compact", Class: maintenance.Heavy, Rank: maintenance.RankBootstrap, LastRunAt: t0.Add(-time.Hour), LastOutcome: maintenance.OutcomeSucceeded,
			DeferredSince: t0.Add(-30 * time.Minute), DeferredAt: t0, Deferrals: 4, DeferReason: maintenance.ReasonLeaseHeld, DeferBlocker: "daemon-b"},
		{Name: "far", Class: maintenance.OffLease, Running: true, RunningSince: late, RunningBy: "daemon-a",
			RunningUntil: time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)},
		{Name: "reindex", Class: maintenance.Heavy, Rank: maintenance.RankDataSafety, Running: true, RunningSince: t0, RunningBy: "daemon-b", RunningToken: 7, RunningUntil: t0.Add(bound)},
		{Name: "verify", Class: maintenance.OffLease, LastRunAt: t0.Add(-time.Hour), LastOutcome: maintenance.OutcomeFailed, LastError: "disk full",
			Running: true, RunningSince: t0, RunningBy: "daemon-a", RunningUntil: t0.Add(bound)},
	}
	if snap.Token != 7 || len(snap.States) != len(want) {
		t.Fatalf("after the upgrade Load = fence %d, %d states; want 7 and %d: %+v", snap.Token, len(snap.States), len(want), snap.States)
	}
	for i, w := range want {
		if got := snap.States[i]; !sameState(got, w) {
			t.Errorf("after the upgrade %s = %+v\nwant %+v", w.Name, got, w)
		}
		if err := snap.States[i].Validate(); err != nil {
			t.Errorf("after the upgrade %s is not a valid state: %v", w.Name, err)
		}
	}
	// verify's flag counts until its bound: a scheduler of this release starts it then.
	noop := func(context.Context) error { return nil }
	s, err := maintenance.NewScheduler([]maintenance.Task{{Name: "verify", Class: maintenance.OffLease, Cadence: time.Minute, Run: noop}},
		maintenance.Config{Lease: postgres.NewLease(pool, "heavy", time.Hour), StateStore: postgres.NewStateStore(pool),
			Holder: "daemon-c", MaxHold: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		at    time.Time
		start bool
	}{{t0.Add(bound - time.Microsecond), false}, {t0.Add(bound), true}} {
		res, err := s.Poll(ctx, tt.at)
		if err != nil || (res.Winner != nil) != tt.start {
			t.Errorf("poll at the flag's start + %v: winner %v, %v; want a start: %v", tt.at.Sub(t0), res.Winner, err, tt.start)
		}
	}
}

// sameState reports whether two states hold the same values, times compared with Equal.
func sameState(a, b maintenance.TaskState) bool {
	times := func(s maintenance.TaskState) []time.Time {
		return []time.Time{s.LastRunAt, s.RunningSince, s.RunningUntil, s.DeferredSince, s.DeferredAt}
	}
	ta, tb := times(a), times(b)
	for i := range ta {
		if !ta[i].Equal(tb[i]) {
			return false
		}
	}
	a.LastRunAt, a.RunningSince, a.RunningUntil, a.DeferredSince, a.DeferredAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}
	b.LastRunAt, b.RunningSince, b.RunningUntil, b.DeferredSince, b.DeferredAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return a == b
}

// relOptions returns the storage options of table in the pool's schema.
func relOptions(t *testing.T, pool *pgxpool.Pool, table string) []string {
	t.Helper()
	var opts []string
	if err := pool.QueryRow(context.Background(), `SELECT coalesce(reloptions, '{}') FROM pg_class
		WHERE oid = to_regclass(quote_ident(current_schema()) || '.' || $1)`, table).Scan(&opts); err != nil {
		t.Fatal(err)
	}
	return opts
}

// Step 10 leaves room on rota_due's pages, so that StartClaims, which changes no indexed
// column, writes each started claim on the page of the row it replaces, a HOT update with
// no index entry, in a schema migrated from step 9 as in a new one. Without the room a
// claimed row's page is full and the started version goes elsewhere, with an entry in each
// index.
func TestStartClaimsStayOnTheirPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.PoolIn(t, pgtest.Schema(t, "rota_test"), 2)
	if err := postgres.MigrateTo(ctx, pool, 9); err != nil {
		t.Fatal(err)
	}
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if opts := relOptions(t, pool, "rota_due"); !slices.Contains(opts, "fillfactor=70") {
		t.Fatalf("rota_due options %v lack fillfactor=70", opts)
	}
	users := make([]string, 10)
	for i := range users {
		users[i] = fmt.Sprintf("u%02d", i)
	}
	pgtest.LoadDue(t, pool, users, slices.Repeat([]int{100}, len(users)), func(int) time.Time { return t0 })
	idx := postgres.NewIndex(pool)
	var keys []duework.Key
	for _, u := range users {
		for j := 0; j < 100; j += 10 {
			keys = append(keys, duework.Key{UserID: u, WorkKey: fmt.Sprintf("w%07d", j)})
		}
	}
	claims, err := idx.Claim(ctx, keys, t0.Add(time.Second), t0.Add(time.Hour))
	if err != nil || len(claims) != len(keys) {
		t.Fatalf("Claim: %d of %d: %v", len(claims), len(keys), err)
	}
	pages := func() map[string]string {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT user_id || '/' || work_key, split_part(trim('()' FROM ctid::text), ',', 1)
			FROM rota_due WHERE claim_token IS NOT NULL`)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for rows.Next() {
			var k, page string
			if err := rows.Scan(&k, &page); err != nil {
				t.Fatal(err)
			}
			m[k] = page
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	before := pages()
	starts := make([]duework.Unclaim, len(claims))
	for i, c := range claims {
		starts[i] = duework.Unclaim{Tenant: mustTC(t, c.Entry.UserID), Claim: c}
	}
	errs, err := idx.StartClaims(ctx, starts)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("StartClaims item %d: %v", i, e)
		}
	}
	after := pages()
	if len(after) != len(keys) {
		t.Fatalf("%d claimed rows after StartClaims, want %d", len(after), len(keys))
	}
	moved := 0
	for k, p := range after {
		if before[k] != p {
			moved++
		}
	}
	if moved > 0 {
		t.Errorf("StartClaims moved %d of %d rows to another page; want each next to the row it replaces", moved, len(keys))
	}
}
