package rotanats_test

import (
	"context"
	"testing"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/fleettest"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
	"github.com/rotaworks/rota/tenancy"
)

// backend is what the processes of one test share: a PostgreSQL schema of the test's own.
type backend struct {
	schema string
}

// newBackend returns a fresh migrated schema and the index, watchlist and plans of the
// test's own pool on it. It skips tb without a server, except under CI.
func newBackend(tb testing.TB) (*backend, duework.Index, tenancy.Watchlist, fleettest.Plans) {
	tb.Helper()
	be := &backend{schema: pgtest.Schema(tb, "rota_nats")}
	pool := pgtest.PoolIn(tb, be.schema, 8)
	if err := postgres.Migrate(context.Background(), pool); err != nil {
		tb.Fatal(err)
	}
	return be, postgres.NewIndex(pool), postgres.NewWatchlist(pool), postgres.NewEntitlements(pool)
}

// process returns the index and the watchlist as one more process reaches them: on a
// pool of its own.
func (be *backend) process(tb testing.TB) (duework.Index, tenancy.Watchlist) {
	tb.Helper()
	pool := pgtest.PoolIn(tb, be.schema, 4)
	return postgres.NewIndex(pool), postgres.NewWatchlist(pool)
}
