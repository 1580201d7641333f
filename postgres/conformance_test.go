package postgres_test

import (
	"context"
	"testing"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/duework/indextest"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// The Index keeps the whole duework.Index contract, checked by the core's conformance suite
// against the real server. The suite asks for thousands of fresh indexes, so they share one
// migrated schema and each call empties its tables (and checks the summary invariant of the
// index it replaces).
func TestIndexConformance(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	indextest.Run(t, func(t *testing.T) duework.Index {
		checkSummary(t, pool)
		if _, err := pool.Exec(context.Background(), `DELETE FROM rota_due; DELETE FROM rota_users`); err != nil {
			t.Fatal(err)
		}
		return postgres.NewIndex(pool)
	})
}
