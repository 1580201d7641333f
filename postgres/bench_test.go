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
// and quiet users (10,000 in the shape) with one each, due two seconds after the backlog began — so that first
// come, first served hands the whole batch to the noisy user.
func noisyFixture(tb testing.TB, backlog, quiet int) *pgxpool.Pool {
	tb.Helper()
	pool := pgtest.Pool(tb)
	users := []string{"noisy"}
	counts := []int{backlog}
	for i := range quiet {
		users = append(users, fmt.Sprintf("user%05d", i))
		counts = append(counts, 1)
	}
	pgtest.LoadDue(tb, pool, users, counts, func(i int) time.Time {
		if i == 0 {
			return t0
		}
		return t0.Add(2 * time.Second)
	})
	return pool
}

// explain returns EXPLAIN (ANALYZE, BUFFERS) of sql, run as the Index runs it (jit off).
// The analyzed statement runs in a transaction that is rolled back.
func explain(tb testing.TB, pool *pgxpool.Pool, sql string, args ...any) string {
	tb.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL jit = off"); err != nil {
		tb.Fatal(err)
	}
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+sql, args...)
	if err != nil {
		tb.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		tb.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

var benchNow = t0.Add(24 * time.Hour)

// DueHeads in the noisy-neighbour shape: 10,000 quiet users with one due entry and one
// user whose backlog is 1,000 or 1,000,000 due entries. The two sizes are measured
// separately and then paired: each iteration of "paired" calls both, one after the other,
// and reports their ratio, which a busy machine disturbs far less than the separate times.
func BenchmarkDueHeadsNoisy(b *testing.B) {
	sizes := []int{1_000, 1_000_000}
	idxs := make([]*postgres.Index, len(sizes))
	for i, backlog := range sizes {
		pool := noisyFixture(b, backlog, 10_000)
		idxs[i] = postgres.NewIndex(pool)
		if testing.Verbose() {
			b.Logf("backlog=%d plan:\n%s", backlog, explain(b, pool, postgres.SQLDueHeads, benchNow, 11))
		}
	}
	dueHeads := func(b *testing.B, idx *postgres.Index) time.Duration {
		start := time.Now()
		heads, err := idx.DueHeads(context.Background(), benchNow, 10)
		if err != nil || len(heads) != 10_001 {
			b.Fatalf("DueHeads: %d heads, %v", len(heads), err)
		}
		return time.Since(start)
	}
	for i, backlog := range sizes {
		b.Run(fmt.Sprintf("backlog=%d", backlog), func(b *testing.B) {
			for b.Loop() {
				dueHeads(b, idxs[i])
			}
		})
	}
	b.Run("paired", func(b *testing.B) {
		var small, big time.Duration
		for b.Loop() {
			small += dueHeads(b, idxs[0])
			big += dueHeads(b, idxs[1])
		}
		b.ReportMetric(float64(big)/float64(small), "big/small")
	})
}

// releaseAll ends every claim and rebuilds the user summaries, between timed rounds.
func releaseAll(tb testing.TB, pool *pgxpool.Pool) {
	tb.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `UPDATE rota_due SET claim_token = NULL, claim_until = NULL WHERE claim_until IS NOT NULL`); err != nil {
		tb.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE rota_users u SET
		free_at = (SELECT min(due_at) FROM rota_due d WHERE d.user_id = u.user_id AND d.claim_until IS NULL)`); err != nil {
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

// claimFixture is the claim benchmarks' schema: 1,000 users (user000…user999) with 100
// entries each, all due at t0. It returns the schema, a setup pool of two connections on it
// and the users.
func claimFixture(b *testing.B) (schema string, setup *pgxpool.Pool, users []string) {
	b.Helper()
	schema = pgtest.Schema(b, "rota_test")
	setup = pgtest.PoolIn(b, schema, 2)
	if err := postgres.Migrate(context.Background(), setup); err != nil {
		b.Fatal(err)
	}
	users = make([]string, 1000)
	counts := make([]int, 1000)
	for i := range users {
		users[i], counts[i] = fmt.Sprintf("user%03d", i), 100
	}
	pgtest.LoadDue(b, setup, users, counts, func(int) time.Time { return t0 })
	return schema, setup, users
}

// Claim throughput: 1 and 4 dispatchers, each with its own pool, run cycles of up to 1,000
// claims at the same time over 1,000 users with 100 due entries each. No worker completes
// anything, so the claimed rows pile up — they must not slow later cycles down. Concurrent
// dispatchers read the same heads and Select is deterministic, so they mostly pick the same
// entries: lost/op counts the claims another dispatcher won.
func BenchmarkClaim(b *testing.B) {
	for _, n := range []int{1, 4} {
		b.Run(fmt.Sprintf("dispatchers=%d", n), func(b *testing.B) {
			ctx := context.Background()
			schema, setup, _ := claimFixture(b)
			disps := make([]*dispatch.Dispatcher, n)
			for i := range disps {
				d, err := dispatch.New(postgres.NewIndex(pgtest.PoolIn(b, schema, 2)), oneLane(1, 1000))
				if err != nil {
					b.Fatal(err)
				}
				disps[i] = d
			}
			claimed, lost, since := 0, 0, 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if since > 90_000 {
					b.StopTimer()
					releaseAll(b, setup)
					since = 0
					b.StartTimer()
				}
				now := benchNow.Add(time.Duration(i) * time.Second)
				var mu sync.Mutex
				var wg sync.WaitGroup
				for _, d := range disps {
					wg.Go(func() {
						batch, err := d.Dispatch(ctx, now)
						if err != nil {
							b.Error(err)
							return
						}
						mu.Lock()
						claimed += len(batch.Items)
						since += len(batch.Items)
						for _, l := range batch.Lanes {
							lost += l.LostClaims
						}
						mu.Unlock()
					})
				}
				wg.Wait()
			}
			b.ReportMetric(float64(claimed)/b.Elapsed().Seconds(), "entries/s")
			b.ReportMetric(float64(lost)/float64(b.N), "lost/op")
		})
	}
}

// Index.Claim throughput without dispatch: 1 and 4 claimers, each with its own pool, claim
// batches of 1,000 keys from disjoint sets of users (1,000 users with 100 due entries each),
// all at once. This is what the index itself sustains when dispatchers do not collide.
func BenchmarkIndexClaim(b *testing.B) {
	for _, n := range []int{1, 4} {
		b.Run(fmt.Sprintf("claimers=%d", n), func(b *testing.B) {
			ctx := context.Background()
			schema, setup, users := claimFixture(b)
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
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
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

// sqlFirstCome is the plain first-come claim the fair cycle is measured against: the 1,000
// oldest due rows, whoever they belong to.
const sqlFirstCome = `
UPDATE rota_due d SET claim_token = nextval('rota_claim_token'), claim_until = $2
FROM (SELECT user_id, work_key FROM rota_due
      WHERE claim_until IS NULL AND due_at <= $1
      ORDER BY due_at LIMIT 1000 FOR UPDATE SKIP LOCKED) c
WHERE d.user_id = c.user_id AND d.work_key = c.work_key
RETURNING d.user_id`

// A full fair cycle (DueHeads + Select + Claim of 1,000) against a plain first-come claim of
// 1,000 rows, side by side on the same data: one user with a 1,000,000-row backlog and 10,000
// (the shape) or 1,000 quiet users with one entry each. Claims are released after
// every cycle, untimed, so every iteration sees the same backlog. noisy-share is the
// fraction of the batch the noisy user got. Each iteration runs one fair cycle and one
// first-come claim, back to back, so their ratio (fair/first-come) is measured under the same
// conditions even on a busy machine.
func BenchmarkFairCycleVsFirstCome(b *testing.B) {
	for _, quiet := range []int{10_000, 1_000} {
		b.Run(fmt.Sprintf("users=%d", quiet), func(b *testing.B) {
			pool := noisyFixture(b, 1_000_000, quiet)
			idx := postgres.NewIndex(pool)
			ctx := context.Background()
			if testing.Verbose() {
				b.Logf("first-come plan:\n%s", explain(b, pool, sqlFirstCome, benchNow, benchNow.Add(time.Hour)))
				releaseAll(b, pool)
			}
			d, err := dispatch.New(idx, oneLane(10, 1000))
			if err != nil {
				b.Fatal(err)
			}
			var fair, first time.Duration
			fairNoisy, firstNoisy, total := 0, 0, 0
			for i := 0; b.Loop(); i++ {
				now := benchNow.Add(time.Duration(i) * time.Second)

				start := time.Now()
				batch, err := d.Dispatch(ctx, now)
				fair += time.Since(start)
				if err != nil || len(batch.Items) != 1000 {
					b.Fatalf("Dispatch: %d items, %v", len(batch.Items), err)
				}
				for _, it := range batch.Items {
					if it.Claim.Entry.UserID == "noisy" {
						fairNoisy++
					}
				}
				releaseAll(b, pool)

				start = time.Now()
				rows, err := pool.Query(ctx, sqlFirstCome, now, now.Add(time.Hour))
				if err != nil {
					b.Fatal(err)
				}
				got, err := pgx.CollectRows(rows, pgx.RowTo[string])
				first += time.Since(start)
				if err != nil || len(got) != 1000 {
					b.Fatalf("first-come claim: %d rows, %v", len(got), err)
				}
				for _, u := range got {
					if u == "noisy" {
						firstNoisy++
					}
				}
				releaseAll(b, pool)
				total += 1000
			}
			n := float64(b.N)
			b.ReportMetric(float64(fair.Milliseconds())/n, "fair-ms")
			b.ReportMetric(float64(first.Milliseconds())/n, "first-come-ms")
			b.ReportMetric(float64(fair)/float64(first), "fair/first-come")
			b.ReportMetric(float64(fairNoisy)/float64(total), "fair-noisy-share")
			b.ReportMetric(float64(firstNoisy)/float64(total), "first-come-noisy-share")
		})
	}
}

var _ duework.Index = (*postgres.Index)(nil)
