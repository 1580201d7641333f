package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
	"github.com/rotaworks/rota/tenancy"
)

// A Runner's items never leave its process, so its claims are written started: no copy
// anywhere else can start or hand back one of them, while the Runner starts each once, and
// hands back unstarted, at its stop, those still waiting for a worker.
func TestRunnerClaimsItsItemsStarted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.Schema(t, "rota_localstart")
	pool := pgtest.PoolIn(t, schema, 4)
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	amy := mustTC(t, "amy")
	wl := postgres.NewWatchlist(pool)
	for i := range 3 {
		if err := wl.Add(ctx, amy, tenancy.WatchlistEntry{UserID: "amy", Slug: fmt.Sprintf("s%d", i), Tier: "hot", AddedAt: t0}); err != nil {
			t.Fatal(err)
		}
	}
	idx := postgres.NewIndex(pool)
	running, release := make(chan string, 3), make(chan struct{})
	pipe := bridge.PipelineFunc(func(_ context.Context, _ tenancy.Context, we tenancy.WatchlistEntry) (bridge.Result, error) {
		running <- we.Slug
		<-release
		return bridge.Result{}, nil
	})
	br := &bridge.Bridge{Index: idx, Watchlist: wl, Pipeline: pipe}
	if n, err := br.SyncAll(ctx, time.Now().Add(-time.Hour)); err != nil || n != 3 {
		t.Fatalf("SyncAll: %d, %v; want 3 entries", n, err)
	}
	d, err := dispatch.New(idx, dispatch.Config{
		Lanes:            []dispatch.LaneCapacity{{Lane: "all", PerUserLimit: 3, PerCycleLimit: 3}},
		GlobalBatchLimit: 3,
		LaneFor:          func(context.Context, string) (dispatch.Lane, error) { return "all", nil },
		ClaimFor:         time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := bridge.NewRunner(br, d, bridge.RunnerConfig{Interval: time.Hour, Workers: 1, ShutdownTimeout: time.Minute, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	first := await(t, running, "the first item to run")

	// The other two wait for the one worker, claimed and marked started.
	var waiting []duework.Unclaim
	rows, err := pool.Query(ctx, `SELECT work_key, claim_token, claim_until, claim_started FROM rota_due WHERE user_id = 'amy' ORDER BY work_key`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var (
			work    string
			token   *int64
			until   *time.Time
			started bool
		)
		if err := rows.Scan(&work, &token, &until, &started); err != nil {
			t.Fatal(err)
		}
		if token == nil || !started {
			t.Fatalf("%s while the Runner holds it: token %v, started %v; want claimed and started", work, token, started)
		}
		if work != first {
			c := duework.Claim{Entry: duework.Entry{UserID: "amy", WorkKey: work}, Token: uint64(*token), Until: *until}
			waiting = append(waiting, duework.Unclaim{Tenant: amy, Claim: c})
		}
	}
	if err := rows.Err(); err != nil || len(waiting) != 2 {
		t.Fatalf("%d items waiting for the worker (%v), want 2", len(waiting), err)
	}
	other := postgres.NewIndex(pgtest.PoolIn(t, schema, 2)) // a copy of the items elsewhere
	for _, call := range []struct {
		name string
		f    func(context.Context, []duework.Unclaim) ([]error, error)
	}{{"StartClaims", other.StartClaims}, {"Unclaim", other.Unclaim}} {
		errs, err := call.f(ctx, waiting)
		if err != nil || len(errs) != 2 || !errors.Is(errs[0], duework.ErrClaimStarted) || !errors.Is(errs[1], duework.ErrClaimStarted) {
			t.Errorf("%s of the waiting items by another process = %v, %v; want ErrClaimStarted for both", call.name, errs, err)
		}
	}

	// At the stop the waiting items are handed back unstarted; the running one completes.
	stop()
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(running) != 0 {
		t.Fatalf("%d more items ran after the stop, want none", len(running))
	}
	var claimed, ran int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE claim_token IS NOT NULL OR claim_started),
		count(*) FILTER (WHERE last_run_at IS NOT NULL) FROM rota_due WHERE user_id = 'amy'`).Scan(&claimed, &ran); err != nil {
		t.Fatal(err)
	}
	if claimed != 0 || ran != 1 {
		t.Errorf("after the stop %d entries are still claimed and %d ran; want none claimed and the one that ran", claimed, ran)
	}
}
