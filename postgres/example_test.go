package postgres_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
	"github.com/rotaworks/rota/tenancy"
)

// Example runs one turn of the queue by hand on the PostgreSQL Index: migrate, schedule a
// tenant's sources, read the front of the queue with a hold, claim, and complete the batch.
// A dispatch.Dispatcher makes these calls for you.
//
// It has no Output comment because it needs a running server (ROTA_TEST_DATABASE_URL, and
// a schema named rota), and an Example cannot skip: go test compiles it but does not run it.
// TestExampleSteps runs the same steps against the test server and checks what they print.
func Example() {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(os.Getenv("ROTA_TEST_DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = "rota" // rota's tables live in this schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := exampleSteps(ctx, pool, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func exampleSteps(ctx context.Context, pool *pgxpool.Pool, out io.Writer) error {
	if err := postgres.Migrate(ctx, pool); err != nil { // safe on every replica at start-up
		return err
	}
	idx := postgres.NewIndex(pool)

	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	alice, err := tenancy.NewContext("alice")
	if err != nil {
		return err
	}
	for _, src := range []string{"blog", "changelog"} {
		e := duework.Entry{UserID: "alice", WorkKey: src, Tier: "hot", DueAt: now}
		if err := idx.Schedule(ctx, alice, e); err != nil {
			return err
		}
	}

	// The next users of the unrouted group, held for 10 seconds from other readers.
	page, err := idx.Ready(ctx, duework.ReadyQuery{Now: now, Users: 100, PerUser: 1, Hold: 10 * time.Second})
	if err != nil {
		return err
	}
	var keys []duework.Key
	for _, h := range page.Heads {
		fmt.Fprintln(out, "ready", h.UserID, "more:", h.More)
		for _, e := range h.Due {
			keys = append(keys, e.Key())
		}
	}
	claims, err := idx.Claim(ctx, keys, now, now.Add(5*time.Minute))
	if err != nil {
		return err
	}
	var done []duework.Done
	for _, c := range claims {
		// … run the item, then hand the entry back with its next due time.
		tc, err := tenancy.NewContext(c.Entry.UserID)
		if err != nil {
			return err
		}
		next := c.Entry
		next.LastRunAt, next.DueAt = now, now.Add(time.Hour)
		done = append(done, duework.Done{Tenant: tc, Claim: c, Next: next})
		fmt.Fprintln(out, "ran", c.Entry.UserID, c.Entry.WorkKey)
	}
	errs, err := idx.CompleteMany(ctx, done)
	if err != nil {
		return err
	}
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("completing %s: %w", done[i].Claim.Entry.WorkKey, err)
		}
	}
	return nil
}

// TestExampleSteps runs Example's steps on a schema of its own.
func TestExampleSteps(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := exampleSteps(context.Background(), pgtest.PoolIn(t, pgtest.Schema(t, "rota_test"), 2), &out); err != nil {
		t.Fatal(err)
	}
	want := "ready alice more: true\nran alice blog\n"
	if out.String() != want {
		t.Fatalf("Example printed\n%s\nwant\n%s", out.String(), want)
	}
}
