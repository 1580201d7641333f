package postgres

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The dispatch statements, for the plan-shape test and the benchmarks' EXPLAIN.
const (
	SQLReady           = sqlReady
	SQLPeek            = sqlPeek
	SQLClaim           = sqlClaim
	SQLClaimEntries    = sqlClaimEntries
	SQLServe           = sqlServe
	SQLCompleteMany    = sqlCompleteMany
	SQLGroups          = sqlGroups
	SQLRecompute       = sqlRecompute
	SQLRecomputeLocked = sqlRecomputeLocked
	// SQLPlanSettings is what the Index runs before each of them, in the same transaction.
	SQLPlanSettings = sqlPlanSettings
)

// MigrateTo applies the schema's steps up to version, as an older release left it.
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, version int) error {
	var steps []migration
	for _, m := range migrations {
		if m.version <= version {
			steps = append(steps, m)
		}
	}
	return interpret(ctx, "Migrate", migrate(ctx, pool, steps))
}

// Interpret is the one error translation of the Index.
func Interpret(ctx context.Context, op string, err error) error { return interpret(ctx, op, err) }
