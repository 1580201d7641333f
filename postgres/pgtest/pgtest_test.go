package pgtest_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// schemaExists reports whether a schema of that name exists on the server.
func schemaExists(t *testing.T, schema string) bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// Pool's schema is the test's own, migrated, and gone once the test ends.
func TestPoolIsMigratedAndDroppedAtCleanup(t *testing.T) {
	pgtest.RequireServer(t)
	var schema string
	t.Run("inner", func(t *testing.T) {
		pool := pgtest.Pool(t)
		ctx := context.Background()
		if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM rota_schema_migrations`).Scan(&n); err != nil || n == 0 {
			t.Fatalf("schema %s not migrated: %d steps, %v", schema, n, err)
		}
		if !schemaExists(t, schema) {
			t.Fatalf("schema %s does not exist during the test", schema)
		}
	})
	if schema == "" || schemaExists(t, schema) {
		t.Fatalf("schema %q still exists after the test", schema)
	}
}

// Two pools on one schema see the same tables; schemas of different tests never meet.
func TestPoolInSharesOneSchema(t *testing.T) {
	t.Parallel()
	schema := pgtest.Schema(t, "pgtest")
	a, b := pgtest.PoolIn(t, schema, 1), pgtest.PoolIn(t, schema, 1)
	ctx := context.Background()
	if _, err := a.Exec(ctx, `CREATE TABLE shared (x int); INSERT INTO shared VALUES (7)`); err != nil {
		t.Fatal(err)
	}
	var x int
	if err := b.QueryRow(ctx, `SELECT x FROM shared`).Scan(&x); err != nil || x != 7 {
		t.Fatalf("second pool reads %d, %v; want 7", x, err)
	}
	if err := pgtest.Pool(t).QueryRow(ctx, `SELECT x FROM shared`).Scan(&x); err == nil {
		t.Fatal("another test's schema sees the table")
	}
}

// LoadDue's entries are what the Index reads: keys, due times, and the users' ReadyAt, in
// the unrouted group.
func TestLoadDue(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	pgtest.LoadDue(t, pool, []string{"a", "b"}, []int{3, 1}, func(i int) time.Time { return t0.Add(time.Duration(i) * time.Hour) })
	page, err := postgres.NewIndex(pool).Ready(context.Background(), duework.ReadyQuery{Now: t0.Add(2 * time.Hour), Users: 10, PerUser: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range page.Heads {
		got = append(got, fmt.Sprintf("%s@%v", h.UserID, h.Turn.Sub(t0)))
		for _, e := range h.Due {
			got = append(got, fmt.Sprintf("%s/%s@%v", e.UserID, e.WorkKey, e.DueAt.Sub(t0)))
		}
	}
	want := fmt.Sprint([]string{"a@0s", "a/w0000000@0s", "a/w0000001@1µs", "a/w0000002@2µs", "b@1h0m0s", "b/w0000000@1h0m0s"})
	if fmt.Sprint(got) != want {
		t.Fatalf("Ready after LoadDue = %v, want %v", got, want)
	}
}

// URL is ROTA_TEST_DATABASE_URL when it is set, DefaultURL otherwise.
func ExampleURL() {
	old, had := os.LookupEnv("ROTA_TEST_DATABASE_URL")
	os.Setenv("ROTA_TEST_DATABASE_URL", "postgres://rota@db.internal:5432/ci?sslmode=disable")
	fmt.Println(pgtest.URL())
	os.Unsetenv("ROTA_TEST_DATABASE_URL")
	fmt.Println(pgtest.URL())
	if had {
		os.Setenv("ROTA_TEST_DATABASE_URL", old)
	}
	// Output:
	// postgres://rota@db.internal:5432/ci?sslmode=disable
	// postgres://postgres@127.0.0.1:5432/test?sslmode=disable
}
