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
)

// loadDue bulk-loads entries straight into a migrated schema with COPY and builds the
// per-user summary the way the Index keeps it — the fast path for big fixtures; the Index
// API would take minutes for a million rows. users[i] gets counts[i] entries, all due at
// due + j microseconds.
func loadDue(tb testing.TB, pool *pgxpool.Pool, users []string, counts []int, due time.Time) {
	tb.Helper()
	ctx := context.Background()
	total := 0
	for _, n := range counts {
		total += n
	}
	i, j := 0, 0
	src := pgx.CopyFromFunc(func() ([]any, error) {
		for i < len(users) && j >= counts[i] {
			i, j = i+1, 0
		}
		if i == len(users) {
			return nil, nil
		}
		row := []any{users[i], fmt.Sprintf("w%07d", j), "hot", due.Add(time.Duration(j) * time.Microsecond), int64(0)}
		j++
		return row, nil
	})
	n, err := pool.CopyFrom(ctx, pgx.Identifier{"rota_due"}, []string{"user_id", "work_key", "tier", "due_at", "miss_streak"}, src)
	if err != nil || int(n) != total {
		tb.Fatalf("COPY: %d rows of %d, %v", n, total, err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO rota_users (user_id, free_at) SELECT user_id, min(due_at) FROM rota_due GROUP BY user_id
		ON CONFLICT (user_id) DO UPDATE SET free_at = EXCLUDED.free_at`); err != nil {
		tb.Fatal(err)
	}
	for _, table := range []string{"rota_due", "rota_users"} {
		if _, err := pool.Exec(ctx, "VACUUM ANALYZE "+table); err != nil {
			tb.Fatal(err)
		}
	}
}

// noisyFixture is the noisy-neighbour shape: one user ("noisy") with backlog due entries
// and 10,000 users with one each.
func noisyFixture(tb testing.TB, backlog int) *pgxpool.Pool {
	tb.Helper()
	pool := newMigratedPool(tb)
	users := []string{"noisy"}
	counts := []int{backlog}
	for i := range 10_000 {
		users = append(users, fmt.Sprintf("user%05d", i))
		counts = append(counts, 1)
	}
	loadDue(tb, pool, users, counts, t0)
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

func BenchmarkDueHeadsNoisy(b *testing.B) {
	for _, backlog := range []int{1_000, 1_000_000} {
		b.Run(fmt.Sprintf("backlog=%d", backlog), func(b *testing.B) {
			pool := noisyFixture(b, backlog)
			idx := postgres.NewIndex(pool)
			if testing.Verbose() {
				b.Logf("plan:\n%s", explain(b, pool, postgres.SQLDueHeads, benchNow, 11))
			}
			b.ResetTimer()
			for b.Loop() {
				heads, err := idx.DueHeads(context.Background(), benchNow, 10)
				if err != nil || len(heads) != 10_001 {
					b.Fatalf("DueHeads: %d heads, %v", len(heads), err)
				}
			}
		})
	}
}

var _ = sync.Mutex{}
var _ = dispatch.New
var _ duework.Index
