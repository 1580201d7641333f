package postgres_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// appliedVersions returns the steps the pool's schema records.
func appliedVersions(t *testing.T, pool *pgxpool.Pool) []int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT version FROM rota_schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// tableExists reports whether the pool's current schema holds the table.
func tableExists(t *testing.T, pool *pgxpool.Pool, table string) bool {
	t.Helper()
	var ok bool
	err := pool.QueryRow(context.Background(),
		`SELECT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = $1)`, table).Scan(&ok)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// Steps are numbered with gaps (a number may be kept for a step another release adds), and
// a step numbered below the ones a schema already holds is still applied when it arrives:
// Migrate applies every step the schema has not recorded, not only those above its highest.
func TestMigrateAppliesEveryMissingStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.PoolIn(t, pgtest.Schema(t, "rota_test"), 2)
	if err := postgres.MigrateProbes(ctx, pool, 10, 20, 40); err != nil {
		t.Fatalf("steps 10, 20, 40: %v", err)
	}
	if got := appliedVersions(t, pool); !slices.Equal(got, []int{10, 20, 40}) {
		t.Fatalf("after steps 10, 20, 40 the schema records %v", got)
	}
	if err := postgres.MigrateProbes(ctx, pool, 10, 20, 30, 40); err != nil {
		t.Fatalf("step 30 added below 40: %v", err)
	}
	if got := appliedVersions(t, pool); !slices.Equal(got, []int{10, 20, 30, 40}) || !tableExists(t, pool, "rota_probe_30") {
		t.Fatalf("after step 30 arrived the schema records %v (probe table: %v); want 30 applied", got, tableExists(t, pool, "rota_probe_30"))
	}
	// A release that lacks a step the schema holds refuses it, wherever the step sits.
	if err := postgres.MigrateProbes(ctx, pool, 10, 20, 40); !errors.Is(err, postgres.ErrSchemaTooNew) {
		t.Fatalf("steps 10, 20, 40 over a schema holding 30 = %v, want ErrSchemaTooNew", err)
	}
	if err := postgres.Migrate(ctx, pool); !errors.Is(err, postgres.ErrSchemaTooNew) {
		t.Fatalf("Migrate over a schema holding steps it does not know = %v, want ErrSchemaTooNew", err)
	}
}

// Migrate creates the watch-list and plan tables, and adds them to a schema an older
// release left without them, keeping its data.
func TestMigrateAddsWatchlistAndPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	for _, table := range []string{"rota_watchlist", "rota_plans"} {
		if !tableExists(t, pool, table) {
			t.Fatalf("Migrate did not create %s", table)
		}
	}
	idx := postgres.NewIndex(pool)
	schedule(t, idx, "u", "k", t0)
	if _, err := pool.Exec(ctx, `DROP TABLE rota_watchlist, rota_plans;
		DELETE FROM rota_schema_migrations WHERE version = 4`); err != nil {
		t.Fatal(err)
	}
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate of a schema without the watch list: %v", err)
	}
	if got := appliedVersions(t, pool); !slices.Contains(got, 4) {
		t.Fatalf("the schema records %v, want step 4", got)
	}
	tc := mustTC(t, "u")
	if err := postgres.NewEntitlements(pool).SetPlan(ctx, tc, "pro"); err != nil {
		t.Fatalf("after the upgrade SetPlan: %v", err)
	}
	if _, err := idx.Get(ctx, tc, "k"); err != nil {
		t.Fatalf("after the upgrade the due entry is gone: %v", err)
	}
}
