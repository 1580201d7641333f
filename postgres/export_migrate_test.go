package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// MigrateProbes runs Migrate's procedure over made-up steps, one per version, each creating
// the table rota_probe_<version>: the tests of how Migrate copes with a step added between
// steps a schema already holds use it.
func MigrateProbes(ctx context.Context, pool *pgxpool.Pool, versions ...int) error {
	steps := make([]migration, len(versions))
	for i, v := range versions {
		steps[i] = migration{v, fmt.Sprintf("probe %d", v), fmt.Sprintf("CREATE TABLE rota_probe_%d (x int)", v)}
	}
	return interpret(ctx, "Migrate", migrate(ctx, pool, steps))
}
