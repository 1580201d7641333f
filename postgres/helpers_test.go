package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/postgres"
)

// defaultTestURL is the local server CI provides: database test, trust auth.
const defaultTestURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// testURL is the server the tests use: ROTA_TEST_DATABASE_URL, or the local default.
func testURL() string {
	if u := os.Getenv("ROTA_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return defaultTestURL
}

var (
	reachOnce sync.Once
	reachErr  error
)

// requireServer skips tb when no server answers at testURL — except under CI (CI=true),
// where a missing server is a failure, never a silent skip.
func requireServer(tb testing.TB) {
	tb.Helper()
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, testURL())
		if err != nil {
			reachErr = err
			return
		}
		reachErr = conn.Ping(ctx)
		conn.Close(ctx)
	})
	if reachErr == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("postgres: no server at %s: %v (CI=true: the tests must run)", testURL(), reachErr)
	}
	tb.Skipf("postgres: no server at %s (%v); to run these tests start PostgreSQL there (trust auth, database test) or set ROTA_TEST_DATABASE_URL=postgres://user@host:port/db?sslmode=disable", testURL(), reachErr)
}

// newSchema creates a fresh schema for tb, dropped at cleanup, and returns its name.
func newSchema(tb testing.TB) string {
	tb.Helper()
	requireServer(tb)
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	schema := "rota_test_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testURL())
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		conn, err := pgx.Connect(ctx, testURL())
		if err != nil {
			tb.Errorf("dropping schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			tb.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return schema
}

// newPoolIn opens a pool whose search_path is schema, closed at cleanup. maxConns 0 is pgx's
// default.
func newPoolIn(tb testing.TB, schema string, maxConns int32) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(testURL())
	if err != nil {
		tb.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// newMigratedPool returns a pool on a fresh, migrated schema of its own.
func newMigratedPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	pool := newPoolIn(tb, newSchema(tb), 0)
	if err := postgres.Migrate(context.Background(), pool); err != nil {
		tb.Fatal(err)
	}
	return pool
}
