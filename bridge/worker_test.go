package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	"github.com/rotaworks/rota/internal/fakeclock"
	"github.com/rotaworks/rota/tenancy"
)

func (w *world) worker(t testing.TB, cfg bridge.WorkerConfig) *bridge.Worker {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(w.out, nil))
	}
	wk, err := bridge.NewWorker(w.b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return wk
}

// dispatchAll dispatches at now and returns the items, failing unless there are n.
func (w *world) dispatchAll(t testing.TB, now time.Time, n int) []dispatch.Item {
	t.Helper()
	b, err := w.d.Dispatch(context.Background(), now)
	if err != nil || len(b.Items) != n {
		t.Fatalf("Dispatch at %v: %d items, %v; want %d", now, len(b.Items), err, n)
	}
	return b.Items
}

// doAll calls wk.Do for every item at once, each from its own goroutine, and returns the
// reports in the items' order.
func doAll(wk *bridge.Worker, items []dispatch.Item, now time.Time) []bridge.ItemReport {
	reps := make([]bridge.ItemReport, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Go(func() { reps[i] = wk.Do(context.Background(), it, now) })
	}
	wg.Wait()
	return reps
}

func TestNewWorkerRefusesBadConfig(t *testing.T) {
	w := newWorld(t, worldConfig{pipe: newStub()})
	for _, tc := range []struct {
		name, field string
		b           *bridge.Bridge
		cfg         bridge.WorkerConfig
	}{
		{"nil bridge", "Bridge", nil, bridge.WorkerConfig{}},
		{"bridge without pipeline", "Bridge.Pipeline", &bridge.Bridge{Index: w.idx, Watchlist: w.wl}, bridge.WorkerConfig{}},
		{"negative workers", "WorkerConfig.Workers must not be negative", w.b, bridge.WorkerConfig{Workers: -1}},
		{"negative flush items", "WorkerConfig.FlushItems", w.b, bridge.WorkerConfig{FlushItems: -1}},
		{"negative flush interval", "WorkerConfig.FlushInterval", w.b, bridge.WorkerConfig{FlushInterval: -1}},
		{"negative claim margin", "WorkerConfig.ClaimMargin must not be negative", w.b, bridge.WorkerConfig{ClaimMargin: -1}},
		{"negative skew", "WorkerConfig.MaxClockSkew must not be negative", w.b, bridge.WorkerConfig{MaxClockSkew: -1}},
		{"margin within the flush", "WorkerConfig.ClaimMargin: the margin ClaimMargin = 1s must cover MaxClockSkew 1s plus FlushInterval 1s", w.b,
			bridge.WorkerConfig{ClaimMargin: time.Second, FlushInterval: time.Second}},
		{"margin within the skew", "WorkerConfig.ClaimMargin: the margin ClaimMargin = 5s must cover MaxClockSkew 5s plus FlushInterval 100ms", w.b,
			bridge.WorkerConfig{MaxClockSkew: 5 * time.Second}},
	} {
		wk, err := bridge.NewWorker(tc.b, tc.cfg)
		if wk != nil || !errors.Is(err, bridge.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: NewWorker = %v, %v; want ErrInvalidConfig naming %s", tc.name, wk, err, tc.field)
		}
	}
}

// TestWorkerDoRunsADecodedItem: an item that crossed a queue in its wire form runs, and
// Do returns once its completion is in the index.
func TestWorkerDoRunsADecodedItem(t *testing.T) {
	pipe := newStub()
	pipe.results["a"] = hit
	w := newWorld(t, worldConfig{pipe: pipe})
	w.add(t, "u1", tenancy.PlanFree, "a", "hot", t0)
	item := w.dispatchAll(t, t0, 1)[0]
	msg, err := bridge.EncodeItem(item)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := bridge.DecodeItem(msg)
	if err != nil {
		t.Fatal(err)
	}
	clk := fakeclock.New(t0)
	wk := w.worker(t, bridge.WorkerConfig{Clock: clk})
	rep := wk.Do(context.Background(), decoded, t0)
	if rep.Status != bridge.StatusHit || !rep.Written || rep.Err != nil || rep.Result == nil || !rep.Result.FoundNew() {
		t.Fatalf("Do = %+v, want a written hit with the pipeline's result", rep)
	}
	want := duework.Entry{UserID: "u1", WorkKey: "a", Tier: "hot", DueAt: t0.Add(cadence.TierHot.Base), LastRunAt: t0}
	if got := get(t, w.idx, "u1", "a"); got != want || rep.Next != want {
		t.Fatalf("after Do the index holds %+v and the report %+v, want %+v", got, rep.Next, want)
	}
	if err := wk.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestWorkerRefusesAForgedItem: an item whose claim is not current runs and writes
// nothing.
func TestWorkerRefusesAForgedItem(t *testing.T) {
	pipe := newStub()
	w := newWorld(t, worldConfig{pipe: pipe})
	w.add(t, "victim", tenancy.PlanFree, "feed", "hot", t0)
	forged := dispatch.Item{Claim: duework.Claim{Entry: get(t, w.idx, "victim", "feed"), Token: 99, Until: t0.Add(time.Hour)}, Lane: "free"}
	rep := w.worker(t, bridge.WorkerConfig{}).Do(context.Background(), forged, t0)
	if rep.Status != bridge.StatusLostClaim || rep.Written || !errors.Is(rep.Err, duework.ErrClaimLost) || pipe.ncalls() != 0 {
		t.Fatalf("Do(forged) = %+v with %d runs; want a lost claim and nothing run", rep, pipe.ncalls())
	}
	if e := get(t, w.idx, "victim", "feed"); !e.DueAt.Equal(t0) || !e.LastRunAt.IsZero() {
		t.Fatalf("the forged item changed the victim's entry: %+v", e)
	}
}

// gatedIndex holds the first call of method until release is closed, and counts the
// sizes of that method's calls.
type gatedIndex struct {
	*countingIndex
	method  string
	release chan struct{}
	mu      sync.Mutex
	sizes   []int
}

func (g *gatedIndex) gate(n int) {
	g.mu.Lock()
	g.sizes = append(g.sizes, n)
	first := len(g.sizes) == 1
	g.mu.Unlock()
	if first {
		<-g.release
	}
}

func (g *gatedIndex) StartClaims(ctx context.Context, claims []duework.Unclaim) ([]error, error) {
	if g.method == "StartClaims" {
		g.gate(len(claims))
	}
	return g.countingIndex.StartClaims(ctx, claims)
}

// TestWorkerChecksItemsThatArriveTogetherInOneCall: while one claim start is in flight,
// the items that get a worker go in the next call, all together, and their watchlist
// entries are read in one GetMany.
func TestWorkerChecksItemsThatArriveTogetherInOneCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		idx := &gatedIndex{countingIndex: newCountingIndex(), method: "StartClaims", release: make(chan struct{})}
		pipe := newStub()
		w := newWorld(t, worldConfig{idx: idx, pipe: pipe})
		for i := range 20 {
			w.add(t, fmt.Sprintf("u%d", i%5), tenancy.PlanFree, fmt.Sprintf("s%02d", i), "hot", t0)
		}
		items := w.dispatchAll(t, t0, 20)
		wl := &countingWatchlist{MemoryWatchlist: w.wl}
		w.b.Watchlist = wl
		wk := w.worker(t, bridge.WorkerConfig{Workers: 20})
		reps := make(chan bridge.ItemReport, 20)
		go func() { reps <- wk.Do(context.Background(), items[0], t0) }()
		synctest.Wait() // the first item's check is in flight
		for _, it := range items[1:] {
			go func() { reps <- wk.Do(context.Background(), it, t0) }()
		}
		synctest.Wait() // the other 19 wait for it
		close(idx.release)
		for range 20 {
			if rep := <-reps; rep.Status != bridge.StatusMiss || !rep.Written {
				t.Fatalf("Do = %+v, want a written miss", rep)
			}
		}
		if got := fmt.Sprint(idx.sizes); got != "[1 19]" {
			t.Errorf("StartClaims of %s, want [1 19]", got)
		}
		if gets, batches := wl.reads(); gets != 0 || fmt.Sprint(batches) != "[1 19]" {
			t.Errorf("%d Gets and GetManys of %v, want GetManys of [1 19]", gets, batches)
		}
	})
}

// TestWorkerWritesOneBatchAtATime: items that end while a CompleteMany is in flight wait
// for it and then go in one call; no two calls are ever in flight at once.
func TestWorkerWritesOneBatchAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		idx := newCountingIndex()
		idx.completed = make(chan int) // each CompleteMany waits until the test takes its size
		pipe := newStub()
		w := newWorld(t, worldConfig{idx: idx, pipe: pipe})
		for i := range 9 {
			w.add(t, "u1", tenancy.PlanFree, fmt.Sprintf("s%d", i), "hot", t0)
		}
		items := w.dispatchAll(t, t0, 9)
		wk := w.worker(t, bridge.WorkerConfig{Workers: 9, FlushItems: 100})
		done := make(chan []bridge.ItemReport)
		go func() { done <- doAll(wk, items[:1], t0) }()
		synctest.Wait() // the first item ran; with nothing else running its write went at once
		go func() { done <- doAll(wk, items[1:], t0) }()
		synctest.Wait() // the other eight ran and wait for the write in flight
		if got := idx.batchSizes(); fmt.Sprint(got) != "[1]" {
			t.Fatalf("CompleteMany sizes %v, want one call of 1 in flight", got)
		}
		if n := <-idx.completed; n != 1 {
			t.Fatalf("first write of %d, want 1", n)
		}
		if n := <-idx.completed; n != 8 {
			t.Fatalf("second write of %d, want the 8 that waited", n)
		}
		for range 2 {
			for _, rep := range <-done {
				if rep.Status != bridge.StatusMiss || !rep.Written {
					t.Fatalf("Do = %+v", rep)
				}
			}
		}
	})
}

// TestWorkerBoundsItsPool: Do calls from many goroutines run at most Workers pipelines at
// once.
func TestWorkerBoundsItsPool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probe := &concurrencyProbe{hold: time.Second}
		w := newWorld(t, worldConfig{pipe: probe})
		for i := range 12 {
			w.add(t, fmt.Sprintf("u%d", i), tenancy.PlanFree, "s", "hot", t0)
		}
		reps := doAll(w.worker(t, bridge.WorkerConfig{Workers: 3}), w.dispatchAll(t, t0, 12), t0)
		for _, rep := range reps {
			if rep.Status != bridge.StatusHit {
				t.Fatalf("Do = %+v", rep)
			}
		}
		if peak := probe.peak.Load(); peak != 3 {
			t.Fatalf("peak concurrent pipelines = %d, want Workers = 3", peak)
		}
	})
}

// TestWorkerHandsBackLateItems: an item late on arrival, and one whose claim ends while it
// waits for a worker, are handed back unstarted with Unclaim: due at once, unchanged.
func TestWorkerHandsBackLateItems(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		idx := newCountingIndex()
		idx.unclaimed = make(chan int, 10)
		probe := newOverlapProbe(t)
		w := newWorld(t, worldConfig{idx: idx, pipe: probe, claimFor: time.Minute})
		for _, s := range []string{"a", "b", "c"} {
			w.add(t, "u1", tenancy.PlanFree, s, "hot", t0)
		}
		items := w.dispatchAll(t, t0, 3)
		clk := fakeclock.New(t0)
		wk := w.worker(t, bridge.WorkerConfig{Workers: 1, Clock: clk})

		// c sat in the queue until within the margin of its claim's end.
		rep := wk.Do(context.Background(), items[2], t0.Add(time.Minute-bridge.DefaultClaimMargin))
		if rep.Status != bridge.StatusLate || !rep.Written || !errors.Is(rep.Err, bridge.ErrClaimEnded) {
			t.Fatalf("Do(c late) = %+v, want handed back as late", rep)
		}
		recv(t, idx.unclaimed, "c's hand-back")

		// a runs until its context ends at its claim's end less the margin; b waits for the
		// only worker meanwhile, and finds its claim at its end too.
		reps := make(chan bridge.ItemReport, 2)
		go func() { reps <- wk.Do(context.Background(), items[0], t0) }()
		recv(t, probe.started, "a to start")
		go func() { reps <- wk.Do(context.Background(), items[1], t0) }()
		synctest.Wait() // b has arrived at t0 on the clock and waits for the worker
		clk.Advance(time.Minute - bridge.DefaultClaimMargin)
		got := map[bridge.ItemStatus]int{}
		for range 2 {
			rep := recv(t, reps, "a and b")
			got[rep.Status]++
		}
		if got[bridge.StatusError] != 1 || got[bridge.StatusLate] != 1 || probe.runs != 1 {
			t.Fatalf("a and b ended %v after %d runs, want a cut at its claim's end and b late", got, probe.runs)
		}
		for _, s := range []string{"b", "c"} {
			if e := get(t, w.idx, "u1", s); !e.DueAt.Equal(t0) || !e.LastRunAt.IsZero() {
				t.Errorf("%s handed back changed: %+v", s, e)
			}
		}
		if due, _ := w.idx.DueBefore(context.Background(), t0.Add(time.Minute-bridge.DefaultClaimMargin), 10); len(due) != 2 {
			t.Errorf("%d entries due after the hand-backs, want b and c", len(due))
		}
	})
}

// TestWorkerStop: Stop waits for the running item and its write, and from then on Do hands
// items back at once.
func TestWorkerStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := newGate()
		w := newWorld(t, worldConfig{pipe: gate})
		for _, s := range []string{"a", "b"} {
			w.add(t, "u1", tenancy.PlanFree, s, "hot", t0)
		}
		items := w.dispatchAll(t, t0, 2)
		wk := w.worker(t, bridge.WorkerConfig{})
		ran := make(chan bridge.ItemReport, 1)
		go func() { ran <- wk.Do(context.Background(), items[0], t0) }()
		<-gate.started
		stopped := make(chan error, 1)
		go func() { stopped <- wk.Stop(context.Background()) }()
		synctest.Wait() // Stop waits for a
		// b comes after Stop: it is handed back unrun.
		rep := wk.Do(context.Background(), items[1], t0)
		if rep.Status != bridge.StatusReleased || !errors.Is(rep.Err, bridge.ErrWorkerStopped) || !rep.Written {
			t.Fatalf("Do(b) after Stop = %+v, want ErrWorkerStopped and the claim handed back", rep)
		}
		synctest.Wait()
		if len(stopped) != 0 {
			t.Fatalf("Stop returned %v while a ran", <-stopped)
		}
		close(gate.release)
		if rep := <-ran; rep.Status != bridge.StatusHit || !rep.Written {
			t.Fatalf("Do(a) = %+v, want its hit written before Stop returns", rep)
		}
		if err := <-stopped; err != nil {
			t.Fatalf("Stop = %v, want nil", err)
		}
		if e := get(t, w.idx, "u1", "b"); !e.DueAt.Equal(t0) {
			t.Errorf("b after the hand-back: %+v", e)
		}
		if n := len(gate.started); n != 0 {
			t.Errorf("%d more runs, want b unrun", n)
		}
	})
}

// TestWorkerStopRunsOutOfTime: a Stop whose ctx ends cancels the running items with
// ErrShutdownTimeout and says so.
func TestWorkerStopRunsOutOfTime(t *testing.T) {
	gate := newGate()
	gate.honour = true
	w := newWorld(t, worldConfig{pipe: gate})
	w.add(t, "u1", tenancy.PlanFree, "a", "hot", t0)
	wk := w.worker(t, bridge.WorkerConfig{})
	ran := make(chan bridge.ItemReport)
	go func() { ran <- wk.Do(context.Background(), w.dispatchAll(t, t0, 1)[0], t0) }()
	recv(t, gate.started, "a to start")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := wk.Stop(ctx); !errors.Is(err, bridge.ErrShutdownTimeout) {
		t.Fatalf("Stop = %v, want ErrShutdownTimeout", err)
	}
	if rep := recv(t, ran, "a"); rep.Status != bridge.StatusError || !errors.Is(rep.Err, bridge.ErrShutdownTimeout) {
		t.Fatalf("Do(a) = %+v, want it cancelled by the stop", rep)
	}
}

// flakyIndex fails every CompleteMany while failing is set.
type flakyIndex struct {
	*countingIndex
	failing atomic.Bool
}

func (f *flakyIndex) CompleteMany(ctx context.Context, done []duework.Done) ([]error, error) {
	if f.failing.Load() {
		f.count("failed CompleteMany")
		return nil, errBoom
	}
	return f.countingIndex.CompleteMany(ctx, done)
}

// TestWorkerRetriesAFailedWriteWithBackoff: a completion write that fails is retried after
// a backoff that doubles, each failure logged with it, until a retry succeeds; when the
// failures outlast the claims, the Worker gives up and the item's claim is left to end.
func TestWorkerRetriesAFailedWriteWithBackoff(t *testing.T) {
	idx := &flakyIndex{countingIndex: newCountingIndex()}
	pipe := newStub()
	w := newWorld(t, worldConfig{idx: idx, pipe: pipe, claimFor: time.Minute})
	w.add(t, "u1", tenancy.PlanFree, "a", "hot", t0)
	w.add(t, "u1", tenancy.PlanFree, "b", "hot", t0)
	items := w.dispatchAll(t, t0, 2)
	clk := armingClock{Clock: fakeclock.New(t0), armed: make(chan time.Duration, 100)}
	const flushInterval = 30 * time.Millisecond
	wk := w.worker(t, bridge.WorkerConfig{Clock: clk, FlushInterval: flushInterval})
	backoff := func(d time.Duration) bool { return d <= retryCap && d != flushInterval }

	idx.failing.Store(true)
	reps := make(chan bridge.ItemReport)
	go func() { reps <- wk.Do(context.Background(), items[0], t0) }()
	for _, want := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond} {
		d := recv(t, clk.armed, "a backoff")
		for !backoff(d) { // a's claim, the flush's timer
			d = recv(t, clk.armed, "a backoff")
		}
		if d != want {
			t.Fatalf("a backoff of %v, want %v", d, want)
		}
		if want == 200*time.Millisecond {
			idx.failing.Store(false)
		}
		clk.Advance(want)
	}
	rep := recv(t, reps, "a")
	if rep.Status != bridge.StatusMiss || !rep.Written || idx.n("failed CompleteMany") != 3 {
		t.Fatalf("Do(a) = %+v after %d failures, want its miss written by the fourth try", rep, idx.n("failed CompleteMany"))
	}
	logs := w.logs.String()
	for _, line := range []string{
		`level=WARN msg="rota: write failed" call=CompleteMany items=1 retry=true backoff=50ms error="bridge: CompleteMany of 1 items: boom"`,
		`retry=true backoff=100ms`, `retry=true backoff=200ms`,
	} {
		if !strings.Contains(logs, line) {
			t.Errorf("logs lack %s:\n%s", line, logs)
		}
	}

	// Failures that outlast the claim: the Worker stops retrying once no claim is left.
	idx.failing.Store(true)
	go func() { reps <- wk.Do(context.Background(), items[1], clk.Now()) }()
	for {
		select {
		case rep = <-reps:
		case d := <-clk.armed:
			if backoff(d) {
				clk.Advance(d)
			}
			continue
		}
		break
	}
	if rep.Status != bridge.StatusError || rep.Written || !errors.Is(rep.Err, errBoom) {
		t.Fatalf("Do(b) = %+v, want the write failed for good", rep)
	}
	if end := t0.Add(time.Minute); clk.Now().Before(end.Add(-retryCap)) || !clk.Now().Before(end) {
		t.Errorf("gave up at +%v, want within a backoff of b's claim's end at +%v", clk.Now().Sub(t0), time.Minute)
	}
	if !strings.Contains(w.logs.String(), `retry=false error=`) {
		t.Errorf("no line says the write is given up:\n%s", w.logs.String())
	}
	if e := get(t, w.idx, "u1", "b"); !e.LastRunAt.IsZero() {
		t.Errorf("b was written: %+v", e)
	}
}

// retryCap is the longest backoff between two tries of a failed write.
const retryCap = 5 * time.Second

// TestWorkerStopHandsBackItemsWaitingForAWorker: an item still waiting for a worker when
// Stop is called is handed back unstarted — its claim never started, so the hand-back
// succeeds and the entry is due at once — while the running item finishes.
func TestWorkerStopHandsBackItemsWaitingForAWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := newGate()
		idx := newCountingIndex()
		w := newWorld(t, worldConfig{idx: idx, pipe: gate})
		for _, s := range []string{"a", "b"} {
			w.add(t, "u1", tenancy.PlanFree, s, "hot", t0)
		}
		items := w.dispatchAll(t, t0, 2)
		wk := w.worker(t, bridge.WorkerConfig{Workers: 1})
		reps := make(chan bridge.ItemReport, 2)
		go func() { reps <- wk.Do(context.Background(), items[0], t0) }()
		<-gate.started
		go func() { reps <- wk.Do(context.Background(), items[1], t0) }()
		synctest.Wait() // b waits for the only worker
		if n := idx.n("claims started"); n != 1 {
			t.Fatalf("%d claims started while b waits for a worker, want a's alone", n)
		}
		stopped := make(chan error, 1)
		go func() { stopped <- wk.Stop(context.Background()) }()
		rep := <-reps
		if rep.Status != bridge.StatusReleased || !errors.Is(rep.Err, bridge.ErrWorkerStopped) || !rep.Written || rep.Item != items[1] {
			t.Fatalf("the waiting item at Stop: %+v, want b handed back with ErrWorkerStopped", rep)
		}
		if e := get(t, w.idx, "u1", "b"); !e.DueAt.Equal(t0) || !e.LastRunAt.IsZero() {
			t.Fatalf("b after the hand-back: %+v, want it due at once and unchanged", e)
		}
		close(gate.release)
		if rep := <-reps; rep.Status != bridge.StatusHit || !rep.Written {
			t.Fatalf("Do(a) = %+v, want its hit written", rep)
		}
		if err := <-stopped; err != nil {
			t.Fatalf("Stop = %v, want nil", err)
		}
		if n := idx.n("claims started"); n != 1 {
			t.Fatalf("%d claims started, want a's alone", n)
		}
	})
}

// TestWorkerLogsItemsItDoesNotRunAtALimitedRate: forged items are not run and not
// silent: one Warn line says so, and a flood of them adds no more lines until the
// interval has passed, when the next line counts those held back.
func TestWorkerLogsItemsItDoesNotRunAtALimitedRate(t *testing.T) {
	w := newWorld(t, worldConfig{pipe: newStub()})
	w.add(t, "victim", tenancy.PlanFree, "feed", "hot", t0)
	clk := fakeclock.New(t0)
	wk := w.worker(t, bridge.WorkerConfig{Clock: clk})
	forged := dispatch.Item{Claim: duework.Claim{Entry: get(t, w.idx, "victim", "feed"), Token: 99, Until: t0.Add(time.Hour)}, Lane: "free"}
	for range 5 {
		if rep := wk.Do(context.Background(), forged, t0); rep.Status != bridge.StatusLostClaim {
			t.Fatalf("Do(forged) = %+v, want a lost claim", rep)
		}
	}
	const line = `level=WARN msg="rota: item not run, its claim is not current" user_id=victim work_key=feed`
	if n := strings.Count(w.logs.String(), line); n != 1 {
		t.Fatalf("%d lines for five forged items, want one:\n%s", n, w.logs.String())
	}
	clk.Advance(time.Minute)
	wk.Do(context.Background(), forged, t0.Add(time.Minute))
	if logs := w.logs.String(); strings.Count(logs, line) != 2 || !strings.Contains(logs, "suppressed=4") {
		t.Fatalf("after the interval, want a second line counting the four held back:\n%s", logs)
	}
}
