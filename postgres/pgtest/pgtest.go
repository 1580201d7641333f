package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/tenancy"
)

// DefaultURL is the server the tests use when ROTA_TEST_DATABASE_URL is not set: the local
// server CI provides, trust auth, database test.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL returns the test server's address: ROTA_TEST_DATABASE_URL, or DefaultURL.
func URL() string {
	if u := os.Getenv("ROTA_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

var (
	reachOnce sync.Once
	reachErr  error
)

// RequireServer skips tb when no server answers at URL, with a message saying how to run
// the test — except under CI (CI=true), where a missing server fails tb. The server is tried
// once per process.
func RequireServer(tb testing.TB) {
	tb.Helper()
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, URL())
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
		tb.Fatalf("pgtest: no PostgreSQL at %s: %v (CI=true: the tests must run)", URL(), reachErr)
	}
	tb.Skipf("pgtest: no PostgreSQL at %s (%v); to run these tests start PostgreSQL there (trust auth, database test) or set ROTA_TEST_DATABASE_URL=postgres://user@host:port/db?sslmode=disable", URL(), reachErr)
}

// exec runs one statement on a connection of its own.
func exec(sql string) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, URL())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// Schema creates an empty schema named prefix_<random hex> for tb and returns its name; it
// is dropped, with everything in it, when tb ends. prefix must be a plain SQL identifier.
// Schema calls RequireServer first.
func Schema(tb testing.TB, prefix string) string {
	tb.Helper()
	RequireServer(tb)
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		tb.Fatal(err)
	}
	schema := prefix + "_" + hex.EncodeToString(r[:])
	if err := exec("CREATE SCHEMA " + schema); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			tb.Errorf("pgtest: dropping schema %s: %v", schema, err)
		}
	})
	return schema
}

// PoolIn opens a pool whose search_path is schema, closed when tb ends. maxConns 0 keeps
// pgx's default size.
func PoolIn(tb testing.TB, schema string, maxConns int32) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(URL())
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

// Pool returns a pool of pgx's default size on a fresh schema of tb's own (rota_test_…),
// migrated with postgres.Migrate, closed and dropped when tb ends.
func Pool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	pool := PoolIn(tb, Schema(tb, "rota_test"), 0)
	if err := postgres.Migrate(context.Background(), pool); err != nil {
		tb.Fatal(err)
	}
	return pool
}

// LoadDue bulk-loads due entries into the migrated schema of pool with COPY, and the
// per-user summary the Index keeps: users[i] gets counts[i] entries (at least one), keys
// w0000000, w0000001, …, tier "hot", the j-th due at due(i) + j µs. New users are in the
// unrouted group ""; users that already have a row keep it (group, LastServed, hold), with
// their ReadyAt recomputed over all their entries. LoadDue runs
// VACUUM ANALYZE on both tables and reads the first and the last user's last entry back
// through the Index: a schema change fails here instead of skewing a figure.
func LoadDue(tb testing.TB, pool *pgxpool.Pool, users []string, counts []int, due func(i int) time.Time) {
	tb.Helper()
	ctx := context.Background()
	total, i, j := 0, 0, 0
	for _, n := range counts {
		total += n
	}
	src := pgx.CopyFromFunc(func() ([]any, error) {
		for i < len(users) && j >= counts[i] {
			i, j = i+1, 0
		}
		if i == len(users) {
			return nil, nil
		}
		row := []any{users[i], workKey(j), "hot", due(i).Add(time.Duration(j) * time.Microsecond), int64(0)}
		j++
		return row, nil
	})
	n, err := pool.CopyFrom(ctx, pgx.Identifier{"rota_due"}, []string{"user_id", "work_key", "tier", "due_at", "miss_streak"}, src)
	if err != nil || int(n) != total {
		tb.Fatalf("pgtest: COPY into rota_due: %d rows of %d: %v", n, total, err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO rota_users AS u (user_id, free_at, claim_end_at, turn)
		SELECT user_id, min(due_at) FILTER (WHERE claim_until IS NULL), min(greatest(due_at, claim_until)) FILTER (WHERE claim_until IS NOT NULL),
			min(greatest(due_at, claim_until))
		FROM rota_due GROUP BY user_id
		ON CONFLICT (user_id) DO UPDATE SET free_at = EXCLUDED.free_at, claim_end_at = EXCLUDED.claim_end_at,
			turn = greatest(EXCLUDED.turn, u.last_served)`); err != nil {
		tb.Fatal(err)
	}
	for _, table := range []string{"rota_due", "rota_users"} {
		if _, err := pool.Exec(ctx, "VACUUM ANALYZE "+table); err != nil {
			tb.Fatal(err)
		}
	}
	idx := postgres.NewIndex(pool)
	for _, i := range []int{0, len(users) - 1} {
		if len(users) == 0 {
			break
		}
		tc, err := tenancy.NewContext(users[i])
		if err != nil {
			tb.Fatal(err)
		}
		last := counts[i] - 1
		e, err := idx.Get(ctx, tc, workKey(last))
		if err != nil || !e.DueAt.Equal(due(i).Add(time.Duration(last)*time.Microsecond)) {
			tb.Fatalf("pgtest: loaded entries do not read back through the Index (schema changed?): %+v, %v", e, err)
		}
	}
}

// workKey is the key LoadDue gives a user's j-th entry.
func workKey(j int) string { return fmt.Sprintf("w%07d", j) }
