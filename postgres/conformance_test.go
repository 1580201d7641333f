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
// ready_at is exactly the least, over its entries, of due_at (unclaimed) or
// greatest(due_at, claim_until) (claimed), NULL when it has none; turn is
// greatest(ready_at, last_served); and every entry's user has a row.
func checkReadyAt(t testing.TB, pool interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) {
	t.Helper()
	var bad []string
	var n int
	err := pool.QueryRow(context.Background(), `
		SELECT count(*), coalesce(array_agg(format('%s: ready_at %s turn %s, want ready_at %s', coalesce(u.user_id, w.user_id), u.ready_at, u.turn, w.ready_at))
			FILTER (WHERE u.user_id IS NULL OR u.ready_at IS DISTINCT FROM w.ready_at
				OR u.turn IS DISTINCT FROM CASE WHEN w.ready_at IS NOT NULL THEN greatest(w.ready_at, u.last_served) END), '{}')
		FROM rota_users u FULL JOIN (
			SELECT user_id, min(greatest(due_at, claim_until)) AS ready_at FROM rota_due GROUP BY user_id
		) w USING (user_id)`).Scan(&n, &bad)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Fatalf("rota_users.ready_at is not exact for %d of %d users: %v", len(bad), n, bad)
	}
}
