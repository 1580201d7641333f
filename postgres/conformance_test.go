package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/duework/indextest"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// The Index keeps the whole duework.Index contract, checked by the core's conformance suite
// against the real server. The suite asks for thousands of fresh indexes, so they share one
// migrated schema and each call empties its tables (and checks the ReadyAt invariant of the
// index it replaces).
func TestIndexConformance(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	indextest.Run(t, func(t *testing.T) duework.Index {
		checkReadyAt(t, pool)
		if _, err := pool.Exec(context.Background(), `DELETE FROM rota_due; DELETE FROM rota_users`); err != nil {
			t.Fatal(err)
		}
		return postgres.NewIndex(pool)
	})
}

// checkReadyAt asserts the invariant every read of the queues relies on: each user's
// free_at is exactly the least due_at of its unclaimed entries, its claim_end_at the least
// greatest(due_at, claim_until) of its claimed ones (each NULL when there are none); turn is
// greatest(least(free_at, claim_end_at), last_served), NULL without entries; and every
// entry's user has a row.
func checkReadyAt(t testing.TB, pool interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) {
	t.Helper()
	var bad []string
	var n int
	err := pool.QueryRow(context.Background(), `
		SELECT count(*), coalesce(array_agg(format('%s: free_at %s claim_end_at %s turn %s, want free_at %s claim_end_at %s',
				coalesce(u.user_id, w.user_id), u.free_at, u.claim_end_at, u.turn, w.free_at, w.claim_end_at))
			FILTER (WHERE u.user_id IS NULL OR u.free_at IS DISTINCT FROM w.free_at OR u.claim_end_at IS DISTINCT FROM w.claim_end_at
				OR u.turn IS DISTINCT FROM CASE WHEN w.user_id IS NOT NULL THEN greatest(least(w.free_at, w.claim_end_at), u.last_served) END), '{}')
		FROM rota_users u FULL JOIN (
			SELECT user_id, min(due_at) FILTER (WHERE claim_until IS NULL) AS free_at,
				min(greatest(due_at, claim_until)) FILTER (WHERE claim_until IS NOT NULL) AS claim_end_at
			FROM rota_due GROUP BY user_id
		) w USING (user_id)`).Scan(&n, &bad)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Fatalf("rota_users' ReadyAt is not exact for %d of %d users: %v", len(bad), n, bad)
	}
}
