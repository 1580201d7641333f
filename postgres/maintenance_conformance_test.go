package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/maintenance/maintenancetest"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// The Lease keeps the maintenance.Lease contract against the real server: one migrated
// schema, a fresh lease name per subtest.
func TestLeaseConformance(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	var n atomic.Int64
	maintenancetest.RunLease(t, func(t *testing.T, maxHold time.Duration) maintenance.Lease {
		return postgres.NewLease(pool, fmt.Sprintf("lease-%d", n.Add(1)), maxHold)
	})
}

// The StateStore keeps the maintenance.StateStore contract against the real server, fenced
// by a Lease of the same schema: one migrated schema, emptied for each subtest.
func TestStateStoreConformance(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	maintenancetest.RunStateStore(t, func(t *testing.T) (maintenance.StateStore, maintenance.Lease) {
		if _, err := pool.Exec(context.Background(), `DELETE FROM rota_task_state; DELETE FROM rota_task_fence; DELETE FROM rota_leases`); err != nil {
			t.Fatal(err)
		}
		return postgres.NewStateStore(pool), postgres.NewLease(pool, "heavy", time.Hour)
	})
}

// Schedulers on separate pools — separate connections, as on separate machines — that poll
// at the same instant, round after round, start each task exactly once per round, and
// never a task while one it depends on runs: stats, once started, runs on (its daemon
// renews it), so prune, which depends on it, never starts. The other runs are completed
// before the next round, whose instant is past every cadence.
func TestStateStoreClaimsAcrossPools(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.Schema(t, "rota_test")
	if err := postgres.Migrate(ctx, pgtest.PoolIn(t, schema, 1)); err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context) error { return nil }
	tasks := []maintenance.Task{
		{Name: "vacuum", Class: maintenance.Heavy, Cadence: 30 * time.Second, Run: noop},
		{Name: "stats", Class: maintenance.OffLease, Cadence: 30 * time.Second, Run: noop},
		{Name: "prune", Class: maintenance.OffLease, Cadence: 30 * time.Second, DependsOn: []string{"stats"}, Run: noop},
		{Name: "cache", Class: maintenance.OffLease, Cadence: 30 * time.Second, Run: noop},
	}
	const replicas, rounds = 6, 6
	scheds := make([]*maintenance.Scheduler, replicas)
	for i := range scheds {
		pool := pgtest.PoolIn(t, schema, 2)
		s, err := maintenance.NewScheduler(tasks, maintenance.Config{
			Lease: postgres.NewLease(pool, "heavy", time.Hour), StateStore: postgres.NewStateStore(pool),
			Holder: fmt.Sprintf("daemon-%d", i), MaxHold: time.Hour, LeaseTTL: 10 * time.Minute,
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		scheds[i] = s
	}
	statsOn := -1
	for round := range rounds {
		now := t0.Add(time.Duration(round) * time.Minute)
		if statsOn >= 0 {
			if err := scheds[statsOn].Renew(ctx, now); err != nil {
				t.Fatalf("round %d: daemon-%d renews stats: %v", round, statsOn, err)
			}
		}
		results := make([]maintenance.PollResult, replicas)
		errs := make([]error, replicas)
		var wg sync.WaitGroup
		for i, s := range scheds {
			wg.Go(func() { results[i], errs[i] = s.Poll(ctx, now) })
		}
		wg.Wait()
		started := map[string][]int{}
		for i, res := range results {
			if errs[i] != nil {
				t.Fatalf("round %d: daemon-%d's poll failed: %v", round, i, errs[i])
			}
			for _, c := range res.Dispatched() {
				started[c.Task.Name] = append(started[c.Task.Name], i)
			}
		}
		want := map[string]int{"vacuum": 1, "cache": 1, "stats": 0, "prune": 0}
		if round == 0 {
			want["stats"] = 1
		}
		for task, n := range want {
			if len(started[task]) != n {
				t.Fatalf("round %d: %s started on %v; want %d daemon(s) (all started: %v)", round, task, started[task], n, started)
			}
		}
		if round == 0 {
			statsOn = started["stats"][0]
		}
		for _, task := range []string{"vacuum", "cache"} {
			if err := scheds[started[task][0]].Complete(ctx, task, nil, now.Add(time.Second)); err != nil {
				t.Fatalf("round %d: complete %s: %v", round, task, err)
			}
		}
	}
}

// An Update on a schema that Migrate has not prepared is ErrNotMigrated, and calls no
// UpdateFunc.
func TestStateStoreUpdateNotMigrated(t *testing.T) {
	t.Parallel()
	pool := pgtest.PoolIn(t, pgtest.Schema(t, "rota_test"), 1)
	called := false
	err := postgres.NewStateStore(pool).Update(context.Background(), []string{"vacuum"},
		func(uint64, []maintenance.TaskState) ([]maintenance.TaskState, uint64, error) {
			called = true
			return nil, 0, nil
		})
	if !errors.Is(err, postgres.ErrNotMigrated) || called {
		t.Fatalf("Update on an empty schema = %v (UpdateFunc called: %v), want ErrNotMigrated", err, called)
	}
}
