package bridge_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

const claimFor = 10 * time.Minute

// world is a whole in-memory deployment: index, watchlist, plans, bridge, dispatcher.
type world struct {
	idx  duework.Index
	wl   *tenancy.MemoryWatchlist
	ent  *tenancy.MemoryEntitlements
	b    *bridge.Bridge
	d    *dispatch.Dispatcher
	logs *bytes.Buffer
	out  *syncWriter // the one writer of logs, shared by the world's Runners
}

type worldConfig struct {
	idx      duework.Index // nil: newIndex()
	lanes    []dispatch.LaneCapacity
	global   int
	pipe     bridge.Pipeline
	claimFor time.Duration // 0: claimFor
	limits   dispatch.LimitsFor
}

func defaultLanes() []dispatch.LaneCapacity {
	return []dispatch.LaneCapacity{
		{Lane: "pro", PerUserLimit: 100, PerCycleLimit: 1000},
		{Lane: "plus", PerUserLimit: 100, PerCycleLimit: 1000},
		{Lane: "free", PerUserLimit: 100, PerCycleLimit: 1000},
	}
}

func newWorld(t testing.TB, cfg worldConfig) *world {
	t.Helper()
	w := &world{idx: cfg.idx, wl: tenancy.NewMemoryWatchlist(), ent: tenancy.NewMemoryEntitlements(), logs: &bytes.Buffer{}}
	w.out = &syncWriter{w: w.logs}
	if w.idx == nil {
		w.idx = newIndex()
	}
	if cfg.lanes == nil {
		cfg.lanes = defaultLanes()
	}
	if cfg.global == 0 {
		cfg.global = 1000
	}
	if cfg.claimFor == 0 {
		cfg.claimFor = claimFor
	}
	tiers := cadence.NewRegistry()
	if err := tiers.Register("fast", cadence.Backoff{Base: time.Minute, Max: 4 * time.Minute, Factor: 2}); err != nil {
		t.Fatal(err)
	}
	w.b = &bridge.Bridge{Index: w.idx, Watchlist: w.wl, Pipeline: cfg.pipe, Tiers: tiers}
	// Each plan whose lane is configured is routed to it; the others are unmapped.
	table := map[tenancy.PlanID]dispatch.Lane{}
	for plan, lane := range map[tenancy.PlanID]dispatch.Lane{tenancy.PlanFree: "free", "plus": "plus", "pro": "pro"} {
		if slices.ContainsFunc(cfg.lanes, func(lc dispatch.LaneCapacity) bool { return lc.Lane == lane }) {
			table[plan] = lane
		}
	}
	laneFor, err := bridge.PlanLanes(w.ent, table, cfg.lanes)
	if err != nil {
		t.Fatal(err)
	}
	w.d, err = dispatch.New(w.idx, dispatch.Config{Lanes: cfg.lanes, GlobalBatchLimit: cfg.global, LaneFor: laneFor, LimitsFor: cfg.limits, ClaimFor: cfg.claimFor})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) runner(t testing.TB, cfg bridge.RunnerConfig) *bridge.Runner {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(w.out, nil))
	}
	r, err := bridge.NewRunner(w.b, w.d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// add watches slug for user on plan with tier and schedules it due at due.
func (w *world) add(t testing.TB, user string, plan tenancy.PlanID, slug, tier string, due time.Time) {
	t.Helper()
	if err := w.ent.SetPlan(context.Background(), mustTC(t, user), plan); err != nil {
		t.Fatal(err)
	}
	watch(t, w.wl, user, slug, tier)
	schedule(t, w.idx, duework.Entry{UserID: user, WorkKey: slug, Tier: tier, DueAt: due})
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func TestNewRunnerRefusesBadConfig(t *testing.T) {
	w := newWorld(t, worldConfig{pipe: newStub()})
	for _, tc := range []struct {
		name, field string
		b           *bridge.Bridge
		d           *dispatch.Dispatcher
		cfg         bridge.RunnerConfig
	}{
		{"nil bridge", "Bridge", nil, w.d, bridge.RunnerConfig{}},
		{"nil dispatcher", "Dispatcher", w.b, nil, bridge.RunnerConfig{}},
		{"bridge without pipeline", "Bridge.Pipeline", &bridge.Bridge{Index: w.idx, Watchlist: w.wl}, w.d, bridge.RunnerConfig{}},
		{"negative interval", "RunnerConfig.Interval must not be negative, got -1ns", w.b, w.d, bridge.RunnerConfig{Interval: -1}},
		{"negative workers", "RunnerConfig.Workers must not be negative, got -1", w.b, w.d, bridge.RunnerConfig{Workers: -1}},
		{"negative flush items", "RunnerConfig.FlushItems", w.b, w.d, bridge.RunnerConfig{FlushItems: -1}},
		{"negative flush interval", "RunnerConfig.FlushInterval", w.b, w.d, bridge.RunnerConfig{FlushInterval: -1}},
		{"negative claim margin", "RunnerConfig.ClaimMargin", w.b, w.d, bridge.RunnerConfig{ClaimMargin: -1}},
		{"negative shutdown timeout", "RunnerConfig.ShutdownTimeout", w.b, w.d, bridge.RunnerConfig{ShutdownTimeout: -1}},
	} {
		r, err := bridge.NewRunner(tc.b, tc.d, tc.cfg)
		if r != nil || !errors.Is(err, bridge.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: NewRunner = %v, %v; want ErrInvalidConfig naming %s", tc.name, r, err, tc.field)
		}
	}
	// Every problem at once.
	_, err := bridge.NewRunner(nil, nil, bridge.RunnerConfig{Workers: -1})
	for _, field := range []string{"Bridge", "Dispatcher", "Workers"} {
		if !strings.Contains(fmt.Sprint(err), field) {
			t.Errorf("NewRunner with three problems: %v, want each named (%s)", err, field)
		}
	}
	if _, err := bridge.NewRunner(w.b, w.d, bridge.RunnerConfig{AlarmAfter: -1}); err != nil {
		t.Errorf("a negative AlarmAfter turns the alarm off, it is not refused: %v", err)
	}
	if _, err := bridge.NewRunner(w.b, w.d, bridge.RunnerConfig{}); err != nil {
		t.Errorf("zero RunnerConfig: %v", err)
	}
}

func TestCycleReportsEveryOutcome(t *testing.T) {
	pipe := newStub()
	w := newWorld(t, worldConfig{pipe: pipe, lanes: []dispatch.LaneCapacity{
		{Lane: "pro", PerUserLimit: 10, PerCycleLimit: 10},
		{Lane: "free", PerUserLimit: 1, PerCycleLimit: 10},
	}})
	w.add(t, "alice", "pro", "hit", "hot", t0)
	w.add(t, "alice", "pro", "miss", "hot", t0)
	w.add(t, "alice", "pro", "gone", "hot", t0)
	w.add(t, "alice", "pro", "broken", "hot", t0)
	w.add(t, "alice", "pro", "oddtier", "nightly", t0)
	w.add(t, "bob", tenancy.PlanFree, "b1", "hot", t0)
	w.add(t, "bob", tenancy.PlanFree, "b2", "hot", t0.Add(time.Second)) // shed: free allows one per user
	w.add(t, "carol", "plus", "c1", "hot", t0)                          // unrouted: no lane for plus
	if err := w.wl.Remove(context.Background(), mustTC(t, "alice"), "gone"); err != nil {
		t.Fatal(err)
	}
	pipe.results["hit"], pipe.results["miss"], pipe.results["b1"] = hit, miss, hit
	pipe.errs["broken"] = errBoom

	r := w.runner(t, bridge.RunnerConfig{Workers: 3})
	now := t0.Add(time.Minute)
	rep, err := r.Cycle(context.Background(), now)

	if !errors.Is(err, errBoom) || !errors.Is(err, cadence.ErrUnknownTier) {
		t.Errorf("Cycle err = %v, want the pipeline error and the unknown tier joined", err)
	}
	got := [...]int{rep.Dispatched, rep.Hits, rep.Misses, rep.Removed, rep.Errors, rep.LostClaims, rep.Released, len(rep.Shed), len(rep.Unrouted)}
	want := [...]int{6, 2, 1, 1, 2, 0, 0, 1, 1}
	if got != want {
		t.Errorf("counts [dispatched hits misses removed errors lost released shed unrouted] = %v, want %v", got, want)
	}
	if strings.Join(rep.Shed, ",") != "bob" || len(rep.Unrouted) != 1 || rep.Unrouted[0].UserID != "carol" || !errors.Is(rep.Unrouted[0].Err, bridge.ErrUnmappedPlan) {
		t.Errorf("shed %v, unrouted %+v", rep.Shed, rep.Unrouted)
	}
	statuses := map[string]bridge.ItemStatus{}
	for _, it := range rep.Items {
		statuses[it.Item.Claim.Entry.WorkKey] = it.Status
	}
	wantStatus := map[string]bridge.ItemStatus{"hit": bridge.StatusHit, "miss": bridge.StatusMiss, "gone": bridge.StatusRemoved,
		"broken": bridge.StatusError, "oddtier": bridge.StatusError, "b1": bridge.StatusHit}
	for k, s := range wantStatus {
		if statuses[k] != s {
			t.Errorf("item %s: status %v, want %v", k, statuses[k], s)
		}
	}
	if e := get(t, w.idx, "alice", "hit"); !e.DueAt.Equal(now.Add(cadence.TierHot.Base)) {
		t.Errorf("hit not advanced from the cycle's now: %+v", e)
	}
	logs := w.logs.String()
	for _, s := range []string{"level=INFO msg=\"rota: cycle\"", "dispatched=6 hits=2 misses=1 removed=1 errors=2 lost_claims=0 released=0 late=0 duplicates=0 paused=0 shed=1 unrouted=1",
		"level=WARN msg=\"rota: item failed\" user=alice work_key=broken lane=pro status=error", "level=WARN msg=\"rota: user unrouted\" user=carol"} {
		if !strings.Contains(logs, s) {
			t.Errorf("logs lack %q:\n%s", s, logs)
		}
	}
	if n := strings.Count(logs, "rota: cycle"); n != 1 {
		t.Errorf("%d cycle lines, want 1", n)
	}
}

// concurrencyProbe is a pipeline that counts how many runs overlap.
type concurrencyProbe struct {
	cur, peak, total atomic.Int64
	hold             time.Duration
}

func (p *concurrencyProbe) Run(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
	n := p.cur.Add(1)
	defer p.cur.Add(-1)
	p.total.Add(1)
	for {
		old := p.peak.Load()
		if n <= old || p.peak.CompareAndSwap(old, n) {
			break
		}
	}
	time.Sleep(p.hold) // virtual time: the tests run it inside a synctest bubble
	return hit, nil
}

func TestRunnerNeverExceedsWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := &concurrencyProbe{hold: time.Second}
		w := newWorld(t, worldConfig{pipe: probe, global: 20})
		for i := range 40 {
			w.add(t, fmt.Sprintf("u%d", i%8), tenancy.PlanFree, fmt.Sprintf("s%d", i), "hot", t0)
		}
		r := w.runner(t, bridge.RunnerConfig{Workers: 3})
		// Two cycles at once share one pool: each dispatches 20 of the 40 entries.
		var wg sync.WaitGroup
		reps := make([]bridge.CycleReport, 2)
		for i := range reps {
			wg.Go(func() {
				var err error
				if reps[i], err = r.Cycle(context.Background(), t0); err != nil {
					t.Error(err)
				}
			})
			synctest.Wait() // the first cycle has claimed its 20 and waits for workers
		}
		wg.Wait()
		if reps[0].Dispatched+reps[1].Dispatched != 40 || probe.total.Load() != 40 {
			t.Fatalf("dispatched %d+%d, ran %d; want 40", reps[0].Dispatched, reps[1].Dispatched, probe.total.Load())
		}
		if peak := probe.peak.Load(); peak != 3 {
			t.Fatalf("peak concurrent pipelines = %d, want exactly Workers = 3", peak)
		}
	})
}

func TestRunnerDefaultWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := &concurrencyProbe{hold: time.Second}
		w := newWorld(t, worldConfig{pipe: probe})
		for i := range 3 * 8 {
			w.add(t, "u", tenancy.PlanFree, fmt.Sprintf("s%d", i), "hot", t0)
		}
		if _, err := w.runner(t, bridge.RunnerConfig{}).Cycle(context.Background(), t0); err != nil {
			t.Fatal(err)
		}
		if peak := probe.peak.Load(); peak != 8 {
			t.Fatalf("peak = %d, want defaultWorkers = %d", peak, 8)
		}
	})
}

// gatePipeline blocks every run until release is closed, and reports each start.
type gatePipeline struct {
	started chan string
	release chan struct{}
	result  bridge.Result
	honour  bool // return when ctx ends
}

func newGate() *gatePipeline {
	return &gatePipeline{started: make(chan string, 100), release: make(chan struct{}), result: hit}
}

func (g *gatePipeline) Run(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
	g.started <- e.Slug
	if g.honour {
		select {
		case <-g.release:
		case <-ctx.Done():
			return bridge.Result{}, ctx.Err()
		}
	} else {
		<-g.release
	}
	return g.result, nil
}

func TestRunWaitsForItemsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		gate := newGate()
		w := newWorld(t, worldConfig{pipe: gate})
		w.add(t, "u1", tenancy.PlanFree, "a", "hot", start)
		r := w.runner(t, bridge.RunnerConfig{Interval: time.Minute})
		ctx, cancel := context.WithCancel(context.Background())
		var done atomic.Bool
		var runErr error
		go func() {
			runErr = r.Run(ctx)
			done.Store(true)
		}()
		if got := <-gate.started; got != "a" {
			t.Fatalf("started %q", got)
		}
		time.Sleep(30 * time.Second)
		cancel()
		synctest.Wait()
		if done.Load() {
			t.Fatal("Run returned while an item was in flight")
		}
		close(gate.release)
		synctest.Wait()
		if !done.Load() || runErr != nil {
			t.Fatalf("Run did not return nil after its item finished: done=%v err=%v", done.Load(), runErr)
		}
		// The in-flight item was not cancelled by the shutdown: its hit was recorded.
		if e := get(t, w.idx, "u1", "a"); e.MissStreak != 0 || !e.DueAt.Equal(start.Add(cadence.TierHot.Base)) {
			t.Fatalf("in-flight item not completed: %+v", e)
		}
		// And nothing is dispatched after Run returned.
		time.Sleep(time.Hour)
		if len(gate.started) != 0 {
			t.Fatal("an item started after Run returned")
		}
	})
}

func TestRunCyclesEveryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var runs []time.Duration
		pipe := bridge.PipelineFunc(func(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
			mu.Lock()
			runs = append(runs, time.Since(start))
			mu.Unlock()
			return hit, nil
		})
		w := newWorld(t, worldConfig{pipe: pipe})
		w.add(t, "u1", tenancy.PlanFree, "a", "fast", start) // due every minute after a hit
		r := w.runner(t, bridge.RunnerConfig{Interval: 30 * time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), 140*time.Second)
		defer cancel()
		if err := r.Run(ctx); err != nil {
			t.Fatalf("Run = %v, want nil after a clean stop", err)
		}
		want := []time.Duration{0, time.Minute, 2 * time.Minute}
		if len(runs) != len(want) {
			t.Fatalf("runs at %v, want %v", runs, want)
		}
		for i := range want {
			if runs[i] != want[i] {
				t.Fatalf("runs at %v, want %v", runs, want)
			}
		}
		if n := strings.Count(w.logs.String(), "rota: cycle"); n != 5 {
			t.Fatalf("%d cycles logged in 140s at a 30s interval, want 5 (0, 30, 60, 90, 120s)", n)
		}
	})
}

func TestCrashedWorkerDoesNotLoseTheEntry(t *testing.T) {
	// The pipeline's first run hangs past its claim (a crashed worker); later runs hit.
	hang := make(chan struct{})
	entered := make(chan struct{})
	var calls atomic.Int64
	pipe := bridge.PipelineFunc(func(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
		if calls.Add(1) == 1 {
			close(entered)
			<-hang // ignores ctx: it is stuck
		}
		return hit, nil
	})
	w := newWorld(t, worldConfig{pipe: pipe})
	w.add(t, "u1", tenancy.PlanFree, "a", "hot", t0)
	r := w.runner(t, bridge.RunnerConfig{Workers: 2})

	first := make(chan bridge.CycleReport)
	go func() {
		rep, _ := r.Cycle(context.Background(), t0)
		first <- rep
	}()
	<-entered
	// While the claim lasts the entry is not dispatched again.
	if rep, _ := r.Cycle(context.Background(), t0.Add(claimFor-time.Second)); rep.Dispatched != 0 {
		t.Fatalf("dispatched again before the claim ended: %+v", rep)
	}
	// Once it ends, it is.
	again := t0.Add(claimFor)
	rep, err := r.Cycle(context.Background(), again)
	if err != nil || rep.Dispatched != 1 || rep.Hits != 1 {
		t.Fatalf("after ClaimFor: %+v, %v; want the entry dispatched again and run", rep, err)
	}
	want := get(t, w.idx, "u1", "a")
	if !want.DueAt.Equal(again.Add(cadence.TierHot.Base)) {
		t.Fatalf("second run not recorded: %+v", want)
	}
	// The stuck worker finally returns: its claim is lost and it writes nothing.
	close(hang)
	if rep := <-first; rep.LostClaims != 1 || rep.Items[0].Status != bridge.StatusLostClaim || !errors.Is(rep.Items[0].Err, duework.ErrClaimLost) {
		t.Fatalf("stuck worker's cycle: %+v", rep)
	}
	if got := get(t, w.idx, "u1", "a"); got != want {
		t.Fatalf("stuck worker overwrote the entry: %+v, want %+v", got, want)
	}
}

func TestCycleReportsAndLogsADispatchFailure(t *testing.T) {
	fi := &faultyIndex{Index: newIndex(), at: fault{n: 1}} // the cycle's first call fails
	w := newWorld(t, worldConfig{idx: fi, pipe: newStub()})
	rep, err := w.runner(t, bridge.RunnerConfig{}).Cycle(context.Background(), t0)
	var ie *injectedError
	if !errors.As(err, &ie) || ie != fi.injected || !errors.As(rep.DispatchErr, &ie) {
		t.Fatalf("Cycle = %+v, %v; want the injected failure", rep, err)
	}
	logs := w.logs.String()
	if n := strings.Count(logs, "level=ERROR"); n != 1 || !strings.Contains(logs, `level=ERROR msg="rota: dispatch failed"`) || !strings.Contains(logs, "dispatched=0") {
		t.Fatalf("want one Error line for the failure, then the cycle line:\n%s", logs)
	}
}

// TestRunNamesSettingsThatCanNeverTakeEffect: a lane whose per-user cap exceeds its
// per-cycle cap, or whose per-cycle cap exceeds the global one, gets one Warn line at
// start naming the setting and what caps it.
func TestRunNamesSettingsThatCanNeverTakeEffect(t *testing.T) {
	w := newWorld(t, worldConfig{pipe: newStub(), global: 50, lanes: []dispatch.LaneCapacity{
		{Lane: "pro", PerUserLimit: 20, PerCycleLimit: 10},
		{Lane: "free", PerUserLimit: 1, PerCycleLimit: 80},
	}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.runner(t, bridge.RunnerConfig{}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	logs := w.logs.String()
	for _, want := range []string{
		`level=WARN msg="rota: setting has no effect" lane=pro setting=PerUserLimit value=20 capped_by=PerCycleLimit cap=10`,
		`level=WARN msg="rota: setting has no effect" lane=free setting=PerCycleLimit value=80 capped_by=GlobalBatchLimit cap=50`,
	} {
		if strings.Count(logs, want) != 1 {
			t.Errorf("want one line %s in:\n%s", want, logs)
		}
	}
	if n := strings.Count(logs, "has no effect"); n != 2 {
		t.Errorf("%d such lines, want two", n)
	}
}

// TestRunNamesWeightsALaneCannotHold: a user whose weight times the lane's PerUserLimit
// exceeds its PerCycleLimit gets one Warn line, the first time a cycle reads it, however
// many cycles read it after.
func TestRunNamesWeightsALaneCannotHold(t *testing.T) {
	w := newWorld(t, worldConfig{pipe: newStub(), lanes: []dispatch.LaneCapacity{{Lane: "pro", PerUserLimit: 2, PerCycleLimit: 5}},
		limits: func(_ context.Context, user string) (duework.Limits, error) {
			if user == "heavy" {
				return duework.Limits{Weight: 3}, nil
			}
			return duework.Limits{Weight: 2}, nil
		}})
	w.add(t, "heavy", "pro", "s1", "fast", t0.Add(-time.Minute))
	w.add(t, "light", "pro", "s1", "fast", t0.Add(-time.Minute))
	r := w.runner(t, bridge.RunnerConfig{})
	for i := range 3 {
		if _, err := r.Cycle(context.Background(), t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	logs := w.logs.String()
	want := `level=WARN msg="rota: setting has no effect" lane=pro setting=Weight users=1 per_user_limit=2 capped_by=PerCycleLimit cap=5`
	if strings.Count(logs, want) != 1 || strings.Count(logs, "has no effect") != 1 {
		t.Errorf("want exactly one line %s in:\n%s", want, logs)
	}
}
