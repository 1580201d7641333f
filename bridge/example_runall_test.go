package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/tenancy"
)

// A service runs its Runner and its maintenance Scheduler under one context with RunAll:
// when the context ends (here once the maintenance task has run; in a daemon at SIGTERM)
// both stop and RunAll returns nil. When one of its loops fails — here a stand-in for a
// listener that cannot connect — RunAll stops the others and returns the failure.
func ExampleRunAll() {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	idx := duework.NewMemory()
	plans := tenancy.NewMemoryEntitlements()
	lanes := []dispatch.LaneCapacity{{Lane: "free", PerUserLimit: 2, PerCycleLimit: 50}}
	laneFor, err := bridge.PlanLanes(plans, map[tenancy.PlanID]dispatch.Lane{tenancy.PlanFree: "free"}, lanes)
	if err != nil {
		panic(err)
	}
	d, err := dispatch.New(idx, dispatch.Config{Lanes: lanes, GlobalBatchLimit: 50, LaneFor: laneFor, ClaimFor: time.Minute})
	if err != nil {
		panic(err)
	}
	b := &bridge.Bridge{Index: idx, Watchlist: tenancy.NewMemoryWatchlist(), Pipeline: bridge.PipelineFunc(
		func(context.Context, tenancy.Context, tenancy.WatchlistEntry) (bridge.Result, error) {
			return bridge.Result{}, nil
		})}
	runner, err := bridge.NewRunner(b, d, bridge.RunnerConfig{Logger: quiet})
	if err != nil {
		panic(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	compact := maintenance.Task{Name: "compact", Class: maintenance.OffLease, Cadence: time.Hour,
		Run: func(context.Context) error {
			fmt.Println("maintenance: compact ran")
			stop() // a daemon stops at SIGTERM instead
			return nil
		}}
	sched, err := maintenance.NewScheduler([]maintenance.Task{compact}, maintenance.Config{Logger: quiet})
	if err != nil {
		panic(err)
	}
	fmt.Println("stopped:", bridge.RunAll(ctx, runner.Run, sched.Run))

	errRefused := errors.New("listen: connection refused")
	listen := func(context.Context) error { return errRefused }
	err = bridge.RunAll(context.Background(), runner.Run, listen)
	fmt.Println("failed:", err, errors.Is(err, errRefused))
	// Output:
	// maintenance: compact ran
	// stopped: <nil>
	// failed: bridge: RunAll: runs[1]: listen: connection refused true
}
