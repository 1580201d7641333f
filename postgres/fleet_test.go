package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// Two maintenance daemons, each with its own pool, share one lease and one state store on
// the server: while one runs a heavy task the other starts no heavy task; once it
// completes, the other takes the lease for the next one with a greater token; and a third
// daemon started later reads the same history.
func TestMaintenanceFleet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.Schema(t, "rota_test")
	if err := postgres.Migrate(ctx, pgtest.PoolIn(t, schema, 1)); err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context) error { return nil }
	tasks := []maintenance.Task{
		{Name: "vacuum", Class: maintenance.Heavy, Cadence: time.Hour, Run: noop},
		{Name: "reindex", Class: maintenance.Heavy, Cadence: 2 * time.Hour, Run: noop},
	}
	daemon := func(holder string) *maintenance.Scheduler {
		pool := pgtest.PoolIn(t, schema, 2)
		s, err := maintenance.NewScheduler(tasks, maintenance.Config{
			Lease:      postgres.NewLease(pool, "heavy", 30*time.Minute),
			StateStore: postgres.NewStateStore(pool),
			Holder:     holder,
			LeaseTTL:   5 * time.Minute,
			MaxHold:    30 * time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := daemon("a"), daemon("b")

	ra, err := a.Poll(ctx, t0)
	if err != nil || ra.Winner == nil || ra.Winner.Task.Name != "vacuum" {
		t.Fatalf("a's poll = %+v, %v; want a to win vacuum", ra.Winner, err)
	}
	rb, err := b.Poll(ctx, t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if rb.Winner != nil {
		t.Fatalf("b started %q while a runs vacuum under the lease", rb.Winner.Task.Name)
	}
	cur, held, err := postgres.NewLease(pgtest.PoolIn(t, schema, 1), "heavy", 30*time.Minute).Current(ctx, t0.Add(time.Second))
	if err != nil || !held || cur.Holder != "a" {
		t.Fatalf("lease = %+v, %v, %v; want a holding it", cur, held, err)
	}

	if err := a.Complete(ctx, "vacuum", nil, t0.Add(10*time.Minute)); err != nil {
		t.Fatalf("a completes vacuum: %v", err)
	}
	rb, err = b.Poll(ctx, t0.Add(11*time.Minute))
	if err != nil || rb.Winner == nil || rb.Winner.Task.Name != "reindex" {
		t.Fatalf("b's poll after a finished = %+v, %v; want b to win reindex", rb.Winner, err)
	}
	next, held, err := postgres.NewLease(pgtest.PoolIn(t, schema, 1), "heavy", 30*time.Minute).Current(ctx, t0.Add(11*time.Minute))
	if err != nil || !held || next.Holder != "b" || next.Token <= cur.Token {
		t.Fatalf("lease = %+v, %v, %v; want b holding it with a token above %d", next, held, err, cur.Token)
	}

	// A daemon started now sees what the fleet did.
	snap, err := postgres.NewStateStore(pgtest.PoolIn(t, schema, 1)).Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]maintenance.TaskState{}
	for _, st := range snap.States {
		states[st.Name] = st
	}
	if v := states["vacuum"]; v.LastOutcome != maintenance.OutcomeSucceeded || !v.LastRunAt.Equal(t0) || v.Running {
		t.Fatalf("vacuum's state = %+v; want a finished run started at %v", v, t0)
	}
	if r := states["reindex"]; !r.Running || r.RunningBy != "b" || r.RunningToken != next.Token {
		t.Fatalf("reindex's state = %+v; want running on b under token %d", r, next.Token)
	}
}
