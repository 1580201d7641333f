package postgres

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The Index's statements, for the plan-shape test and the benchmarks' EXPLAIN.
var (
	SQLReady           = sqlReady
	SQLPeek            = sqlPeek
	SQLClaimLock       = sqlClaimLock
	SQLClaim           = sqlClaim
	SQLServe           = sqlServe
	SQLCompleteMany    = sqlCompleteMany
	SQLUnclaim         = sqlUnclaim
	SQLStartClaims     = sqlStartClaims
	SQLPause           = sqlPause
	SQLResume          = sqlResume
	SQLPaused          = sqlPaused
	SQLGroups          = sqlGroups
	SQLRecompute       = sqlRecompute
	SQLRecomputeLocked = sqlRecomputeLocked
	SQLLockUsers       = sqlLockUsers
	SQLRoute           = sqlRoute
	SQLUser            = sqlUser
	SQLEntries         = sqlEntries
	SQLTenants         = sqlTenants
	SQLGetMany         = sqlGetMany
	// SQLPlanSettings is what the Index runs before each of them, in the same transaction;
	// SQLCountSettings before Ready, Claim and User, which count claims in flight.
	SQLPlanSettings  = sqlPlanSettings
	SQLCountSettings = sqlPlanSettings + sqlSortOff
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

// ListenDueHook is Index.ListenDue, calling listening with the backend's pid each time it
// starts to listen.
func ListenDueHook(x *Index, ctx context.Context, wake func(), listening func(pid uint32)) error {
	return x.listenDue(ctx, wake, listening)
}
