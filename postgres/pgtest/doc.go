// Package pgtest is the test support of rota's PostgreSQL adapter: a connection to a test
// server, a schema of one's own per test, and the bulk loader that builds big due-work
// fixtures. The postgres module's tests and the bench module's benchmarks both use it; it
// is test support only, never imported by production code.
//
// # The server
//
// Tests read the server's address from ROTA_TEST_DATABASE_URL, or use DefaultURL (a local
// server with trust auth and a database named test, as CI provides):
//
//	docker run -d -p 5432:5432 -e POSTGRES_HOST_AUTH_METHOD=trust -e POSTGRES_DB=test postgres:17
//
// Without a reachable server every helper skips the test, saying how to run it — except
// under CI (CI=true), where a missing server fails the test instead of silently skipping it.
//
// # Schemas and pools
//
// Pool returns a pool on a fresh schema, migrated with postgres.Migrate and dropped with
// everything in it when the test ends, so tests run in parallel on one database without
// sharing a table. Schema and PoolIn are its two halves, for a test that needs several pools
// on one schema (several dispatchers, a fleet of daemons) or a schema that is not migrated.
//
//	func TestSomething(t *testing.T) {
//		pool := pgtest.Pool(t)
//		idx := postgres.NewIndex(pool)
//		...
//	}
//
// # Big fixtures
//
// LoadDue bulk-loads due entries with COPY and builds the per-user summary the Index keeps:
// through the Index API a million entries would take minutes. It then analyzes the tables,
// as a long-running server's autovacuum would have, and reads entries back through the
// Index, so that a schema change fails the loader instead of skewing a benchmark.
package pgtest
