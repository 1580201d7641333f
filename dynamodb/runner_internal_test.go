package rotadynamo

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// runs records every run of a pipeline shared by replicas: which source, by whom, when it
// started and ended; it fails the test at once when a run of a source starts while
// another runs.
type runs struct {
	t      *testing.T
	mu     sync.Mutex
	active map[duework.Key]int
	count  map[duework.Key]int
	spans  map[duework.Key][][2]time.Time
	by     [2]int // runs per replica
}

func (r *runs) pipeline(replica int) bridge.Pipeline {
	return bridge.PipelineFunc(func(_ context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
		k := duework.Key{UserID: tc.UserID(), WorkKey: e.Slug}
		start := time.Now()
		r.mu.Lock()
		if other, ok := r.active[k]; ok {
			r.t.Errorf("%s/%s: replica %d started it while replica %d runs it", k.UserID, k.WorkKey, replica, other)
		}
		r.active[k] = replica
		r.mu.Unlock()
		time.Sleep(time.Millisecond) // a run takes time, so overlapping ones would meet
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.active, k)
		r.count[k]++
		r.by[replica]++
		r.spans[k] = append(r.spans[k], [2]time.Time{start, time.Now()})
		return bridge.Result{}, nil // nothing new: a miss, so each run adds one to the streak
	})
}

// Two replicas, each a Runner over stores of its own on one table, run on the real clock
// for two seconds, every source due again 300 ms after it ran: every source ran, no two
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
	tiers := cadence.NewRegistry()
	if err := tiers.Register("fast", cadence.Backoff{Base: 300 * time.Millisecond, Max: 300 * time.Millisecond, Factor: 1}); err != nil {
		t.Fatal(err)
	}
	lane := dispatch.LaneCapacity{Lane: "free", PerUserLimit: 2, PerCycleLimit: 10}
	rec := &runs{t: t, active: map[duework.Key]int{}, count: map[duework.Key]int{}, spans: map[duework.Key][][2]time.Time{}}
	var sources []duework.Key
	var runners []*bridge.Runner
	var logs []*bytes.Buffer
	for i := range 2 {
		st, err := OpenStores(ctx, c, table, StoresConfig{Buckets: 2})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			sources = watchSources(t, st, 12, 3)
		}
		d, err := dispatch.New(st.Index, dispatch.Config{Lanes: []dispatch.LaneCapacity{lane}, GlobalBatchLimit: lane.PerCycleLimit,
			ClaimFor: 30 * time.Second, LaneFor: func(context.Context, string) (dispatch.Lane, error) { return lane.Lane, nil }})
		if err != nil {
			t.Fatal(err)
		}
		b := &bridge.Bridge{Index: st.Index, Watchlist: st.Watchlist, Pipeline: rec.pipeline(i), Tiers: tiers}
		if _, err := b.SyncAll(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		r, err := bridge.NewRunner(b, d, bridge.RunnerConfig{Interval: 50 * time.Millisecond, Workers: 4, AlarmAfter: -1,
			Logger: slog.New(slog.NewTextHandler(&syncWriter{w: &buf}, nil))})
		if err != nil {
			t.Fatal(err)
		}
		runners, logs = append(runners, r), append(logs, &buf)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(runners))
	for i, r := range runners {
		wg.Go(func() { errs[i] = r.Run(ctx) })
	}
	time.Sleep(2 * time.Second)
	cancel()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: Run = %v, want nil after a clean stop", i, err)
		}
		if bytes.Contains(logs[i].Bytes(), []byte("level=ERROR")) {
			t.Errorf("replica %d logged an error:\n%s", i, logs[i])
		}
	}
	checkRuns(t, rec, sources)
	st, err := OpenStores(context.Background(), c, table, StoresConfig{Buckets: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range sources {
		es, err := st.Index.Entries(context.Background(), k.UserID, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(es, func(s duework.EntryState) bool { return s.Entry.WorkKey == k.WorkKey })
		switch {
		case i < 0:
			t.Errorf("%s/%s is lost", k.UserID, k.WorkKey)
		case !es[i].ClaimedUntil.IsZero():
			t.Errorf("%s/%s is still claimed after a clean stop", k.UserID, k.WorkKey)
		case es[i].Entry.MissStreak != rec.count[k]:
			t.Errorf("%s/%s: streak %d after %d runs", k.UserID, k.WorkKey, es[i].Entry.MissStreak, rec.count[k])
		}
	}
}

// watchSources has users t00… watch perUser sources each, on the fast tier, and returns
// their keys.
func watchSources(t *testing.T, st *Stores, users, perUser int) []duework.Key {
	t.Helper()
	var es []tenancy.WatchlistEntry
	var keys []duework.Key
	for u := range users {
		for j := range perUser {
			e := tenancy.WatchlistEntry{UserID: fmt.Sprintf("t%02d", u), Slug: fmt.Sprintf("s%d", j), Tier: "fast", AddedAt: time.Now()}
			es, keys = append(es, e), append(keys, duework.Key{UserID: e.UserID, WorkKey: e.Slug})
		}
	}
	if err := st.Watchlist.AddAll(context.Background(), es); err != nil {
		t.Fatal(err)
	}
	return keys
}

// checkRuns checks that every source ran, and that no run of one started before the one
// before it ended, and that both replicas ran some.
func checkRuns(t *testing.T, rec *runs, sources []duework.Key) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	total := 0
	for _, k := range sources {
		spans := rec.spans[k]
		if len(spans) == 0 {
			t.Errorf("%s/%s never ran", k.UserID, k.WorkKey)
		}
		slices.SortFunc(spans, func(a, b [2]time.Time) int { return a[0].Compare(b[0]) })
		for i := 1; i < len(spans); i++ {
			if spans[i][0].Before(spans[i-1][1]) {
				t.Errorf("%s/%s: a run started before the one before it ended", k.UserID, k.WorkKey)
			}
		}
		total += len(spans)
	}
	for i, n := range rec.by {
		if n == 0 {
			t.Errorf("replica %d ran nothing of %d runs", i, total)
		}
	}
	t.Logf("%d runs of %d sources, %v by replica", total, len(sources), rec.by)
}

// syncWriter serializes writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
