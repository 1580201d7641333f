package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// groupsBlocks returns the buffers Groups reads at benchNow: one index probe per group,
// plus every page of dead queue entries in front of the group's first live user.
func groupsBlocks(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var out []byte
	if err := pool.QueryRow(context.Background(), `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+postgres.SQLGroups, benchNow).Scan(&out); err != nil {
		t.Fatal(err)
	}
	var plans []struct {
		Plan struct {
			Hit  int `json:"Shared Hit Blocks"`
			Read int `json:"Shared Read Blocks"`
		}
	}
	if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("EXPLAIN of Groups: %v: %s", err, out)
	}
	return plans[0].Plan.Hit + plans[0].Plan.Read
}

// The queue vacuum task is an off-lease maintenance task that a Scheduler dispatches and
// that removes the dead entries 100,000 serves left at the front of the queue: Groups,
// which stepped over their pages, reads a handful of buffers afterwards.
//
// A vacuum removes only rows no transaction of the cluster may still see, so the test
// does not run in parallel with the package's others, and runs the task again (as its
// cadence would) while another backend's snapshot holds the rows back, for up to 20 s.
func TestQueueVacuumTaskClearsTheQueueFront(t *testing.T) {
	ctx := context.Background()
	pool := servedFixture(t, 10_000, 100_000)
	task := postgres.NewIndex(pool).QueueVacuumTask(10 * time.Second)
	if task.Name != postgres.QueueVacuumTaskName || task.Class != maintenance.OffLease || task.Cadence != 10*time.Second {
		t.Fatalf("task %q class %v cadence %v; want %q, OffLease, 10s", task.Name, task.Class, task.Cadence, postgres.QueueVacuumTaskName)
	}
	s, err := maintenance.NewScheduler([]maintenance.Task{task}, maintenance.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("NewScheduler: %v", err)
	}
	res, err := s.Poll(ctx, benchNow)
	if err != nil || res.Winner == nil || res.Winner.Task.Name != task.Name {
		t.Fatalf("Poll: winner %+v, %v; want the vacuum task dispatched", res.Winner, err)
	}

	groupsBlocks(t, pool) // the first read marks the entries dead; later ones skip them
	before := groupsBlocks(t, pool)
	if before < 100 {
		t.Fatalf("behind 100,000 serves Groups reads %d buffers; the fixture left no dead queue front", before)
	}
	runErr := res.Winner.Task.Run(ctx)
	if err := s.Complete(ctx, task.Name, runErr, benchNow.Add(time.Second)); err != nil || runErr != nil {
		t.Fatalf("Run: %v; Complete: %v", runErr, err)
	}
	after := groupsBlocks(t, pool)
	for deadline := time.Now().Add(20 * time.Second); after > 10 && time.Now().Before(deadline); after = groupsBlocks(t, pool) {
		time.Sleep(200 * time.Millisecond)
		if err := task.Run(ctx); err != nil {
			t.Fatalf("Run again: %v", err)
		}
	}
	if after > 10 {
		t.Errorf("after the vacuum task Groups reads %d buffers (%d before); want a few", after, before)
	}
}

// Run reports a schema Migrate never prepared as ErrNotMigrated, and an ended context as
// the context's error.
func TestQueueVacuumTaskErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bare := pgtest.PoolIn(t, pgtest.Schema(t, "rota_test"), 2)
	if err := postgres.NewIndex(bare).QueueVacuumTask(time.Minute).Run(ctx); !errors.Is(err, postgres.ErrNotMigrated) {
		t.Errorf("Run on an unmigrated schema: %v; want ErrNotMigrated", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := postgres.NewIndex(pgtest.Pool(t)).QueueVacuumTask(time.Minute).Run(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a cancelled context: %v; want context.Canceled", err)
	}
}

// A role that may not vacuum rota_users would have its VACUUM skip the table with a
// warning and succeed: Run fails instead, saying why.
func TestQueueVacuumTaskRefusesARoleThatMayNotVacuum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	owner := pgtest.Pool(t)
	var schema string
	if err := owner.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	role := pgx.Identifier{schema + "_reader"}.Sanitize()
	if _, err := owner.Exec(ctx, `CREATE ROLE `+role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := owner.Exec(context.Background(), `DROP OWNED BY `+role+`; DROP ROLE `+role); err != nil {
			t.Error(err)
		}
	})
	if _, err := owner.Exec(ctx, `GRANT USAGE ON SCHEMA `+pgx.Identifier{schema}.Sanitize()+` TO `+role); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.ConnConfig.RuntimeParams["role"] = schema + "_reader"
	reader, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	err = postgres.NewIndex(reader).QueueVacuumTask(time.Minute).Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "may not vacuum rota_users") {
		t.Errorf("Run as a role that does not own rota_users: %v; want it refused", err)
	}
}

// ExampleIndex_QueueVacuumTask registers the queue vacuum with a fleet's maintenance
// scheduler, beside the host's own tasks: every replica may register it.
//
// It has no Output comment because it needs a running server (DATABASE_URL), and an
// Example cannot skip: go test compiles it but does not run it.
// TestQueueVacuumTaskClearsTheQueueFront runs the task through a Scheduler.
func ExampleIndex_QueueVacuumTask() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	pool, err := postgres.Open(ctx, os.Getenv("DATABASE_URL"), "rota")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	const maxHold = time.Hour
	tasks := []maintenance.Task{
		postgres.NewIndex(pool).QueueVacuumTask(10 * time.Second),
		// ... the host's own tasks
	}
	s, err := maintenance.NewScheduler(tasks, maintenance.Config{
		Lease:      postgres.NewLease(pool, "heavy", maxHold),
		StateStore: postgres.NewStateStore(pool),
		MaxHold:    maxHold,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
