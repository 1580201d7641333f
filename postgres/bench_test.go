package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// noisyFixture is the noisy-neighbour shape: one user ("noisy") with backlog due entries
// and quiet users with one each, due two seconds after the backlog began — so that first
// come, first served hands the whole batch to the noisy user. Every user is routed to the
// lane "all", as a dispatcher's first cycles would have done.
func noisyFixture(tb testing.TB, backlog, quiet int) *pgxpool.Pool {
	tb.Helper()
	pool := pgtest.Pool(tb)
	users := []string{"noisy"}
	counts := []int{backlog}
	for i := range quiet {
		users = append(users, fmt.Sprintf("user%06d", i))
		counts = append(counts, 1)
	}
	pgtest.LoadDue(tb, pool, users, counts, func(i int) time.Time {
		if i == 0 {
			return t0
		}
		return t0.Add(2 * time.Second)
	})
	routeAll(tb, pool, "all")
	return pool
}

// routeAll moves every user to group, as Route would, and vacuums the users' table.
func routeAll(tb testing.TB, pool *pgxpool.Pool, group string) {
	tb.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `UPDATE rota_users SET group_name = $1`, group); err != nil {
		tb.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE rota_users`); err != nil {
		tb.Fatal(err)
	}
}

// statement is one SQL statement and its arguments.
type statement struct {
	sql  string
	args []any
}

// explain returns EXPLAIN (ANALYZE, BUFFERS, WAL) of each of stmts, run one after another
// after settings (the Index's plan settings, or none), in one transaction, which is rolled
// back.
func explain(tb testing.TB, pool *pgxpool.Pool, settings string, stmts ...statement) string {
	tb.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if settings != "" {
		if _, err := tx.Exec(ctx, settings); err != nil {
			tb.Fatal(err)
		}
	}
	var plans []string
	for _, st := range stmts {
		rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, WAL) "+st.sql, st.args...)
		if err != nil {
			tb.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			tb.Fatal(err)
		}
		plans = append(plans, strings.Join(lines, "\n"))
	}
	return strings.Join(plans, "\nthen\n")
}

var benchNow = t0.Add(24 * time.Hour)

// releaseAll ends every claim and hold and brings the claimed users' ReadyAt and Turn back,
// between timed rounds. Their LastServed stays: the queue goes on turning.
func releaseAll(tb testing.TB, pool *pgxpool.Pool) {
	tb.Helper()
	ctx := context.Background()
	var users []string
	if err := pool.QueryRow(ctx, `
		WITH r AS (UPDATE rota_due SET claim_token = NULL, claim_until = NULL WHERE claim_until IS NOT NULL RETURNING user_id)
		SELECT coalesce(array_agg(DISTINCT user_id), '{}') FROM r`).Scan(&users); err != nil {
		tb.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE rota_users SET held_until = NULL WHERE held_until IS NOT NULL`); err != nil {
		tb.Fatal(err)
	}
	recompute(tb, pool, users)
}

// recompute sets the ReadyAt and Turn of users from their entries, as the Index does.
func recompute(tb testing.TB, pool *pgxpool.Pool, users []string) {
	tb.Helper()
	b := &pgx.Batch{}
	b.Queue(postgres.SQLPlanSettings)
	b.Queue(postgres.SQLRecompute, users)
	if err := pool.SendBatch(context.Background(), b).Close(); err != nil {
		tb.Fatal(err)
	}
}

func oneLane(perUser, batch int) dispatch.Config {
	return dispatch.Config{
		Lanes:            []dispatch.LaneCapacity{{Lane: "all", PerUserLimit: perUser, PerCycleLimit: batch}},
		GlobalBatchLimit: batch,
		LaneFor:          func(context.Context, string) (dispatch.Lane, error) { return "all", nil },
		ClaimFor:         time.Hour,
	}
}

// sqlFirstCome is the plain first-come claim the fair cycle is measured against: the 1,000
// oldest due rows, whoever they belong to.
const sqlFirstCome = `
UPDATE rota_due d SET claim_token = nextval('rota_claim_token'), claim_until = $2
FROM (SELECT user_id, work_key FROM rota_due
      WHERE claim_until IS NULL AND due_at <= $1
      ORDER BY due_at LIMIT 1000 FOR UPDATE SKIP LOCKED) c
WHERE d.user_id = c.user_id AND d.work_key = c.work_key
RETURNING d.user_id`

// firstCome runs sqlFirstCome at now and returns the users of the 1,000 rows it claimed and
// how long it took.
func firstCome(b *testing.B, pool *pgxpool.Pool, now time.Time) ([]string, time.Duration) {
	b.Helper()
	start := time.Now()
	rows, err := pool.Query(context.Background(), sqlFirstCome, now, now.Add(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	took := time.Since(start)
	if err != nil || len(got) != 1000 {
		b.Fatalf("first-come claim: %d rows, %v", len(got), err)
	}
	return got, took
}

// A full fair cycle (Dispatch: Groups, Ready, Select, Claim, Release) of 1,000 items against
// a plain first-come claim of 1,000 rows, side by side on the same data: one user with a
// 1,000,000-row backlog and 1,000, 10,000 or 100,000 quiet users with one entry each, all
// routed. Claims and holds are released after every cycle, untimed, so every iteration sees
// the same backlog; the queue goes on turning. noisy-share is the fraction of the batch
// the noisy user got. Each iteration runs one fair cycle and one first-come claim, back to
// back, so their ratio (fair/first-come) is measured under the same conditions even on a
// busy machine. With -v it logs EXPLAIN (ANALYZE, BUFFERS, WAL) of Ready, Claim and
// CompleteMany as a cycle runs them.
func BenchmarkFairCycleVsFirstCome(b *testing.B) {
	for _, quiet := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("users=%d", quiet), func(b *testing.B) {
			pool := noisyFixture(b, 1_000_000, quiet)
			idx := postgres.NewIndex(pool)
			if testing.Verbose() {
				logPlans(b, pool, idx)
			}
			d, err := dispatch.New(idx, oneLane(10, 1000))
			if err != nil {
				b.Fatal(err)
			}
			var fair, first time.Duration
			fairNoisy, firstNoisy, total := 0, 0, 0
			for i := 0; b.Loop(); i++ {
				now := benchNow.Add(time.Duration(i) * time.Second)

				batch, took := fairCycle(b, d, now)
				fair += took
				for _, it := range batch.Items {
					if it.Claim.Entry.UserID == "noisy" {
						fairNoisy++
					}
				}
				releaseAll(b, pool)

				got, took := firstCome(b, pool, now)
				first += took
				for _, u := range got {
					if u == "noisy" {
						firstNoisy++
					}
				}
				releaseAll(b, pool)
				total += 1000
			}
			n := float64(b.N)
			b.ReportMetric(float64(fair.Microseconds())/1000/n, "fair-ms")
			b.ReportMetric(float64(first.Microseconds())/1000/n, "first-come-ms")
			b.ReportMetric(float64(fair)/float64(first), "fair/first-come")
			b.ReportMetric(float64(fairNoisy)/float64(total), "fair-noisy-share")
			b.ReportMetric(float64(firstNoisy)/float64(total), "first-come-noisy-share")
		})
	}
}

// fairCycle runs one full fair cycle of 1,000 items at now and returns its batch and how
// long it took.
func fairCycle(b *testing.B, d *dispatch.Dispatcher, now time.Time) (dispatch.Batch, time.Duration) {
	b.Helper()
	start := time.Now()
	batch, err := d.Dispatch(context.Background(), now)
	took := time.Since(start)
	if err != nil || len(batch.Items) != 1000 {
		b.Fatalf("Dispatch: %d items, %v", len(batch.Items), err)
	}
	return batch, took
}

// sqlFloorClaim is the least a fair claim writes: the entries, as Claim claims them, and
// each of their users moved to the back of its queue (turn and LastServed now), in one
// statement. It keeps no user lock and no ReadyAt, so it is no way to dispatch: it is what
// any turn queue in rota_users must write at the least.
const sqlFloorClaim = `
WITH c AS (
	UPDATE rota_due d SET claim_token = nextval('rota_claim_token'), claim_until = $4
	FROM (SELECT * FROM unnest($1::text[], $2::text[]) AS k(user_id, work_key)
		ORDER BY k.user_id COLLATE "C", k.work_key COLLATE "C" OFFSET 0) k
	WHERE d.user_id = k.user_id AND d.work_key = k.work_key AND d.due_at <= $3 AND (d.claim_until IS NULL OR d.claim_until <= $3)
	RETURNING d.user_id, d.work_key, d.tier, d.due_at, d.last_run_at, d.miss_streak, d.claim_token, d.claim_until
), moved AS (
	UPDATE rota_users u SET last_served = $3, turn = $3
	FROM (SELECT DISTINCT c.user_id FROM c ORDER BY c.user_id) s WHERE u.user_id = s.user_id
)
SELECT c.user_id, c.work_key, c.tier, c.due_at, c.last_run_at, c.miss_streak, c.claim_token, c.claim_until FROM c`

// The floor under BenchmarkFairCycleVsFirstCome's bar, on the same data as its users=1000
// case: the least a fair cycle of 1,000 items can cost here, next to the same first-come
// claim and the same fair cycle. Each iteration reads the front of the queue with Ready
// (no hold), then claims one entry of each user read and moves those users to the back of
// the queue in one statement (sqlFloorClaim) — no hold, no user lock, no ReadyAt, which a
// real cycle needs and pays for on top; then one first-come claim and one full fair cycle
// (Dispatch), everything released untimed between them. floor/first-come is what reading
// 1,000 users with their entries and moving them in a B-tree costs next to claiming 1,000
// entries, whatever the Index does; fair/floor is what the Index's cycle pays on top of
// that floor, measured in the same iterations.
func BenchmarkFairCycleFloor(b *testing.B) {
	pool := noisyFixture(b, 1_000_000, 1_000)
	idx := postgres.NewIndex(pool)
	d, err := dispatch.New(idx, oneLane(10, 1000))
	if err != nil {
		b.Fatal(err)
	}
	var floor, first, fair time.Duration
	for i := 0; b.Loop(); i++ {
		now := benchNow.Add(time.Duration(i) * time.Second)

		floor += floorCycle(b, pool, idx, now)
		releaseAll(b, pool)

		_, took := firstCome(b, pool, now)
		first += took
		releaseAll(b, pool)

		_, took = fairCycle(b, d, now)
		fair += took
		releaseAll(b, pool)
	}
	n := float64(b.N)
	b.ReportMetric(float64(floor.Microseconds())/1000/n, "floor-ms")
	b.ReportMetric(float64(first.Microseconds())/1000/n, "first-come-ms")
	b.ReportMetric(float64(floor)/float64(first), "floor/first-come")
	b.ReportMetric(float64(fair)/float64(floor), "fair/floor")
}

// floorCycle runs BenchmarkFairCycleFloor's floor at now — Ready without a hold, then
// sqlFloorClaim of each user's first entry — and returns how long it took.
func floorCycle(b *testing.B, pool *pgxpool.Pool, idx *postgres.Index, now time.Time) time.Duration {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	page, err := idx.Ready(ctx, duework.ReadyQuery{Group: "all", Now: now, Users: 1000, PerUser: 10})
	if err != nil {
		b.Fatal(err)
	}
	users, works := make([]string, len(page.Heads)), make([]string, len(page.Heads))
	for j, h := range page.Heads {
		users[j], works[j] = h.UserID, h.Due[0].WorkKey
	}
	rows, err := pool.Query(ctx, sqlFloorClaim, users, works, now, now.Add(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (duework.Entry, error) {
		var e duework.Entry
		var last *time.Time
		var streak, token int64
		var until time.Time
		err := r.Scan(&e.UserID, &e.WorkKey, &e.Tier, &e.DueAt, &last, &streak, &token, &until)
		return e, err
	})
	took := time.Since(start)
	if err != nil || len(got) != 1000 {
		b.Fatalf("floor claim: %d rows, %v", len(got), err)
	}
	return took
}

// sqlUserRowClaim is the claim of a design BenchmarkFairCycleUserRowClaims measures and
// rota does not use: claims kept on the user row (work keys, tokens and untils in arrays)
// instead of in rota_due, so that a fair claim writes only the user rows it must write
// anyway, and no entry. One statement checks that each key is due, gives it a token,
// appends it to its user's claims and moves the user: LastServed, hold ended, free_at (its
// first entry not claimed) and Turn. It is a lower bound of that design, not a working
// version: it takes no user lock before its snapshot (so a concurrent writer could leave
// free_at stale), never drops ended claims from the arrays, and nothing else reads them.
const sqlUserRowClaim = `
WITH k AS (
	SELECT k.user_id, array_agg(k.work_key) AS keys
	FROM unnest($1::text[], $2::text[]) AS k(user_id, work_key) GROUP BY k.user_id
), v AS (
	SELECT k.user_id, array_agg(d.work_key) AS keys, array_agg(nextval('rota_claim_token')) AS tokens
	FROM k CROSS JOIN LATERAL (
		SELECT d.work_key FROM rota_due d WHERE d.user_id = k.user_id AND d.work_key = ANY(k.keys) AND d.due_at <= $3) d
	GROUP BY k.user_id
)
UPDATE rota_users u SET claim_keys = u.claim_keys || v.keys, claim_tokens = u.claim_tokens || v.tokens,
	claim_untils = u.claim_untils || array_fill($4::timestamptz, ARRAY[cardinality(v.keys)]),
	last_served = $3, held_until = NULL, free_at = f.free_at, claim_end_at = least(u.claim_end_at, $4),
	turn = greatest(least(f.free_at, $4), $3)
FROM v LEFT JOIN LATERAL (
	SELECT d.due_at AS free_at FROM rota_due d, rota_users w
	WHERE w.user_id = v.user_id AND d.claim_until IS NULL
	  AND (d.user_id, d.due_at) BETWEEN (v.user_id, '-infinity') AND (v.user_id, 'infinity')
	  AND NOT (d.work_key = ANY(w.claim_keys || v.keys))
	ORDER BY d.user_id, d.due_at, d.work_key LIMIT 1) f ON true
WHERE u.user_id = v.user_id
RETURNING cardinality(v.keys)`

// A fair cycle of a design rota does not use, on BenchmarkFairCycleVsFirstCome's
// users=1000 data, against the same first-come claim: claims kept on the user row
// (sqlUserRowClaim), so that claiming writes no entry at all. Each iteration runs Groups,
// Ready of 1,000 users with a hold (as Dispatch does), then sqlUserRowClaim of the first
// 1,000 entries read; claims, holds and the moved users are put back untimed. It answers
// whether moving the claim off rota_due, the only write a fair cycle shares with the
// first-come claim, would bring a cycle within 2× of it: read/first-come is Groups and
// Ready, claim/first-come the claim statement, prototype/first-come the two together.
func BenchmarkFairCycleUserRowClaims(b *testing.B) {
	pool := noisyFixture(b, 1_000_000, 1_000)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `ALTER TABLE rota_users ADD COLUMN claim_keys text[] NOT NULL DEFAULT '{}',
		ADD COLUMN claim_tokens bigint[] NOT NULL DEFAULT '{}', ADD COLUMN claim_untils timestamptz[] NOT NULL DEFAULT '{}'`); err != nil {
		b.Fatal(err)
	}
	idx := postgres.NewIndex(pool)
	var read, claim, first time.Duration
	for i := 0; b.Loop(); i++ {
		now := benchNow.Add(time.Duration(i) * time.Second)

		start := time.Now()
		if _, err := idx.Groups(ctx, now); err != nil {
			b.Fatal(err)
		}
		page, err := idx.Ready(ctx, duework.ReadyQuery{Group: "all", Now: now, Users: 1000, PerUser: 10, Hold: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		var users, works []string
		for _, h := range page.Heads {
			for _, e := range h.Due[:min(len(h.Due), 1000-len(users))] {
				users, works = append(users, h.UserID), append(works, e.WorkKey)
			}
		}
		read += time.Since(start)
		start = time.Now()
		rows, err := pool.Query(ctx, sqlUserRowClaim, users, works, now, now.Add(time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		claimed := 0
		var n int
		_, err = pgx.ForEachRow(rows, []any{&n}, func() error { claimed += n; return nil })
		claim += time.Since(start)
		if err != nil || claimed != 1000 {
			b.Fatalf("user-row claim: %d claims, %v", claimed, err)
		}
		putBackUserRowClaims(b, pool, users)

		_, took := firstCome(b, pool, now)
		first += took
		releaseAll(b, pool)
	}
	b.ReportMetric(float64(read)/float64(first), "read/first-come")
	b.ReportMetric(float64(claim)/float64(first), "claim/first-come")
	b.ReportMetric(float64(read+claim)/float64(first), "prototype/first-come")
}

// putBackUserRowClaims ends sqlUserRowClaim's claims and the holds, and recomputes the
// users' ReadyAt and Turn as releaseAll does.
func putBackUserRowClaims(b *testing.B, pool *pgxpool.Pool, users []string) {
	b.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `UPDATE rota_users SET claim_keys = '{}', claim_tokens = '{}', claim_untils = '{}',
		held_until = NULL, claim_end_at = NULL WHERE cardinality(claim_keys) > 0 OR held_until IS NOT NULL`); err != nil {
		b.Fatal(err)
	}
	recompute(b, pool, users)
}

// logPlans logs EXPLAIN (ANALYZE, BUFFERS, WAL) of the statements of one cycle at the front
// of the queue — Ready of 1,000 users, Claim of their first entries and its users,
// CompleteMany of those claims and its users — and of the first-come claim as it runs, each
// rolled back.
func logPlans(b *testing.B, pool *pgxpool.Pool, idx *postgres.Index) {
	b.Helper()
	ctx := context.Background()
	now := benchNow.Add(-time.Second)
	b.Logf("Ready:\n%s", explain(b, pool, postgres.SQLCountSettings, statement{postgres.SQLReady, []any{"all", now, 1000, 10, now.Add(dispatch.DefaultHoldFor), fmt.Sprint(now.UnixMicro() * 1000)}}))
	page, err := idx.Ready(ctx, duework.ReadyQuery{Group: "all", Now: now, Users: 1000, PerUser: 1})
	if err != nil {
		b.Fatal(err)
	}
	var users, works []string
	for _, h := range page.Heads {
		users, works = append(users, h.UserID), append(works, h.Due[0].WorkKey)
	}
	b.Logf("Claim:\n%s", explain(b, pool, postgres.SQLCountSettings, statement{postgres.SQLClaimLock, []any{users, now, true, false}},
		statement{postgres.SQLClaim, []any{users, works, now, now.Add(time.Hour), fmt.Sprint(now.UnixMicro() * 1000), false, false}},
		statement{postgres.SQLServe, []any{now, now.Add(time.Hour), fmt.Sprint(now.UnixMicro() * 1000)}}))
	claims, err := idx.Claim(ctx, keysOf(page), now, now.Add(time.Hour))
	if err != nil || len(claims) != len(users) {
		b.Fatalf("Claim: %d, %v", len(claims), err)
	}
	tokens, tiers, due := make([]int64, len(claims)), make([]string, len(claims)), make([]time.Time, len(claims))
	last, streaks := make([]*time.Time, len(claims)), make([]int64, len(claims))
	for i, c := range claims {
		users[i], works[i], tokens[i], tiers[i], due[i] = c.Entry.UserID, c.Entry.WorkKey, int64(c.Token), c.Entry.Tier, now.Add(time.Hour)
	}
	b.Logf("CompleteMany:\n%s", explain(b, pool, postgres.SQLPlanSettings, statement{postgres.SQLCompleteMany, []any{users, works, tokens, tiers, due, last, streaks}},
		statement{postgres.SQLRecomputeLocked, nil}))
	releaseAll(b, pool)
	b.Logf("first-come:\n%s", explain(b, pool, "", statement{sqlFirstCome, []any{now, now.Add(time.Hour)}}))
}

// claimFixture is the claim benchmarks' schema: 100,000 entries, all due at t0, of users
// users (user00000, user00001, …) routed to "all". It returns the schema, a setup pool of
// two connections on it and the users.
func claimFixture(b *testing.B, users int) (schema string, setup *pgxpool.Pool, ids []string) {
	b.Helper()
	schema = pgtest.Schema(b, "rota_test")
	setup = pgtest.PoolIn(b, schema, 2)
	if err := postgres.Migrate(context.Background(), setup); err != nil {
		b.Fatal(err)
	}
	ids = make([]string, users)
	counts := make([]int, users)
	for i := range ids {
		ids[i], counts[i] = fmt.Sprintf("user%05d", i), 100_000/users
	}
	pgtest.LoadDue(b, setup, ids, counts, func(int) time.Time { return t0 })
	routeAll(b, setup, "all")
	return schema, setup, ids
}

// Claim throughput: 1, 2 and 4 dispatchers, each with its own pool, run cycles of up to
// 1,000 claims (one per user) at the same instants over 10,000 users with 10 due entries
// each — enough users for four dispatchers to read a full batch each. No worker completes
// anything, so the claimed rows pile up — they must not slow later cycles down. A user a
// dispatcher read is held from the others until it is served, and then it is at the back
// of the queue, so the dispatchers read disjoint users: lost/op counts the claims per round
// that another dispatcher won all the same. dispatching/round is the share of each round
// a dispatcher spent in Dispatch: in lockstep, the rest it waits for the slowest.
//
// "paired" runs a round of one dispatcher and a round of four in each iteration, each on
// a schema of its own, and reports the ratio of their entries per second: a shared machine
// that slows down or speeds up during the run moves both alike, where the separate
// sub-benchmarks, minutes apart, can differ by a third on their own.
func BenchmarkClaim(b *testing.B) {
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("dispatchers=%d", n), func(b *testing.B) {
			f := newClaimFleet(b, n)
			claimed, lost := 0, 0
			for i := 0; b.Loop(); i++ {
				f.refill(b)
				c, l := f.round(b, i)
				claimed, lost = claimed+c, lost+l
			}
			b.ReportMetric(float64(claimed)/b.Elapsed().Seconds(), "entries/s")
			b.ReportMetric(float64(claimed)/float64(b.N), "items/round")
			b.ReportMetric(float64(lost)/float64(b.N), "lost/op")
			b.ReportMetric(float64(f.busy)/float64(time.Duration(n)*f.rounds), "dispatching/round")
		})
	}
	b.Run("paired", func(b *testing.B) {
		one, four := newClaimFleet(b, 1), newClaimFleet(b, 4)
		var took [2]time.Duration
		var claimed [2]int
		lost := 0
		for i := 0; b.Loop(); i++ {
			for k, f := range []*claimFleet{one, four} {
				f.refill(b)
				start := time.Now()
				c, l := f.round(b, i)
				took[k] += time.Since(start)
				claimed[k], lost = claimed[k]+c, lost+l
			}
		}
		rate := func(k int) float64 { return float64(claimed[k]) / took[k].Seconds() }
		b.ReportMetric(rate(1)/rate(0), "dispatchers=4/dispatchers=1")
		b.ReportMetric(float64(lost)/float64(b.N), "lost/op")
	})
}

// claimFleet is BenchmarkClaim's dispatchers over one claimFixture schema.
type claimFleet struct {
	setup *pgxpool.Pool
	disps []*dispatch.Dispatcher
	since int // claims since the claimed rows were last released
	// busy is the time the dispatchers spent in Dispatch, rounds the rounds' time: in
	// lockstep, a dispatcher waits out the rest of each round for the slowest.
	busy, rounds time.Duration
}

func newClaimFleet(b *testing.B, n int) *claimFleet {
	schema, setup, _ := claimFixture(b, 10_000)
	f := &claimFleet{setup: setup, disps: make([]*dispatch.Dispatcher, n)}
	for i := range f.disps {
		d, err := dispatch.New(postgres.NewIndex(pgtest.PoolIn(b, schema, 2)), oneLane(1, 1000))
		if err != nil {
			b.Fatal(err)
		}
		f.disps[i] = d
	}
	return f
}

// refill releases the claimed rows, off the clock, before the users' entries run out.
func (f *claimFleet) refill(b *testing.B) {
	if f.since > 90_000 {
		b.StopTimer()
		releaseAll(b, f.setup)
		f.since = 0
		b.StartTimer()
	}
}

// round runs round i: every dispatcher cycles once, all at the same instant. It returns
// the items claimed and the claims lost.
func (f *claimFleet) round(b *testing.B, i int) (claimed, lost int) {
	now := benchNow.Add(time.Duration(i) * time.Second)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for _, d := range f.disps {
		wg.Go(func() {
			begun := time.Now()
			batch, err := d.Dispatch(context.Background(), now)
			took := time.Since(begun)
			if err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			f.busy += took
			claimed += len(batch.Items)
			for _, l := range batch.Lanes {
				lost += l.LostClaims
			}
		})
	}
	wg.Wait()
	f.rounds += time.Since(start)
	f.since += claimed
	return claimed, lost
}

// Index.Claim throughput without dispatch: 1 and 4 claimers, each with its own pool, claim
// batches of 1,000 keys from disjoint sets of users (1,000 users with 100 due entries each),
// all at once. This is what the index itself sustains when claimers do not collide.
func BenchmarkIndexClaim(b *testing.B) {
	for _, n := range []int{1, 4} {
		b.Run(fmt.Sprintf("claimers=%d", n), func(b *testing.B) {
			ctx := context.Background()
			schema, setup, users := claimFixture(b, 1_000)
			idxs := make([]*postgres.Index, n)
			for i := range idxs {
				idxs[i] = postgres.NewIndex(pgtest.PoolIn(b, schema, 2))
			}
			// batch returns claimer c's round r: 1,000 keys of its own users, round-robin.
			batch := func(c, r int) []duework.Key {
				mine := users[c*len(users)/n : (c+1)*len(users)/n]
				keys := make([]duework.Key, 0, 1000)
				for j := 0; len(keys) < 1000; j++ {
					k := r*1000 + j
					keys = append(keys, duework.Key{UserID: mine[k%len(mine)], WorkKey: fmt.Sprintf("w%07d", (k/len(mine))%100)})
				}
				return keys
			}
			rounds := 100 * len(users) / n / 1000 // rounds before a claimer's users are drained
			claimed := 0
			for i := 0; b.Loop(); i++ {
				if i > 0 && i%rounds == 0 {
					b.StopTimer()
					releaseAll(b, setup)
					b.StartTimer()
				}
				now := benchNow.Add(time.Duration(i) * time.Second)
				var mu sync.Mutex
				var wg sync.WaitGroup
				for c, idx := range idxs {
					wg.Go(func() {
						got, err := idx.Claim(ctx, batch(c, i%rounds), now, now.Add(time.Hour))
						if err != nil {
							b.Error(err)
						}
						mu.Lock()
						claimed += len(got)
						mu.Unlock()
					})
				}
				wg.Wait()
			}
			if claimed != b.N*n*1000 {
				b.Fatalf("claimed %d of %d", claimed, b.N*n*1000)
			}
			b.ReportMetric(float64(claimed)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}

// Ready in the noisy-neighbour shape: 10,000 quiet users with one due entry and one user
// whose backlog is 1,000 or 1,000,000 due entries, a read of 1,000 users with 10 entries
// each, no hold. The two sizes are measured separately and then paired: each iteration of
// "paired" reads both, one after the other, and reports their ratio, which a busy machine
// disturbs far less than the separate times.
func BenchmarkReadyNoisy(b *testing.B) {
	sizes := []int{1_000, 1_000_000}
	idxs := make([]*postgres.Index, len(sizes))
	for i, backlog := range sizes {
		idxs[i] = postgres.NewIndex(noisyFixture(b, backlog, 10_000))
	}
	read := func(b *testing.B, idx *postgres.Index) time.Duration {
		start := time.Now()
		p, err := idx.Ready(context.Background(), duework.ReadyQuery{Group: "all", Now: benchNow, Users: 1000, PerUser: 10})
		if err != nil || len(p.Heads) != 1000 || p.Heads[0].UserID != "noisy" || len(p.Heads[0].Due) != 10 {
			b.Fatalf("Ready: %d heads, %v", len(p.Heads), err)
		}
		return time.Since(start)
	}
	for i, backlog := range sizes {
		b.Run(fmt.Sprintf("backlog=%d", backlog), func(b *testing.B) {
			for b.Loop() {
				read(b, idxs[i])
			}
		})
	}
	b.Run("paired", func(b *testing.B) {
		var small, big time.Duration
		for b.Loop() {
			small += read(b, idxs[0])
			big += read(b, idxs[1])
		}
		b.ReportMetric(float64(big)/float64(small), "big/small")
	})
}

// ScheduleMissing of a tenant's whole watchlist in one call: 2,316 entries, each
// iteration for a new tenant (so every entry is inserted), over an index that already
// holds 100,000 entries of other tenants.
func BenchmarkScheduleMissing(b *testing.B) {
	const entries = 2_316
	b.Run(fmt.Sprintf("entries=%d", entries), func(b *testing.B) {
		ctx := context.Background()
		pool := pgtest.Pool(b)
		users, counts := make([]string, 1000), make([]int, 1000)
		for i := range users {
			users[i], counts[i] = fmt.Sprintf("user%03d", i), 100
		}
		pgtest.LoadDue(b, pool, users, counts, func(int) time.Time { return t0 })
		idx := postgres.NewIndex(pool)
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			user := fmt.Sprintf("tenant%06d", i)
			es := make([]duework.Entry, entries)
			for j := range es {
				es[j] = duework.Entry{UserID: user, WorkKey: fmt.Sprintf("https://example.com/feed/%05d.xml", j), Tier: "hot", DueAt: benchNow.Add(time.Duration(j) * time.Second)}
			}
			tc := mustTC(b, user)
			b.StartTimer()
			added, err := idx.ScheduleMissing(ctx, tc, es)
			if err != nil || added != entries {
				b.Fatalf("ScheduleMissing: added %d of %d, %v", added, entries, err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
	})
}

// Ready and Groups behind a served queue: 100,000 users routed to one group, one due entry
// each, after 0, 100,000 or 1,000,000 serves since the users' table was last vacuumed. A
// serve moves a user to the back of its queue and leaves its old entry of rota_users_queue
// at the front, dead; reads mark such entries dead as they pass them, but only VACUUM
// removes them and their pages, so until it runs every read of the queue's front steps
// over them. The serves are made in bulk (10,000 users at a time moved to the back, as
// ten cycles of 1,000 would), so that only the queue's own cost is measured. Each
// iteration runs Groups, then Ready of 1,000 users with a hold, timed, and releases the
// holds untimed; "served=1000000,vacuumed" is the last fixture after VACUUM rota_users,
// whose duration it reports. "paired" reads the 0 and 1,000,000 fixtures one after the
// other in each iteration and reports their ratio.
func BenchmarkReadyBehindServes(b *testing.B) {
	const users = 100_000
	ctx := context.Background()
	served := []int{0, 100_000, 1_000_000}
	pools := make([]*pgxpool.Pool, len(served))
	idxs := make([]*postgres.Index, len(served))
	for i, n := range served {
		pools[i] = servedFixture(b, users, n)
		idxs[i] = postgres.NewIndex(pools[i])
	}
	read := func(b *testing.B, idx *postgres.Index) (groups, ready time.Duration) {
		start := time.Now()
		gs, err := idx.Groups(ctx, benchNow)
		groups = time.Since(start)
		if err != nil || len(gs) != 1 {
			b.Fatalf("Groups: %v, %v", gs, err)
		}
		q := duework.ReadyQuery{Group: "all", Now: benchNow, Users: 1000, PerUser: 1, Hold: time.Minute}
		start = time.Now()
		page, err := idx.Ready(ctx, q)
		ready = time.Since(start)
		if err != nil || len(page.Heads) != 1000 {
			b.Fatalf("Ready: %d heads, %v", len(page.Heads), err)
		}
		b.StopTimer()
		ids := make([]string, len(page.Heads))
		for i, h := range page.Heads {
			ids[i] = h.UserID
		}
		if err := idx.Release(ctx, ids, benchNow.Add(q.Hold)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		return groups, ready
	}
	measure := func(idx *postgres.Index) func(*testing.B) {
		return func(b *testing.B) {
			var groups, ready time.Duration
			for b.Loop() {
				g, r := read(b, idx)
				groups, ready = groups+g, ready+r
			}
			b.ReportMetric(float64(groups.Microseconds())/1000/float64(b.N), "groups-ms")
			b.ReportMetric(float64(ready.Microseconds())/1000/float64(b.N), "ready-ms")
		}
	}
	for i, n := range served {
		b.Run(fmt.Sprintf("served=%d", n), measure(idxs[i]))
	}
	b.Run("paired", func(b *testing.B) {
		var clean, behind time.Duration
		for b.Loop() {
			g, r := read(b, idxs[0])
			clean += g + r
			g, r = read(b, idxs[len(idxs)-1])
			behind += g + r
		}
		b.ReportMetric(float64(behind)/float64(clean), "served=1000000/served=0")
	})
	start := time.Now()
	if _, err := pools[len(pools)-1].Exec(ctx, `VACUUM rota_users`); err != nil {
		b.Fatal(err)
	}
	vacuum := time.Since(start)
	b.Run("served=1000000,vacuumed", func(b *testing.B) {
		measure(idxs[len(idxs)-1])(b)
		b.ReportMetric(float64(vacuum.Microseconds())/1000, "vacuum-ms")
	})
}

// servedFixture loads users users (user000000, …) with one entry each, due at t0 and
// routed to "all", vacuums them, and then serves them served times: 10,000 at a time, in
// UserID order, each batch moved to the back of the queue (turn and LastServed one
// millisecond after the previous batch's, all before benchNow).
func servedFixture(tb testing.TB, users, served int) *pgxpool.Pool {
	tb.Helper()
	const batch = 10_000
	pool := pgtest.Pool(tb)
	ids, counts := make([]string, users), make([]int, users)
	for i := range ids {
		ids[i], counts[i] = fmt.Sprintf("user%06d", i), 1
	}
	pgtest.LoadDue(tb, pool, ids, counts, func(int) time.Time { return t0 })
	routeAll(tb, pool, "all")
	for k := range served / batch {
		lo := (k * batch) % users
		at := t0.Add(time.Duration(k+1) * time.Millisecond)
		if _, err := pool.Exec(context.Background(), `UPDATE rota_users SET turn = $3, last_served = $3
			WHERE user_id >= $1 AND user_id < $2`, ids[lo], fmt.Sprintf("user%06d", lo+batch), at); err != nil {
			tb.Fatal(err)
		}
	}
	return pool
}

// limitsFixture is BenchmarkFairCycleWithLimits' schema: 10,000 users with 10 entries each,
// all due at t0 and routed to "all", and paused users more with as many entries each,
// paused for good; every user with limits l (none when l is zero).
func limitsFixture(b *testing.B, l duework.Limits, paused int) (*pgxpool.Pool, *postgres.Index) {
	b.Helper()
	_, setup, ids := claimFixture(b, 10_000)
	idx := postgres.NewIndex(setup)
	if paused > 0 {
		pausedIDs, counts := make([]string, paused), make([]int, paused)
		for i := range pausedIDs {
			pausedIDs[i], counts[i] = fmt.Sprintf("paused%05d", i), 10
		}
		pgtest.LoadDue(b, setup, pausedIDs, counts, func(int) time.Time { return t0 })
		routeAll(b, setup, "all")
		for _, id := range pausedIDs {
			if err := idx.Pause(context.Background(), mustTC(b, id), benchNow.Add(10_000*time.Hour), "upstream-429"); err != nil {
				b.Fatal(err)
			}
		}
		ids = append(ids, pausedIDs...)
	}
	if l != (duework.Limits{}) {
		for lo := 0; lo < len(ids); lo += 1000 {
			routes := make([]duework.Route, 0, 1000)
			for _, id := range ids[lo:min(lo+1000, len(ids))] {
				routes = append(routes, duework.Route{UserID: id, Group: "all", Limits: l})
			}
			if err := idx.Route(context.Background(), routes); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := setup.Exec(context.Background(), `VACUUM ANALYZE rota_users`); err != nil {
			b.Fatal(err)
		}
	}
	return setup, idx
}

// A fair cycle — Ready of 1,000 users with a hold, then Claim of each one's first entry —
// over 10,000 users with 10 due entries each, all of them with limits (weight 2, at most 4
// in flight, one item per millisecond after a burst of 4) and 1,111 more paused (a tenth of
// the users, with as many entries due as early), against the same cycle over the same
// 10,000 users without limits or pauses, each on a schema of its own, both in every
// iteration.
// Nothing is completed, so each user read has its earlier claims in flight (it comes round
// every 10 cycles), which both reads count and the limited claim checks; every 30
// iterations the claims are released, off the clock, before any user reaches its cap.
// limits/none is the ratio of the two cycles' times.
func BenchmarkFairCycleWithLimits(b *testing.B) {
	ctx := context.Background()
	type side struct {
		setup *pgxpool.Pool
		idx   *postgres.Index
		took  time.Duration
	}
	sides := []*side{{}, {}}
	sides[0].setup, sides[0].idx = limitsFixture(b, duework.Limits{}, 0)
	sides[1].setup, sides[1].idx = limitsFixture(b, duework.Limits{Weight: 2, MaxInFlight: 4, Every: time.Millisecond, Burst: 4}, 1_111)
	for i := 0; b.Loop(); i++ {
		if i > 0 && i%30 == 0 {
			b.StopTimer()
			for _, s := range sides {
				releaseAll(b, s.setup)
			}
			b.StartTimer()
		}
		now := benchNow.Add(time.Duration(i) * time.Second)
		for _, s := range sides {
			start := time.Now()
			page, err := s.idx.Ready(ctx, duework.ReadyQuery{Group: "all", Now: now, Users: 1000, PerUser: 1, Hold: dispatch.DefaultHoldFor})
			if err != nil {
				b.Fatal(err)
			}
			keys := make([]duework.Key, len(page.Heads))
			for j, h := range page.Heads {
				keys[j] = h.Due[0].Key()
			}
			cs, err := s.idx.Claim(ctx, keys, now, now.Add(time.Hour))
			s.took += time.Since(start)
			if err != nil || len(cs) != 1000 {
				b.Fatalf("cycle %d: %d heads, %d claims, %v", i, len(page.Heads), len(cs), err)
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(sides[0].took.Microseconds())/1000/n, "none-ms")
	b.ReportMetric(float64(sides[1].took.Microseconds())/1000/n, "limits-ms")
	b.ReportMetric(float64(sides[1].took)/float64(sides[0].took), "limits/none")
}
