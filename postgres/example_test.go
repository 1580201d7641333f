package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
	"github.com/rotaworks/rota/tenancy"
)

// Example wires the PostgreSQL Index into a Dispatcher: migrate, schedule a tenant's
// sources, dispatch them, complete the batch.
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

	d, err := dispatch.New(idx, dispatch.Config{
		Lanes:            []dispatch.LaneCapacity{{Lane: "free", PerUserLimit: 1, PerCycleLimit: 100}},
		GlobalBatchLimit: 100,
		LaneFor:          func(context.Context, string) (dispatch.Lane, error) { return "free", nil },
		ClaimFor:         5 * time.Minute,
	})
	if err != nil {
		return err
	}
	batch, err := d.Dispatch(ctx, now) // routes alice to "free", then serves her
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "shed:", batch.ShedUserIDs)
	var done []duework.Done
	for _, it := range batch.Items {
		// … run the item, then hand the entry back with its next due time.
		tc, err := tenancy.NewContext(it.Claim.Entry.UserID)
		if err != nil {
			return err
		}
		next := it.Claim.Entry
		next.LastRunAt, next.DueAt = now, now.Add(time.Hour)
		done = append(done, duework.Done{Tenant: tc, Claim: it.Claim, Next: next})
		fmt.Fprintln(out, "ran", it.Claim.Entry.UserID, it.Claim.Entry.WorkKey)
	}
	errs, err := idx.CompleteMany(ctx, done) // one round trip for the whole batch
	if err != nil {
		return err
	}
	return errors.Join(errs...)
}

// TestExampleSteps runs Example's steps on a schema of its own.
func TestExampleSteps(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := exampleSteps(context.Background(), pgtest.PoolIn(t, pgtest.Schema(t, "rota_test"), 2), &out); err != nil {
		t.Fatal(err)
	}
	want := "shed: [alice]\nran alice blog\n"
	if out.String() != want {
		t.Fatalf("Example printed\n%s\nwant\n%s", out.String(), want)
	}
}
