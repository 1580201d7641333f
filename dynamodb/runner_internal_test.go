package rotadynamo

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/fleettest"
	"github.com/rotaworks/rota/tenancy"
)

// Two replicas, each a Runner over stores of its own on one table, run on the real clock
// for two seconds, every source due again 200 ms after it ran: every source ran, no two
// runs of one source overlapped, each replica did some of the work, and after a clean stop
// nothing is claimed and each source's streak counts its runs — no completion lost or
// written twice.
func TestTwoRunnersShareTheWork(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := testClient(t)
	table := tableName("rota-runners")
	dropTable(t, c, table)
	var replicas []*Stores
	for range 2 {
		st, err := OpenStores(ctx, c, table, StoresConfig{Buckets: 2})
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, st)
	}
	s := fleettest.NewStore(t, replicas[0].Index, replicas[0].Watchlist, replicas[0].Entitlements)
	for u := range 12 {
		s.Watch(fmt.Sprintf("t%02d", u), tenancy.PlanFree, 3)
	}
	runs := fleettest.NewRunLog(t, "replica")
	// A run takes a millisecond, so that two runs of one source would meet.
	hold := func(context.Context, duework.Key) bool { time.Sleep(time.Millisecond); return false }
	var wg sync.WaitGroup
	errs := make([]error, len(replicas))
	logs := make([]*fleettest.Buffer, len(replicas))
	for i, st := range replicas {
		b := &bridge.Bridge{Index: st.Index, Watchlist: st.Watchlist, Pipeline: runs.Pipeline(i, hold), Tiers: s.Tiers}
		d, err := dispatch.New(st.Index, s.DispatchConfig(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = &fleettest.Buffer{}
		r, err := bridge.NewRunner(b, d, bridge.RunnerConfig{Interval: 50 * time.Millisecond, Workers: 4, AlarmAfter: -1,
			Logger: slog.New(slog.NewTextHandler(logs[i], nil))})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { errs[i] = r.Run(ctx) })
	}
	time.Sleep(2 * time.Second)
	cancel()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: Run = %v, want nil after a clean stop", i, err)
		}
		if strings.Contains(logs[i].String(), "level=ERROR") {
			t.Errorf("replica %d logged an error:\n%s", i, logs[i])
		}
	}
	runs.CheckEachRanAlone(s.Sources)
	s.CheckNothingLost(runs.Written())
	var by [2]int
	for _, r := range runs.All() {
		by[r.Runner]++
	}
	for i, n := range by {
		if n == 0 {
			t.Errorf("replica %d ran nothing of %d runs", i, by[0]+by[1])
		}
	}
	t.Logf("%d runs of %d sources, %v by replica", by[0]+by[1], len(s.Sources), by)
}
