package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/fakeclock"
	"github.com/rotaworks/rota/tenancy"
)

// clockedIndex advances a fake clock by one second at every Claim, so a dispatch takes a
// known time on it.
type clockedIndex struct {
	duework.Index
	clk *fakeclock.Clock
}

func (x clockedIndex) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	x.clk.Advance(time.Second)
	return x.Index.Claim(ctx, keys, now, until)
}

// cycleRecorder is an in-memory bridge.Observer.
type cycleRecorder struct {
	mu   sync.Mutex
	reps []bridge.CycleReport
}

func (r *cycleRecorder) ObserveCycle(rep bridge.CycleReport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reps = append(r.reps, rep)
}

// itemLines renders a report's items as "lane:user/key=status".
func itemLines(rep bridge.CycleReport) []string {
	var out []string
	for _, it := range rep.Items {
		e := it.Item.Claim.Entry
		out = append(out, fmt.Sprintf("%s:%s/%s=%s", it.Item.Lane, e.UserID, e.WorkKey, it.Status))
	}
	return out
}

// TestObserverGetsTheCycleReport drives three cycles and checks that the Observer gets,
// once per cycle, exactly the report Cycle returns, with its durations on the Runner's
// clock (a Claim takes 1s and a run 3s on it), and that Observers fans one report out to each of several.
func TestObserverGetsTheCycleReport(t *testing.T) {
	pipe := newStub()
	clk := fakeclock.New(t0)
	timed := bridge.PipelineFunc(func(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
		clk.Advance(3 * time.Second)
		return pipe.Run(ctx, tc, e)
	})
	w := newWorld(t, worldConfig{idx: clockedIndex{newIndex(), clk}, pipe: timed, lanes: []dispatch.LaneCapacity{
		{Lane: "pro", PerUserLimit: 2, PerCycleLimit: 10},
		{Lane: "free", PerUserLimit: 1, PerCycleLimit: 10},
	}})
	for _, k := range []string{"n1", "n2", "n3"} {
		w.add(t, "noisy", "pro", k, "hot", t0)
	}
	w.add(t, "alice", tenancy.PlanFree, "a1", "hot", t0)
	w.add(t, "carol", "plus", "c1", "hot", t0) // no plus lane: unrouted
	pipe.results["n1"], pipe.results["a1"] = hit, hit
	pipe.errs["n2"] = errBoom

	w.b.Retry = everyMinute // n2 is dispatched again in every cycle
	first, second := &cycleRecorder{}, &cycleRecorder{}
	r := w.runner(t, bridge.RunnerConfig{Workers: 1, Clock: clk, Observer: bridge.Observers(first, nil, second)})
	var returned []bridge.CycleReport
	for i := range 3 {
		rep, _ := r.Cycle(context.Background(), t0.Add(time.Duration(i)*time.Minute))
		returned = append(returned, rep)
	}
	sameErr := cmp.Comparer(func(a, b error) bool { return errors.Is(a, b) || errors.Is(b, a) })
	for _, rec := range []*cycleRecorder{first, second} {
		if diff := cmp.Diff(returned, rec.reps, sameErr); diff != "" {
			t.Errorf("observed reports differ from Cycle's (-returned +observed):\n%s", diff)
		}
	}
	rep := returned[0]
	if diff := cmp.Diff([]string{"pro:noisy/n1=hit", "pro:noisy/n2=error", "free:alice/a1=hit"}, itemLines(rep)); diff != "" {
		t.Errorf("first cycle's items (-want +got):\n%s", diff)
	}
	got := [...]int{rep.Dispatched, rep.Hits, rep.Misses, rep.Errors, len(rep.Unrouted), len(rep.Lanes)}
	if got != [...]int{3, 2, 0, 1, 1, 2} || !errors.Is(rep.Err(), errBoom) {
		t.Errorf("first cycle: [dispatched hits misses errors unrouted lanes] = %v, err %v", got, rep.Err())
	}
	for i, rep := range returned {
		if want := time.Second + time.Duration(rep.Dispatched)*3*time.Second; rep.DispatchDuration != time.Second || rep.Duration != want {
			t.Errorf("cycle %d: durations %v / %v, want 1s / %v on the Runner's clock", i, rep.DispatchDuration, rep.Duration, want)
		}
	}
}

func TestObserversSkipsNil(t *testing.T) {
	var n int
	count := observerFunc(func(bridge.CycleReport) { n++ })
	bridge.Observers().ObserveCycle(bridge.CycleReport{})
	bridge.Observers(nil, count, nil, count).ObserveCycle(bridge.CycleReport{})
	if n != 2 {
		t.Fatalf("Observers told %d observers, want 2", n)
	}
}

// TestRunLogsItsStart: the start-up line names the Interval and whether it is the default.
func TestRunLogsItsStart(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		want     string
	}{
		{0, "interval=1m0s interval_default=true"},
		{45 * time.Second, "interval=45s interval_default=false"},
	} {
		w := newWorld(t, worldConfig{pipe: newStub()})
		r := w.runner(t, bridge.RunnerConfig{Interval: tc.interval, Clock: fakeclock.New(t0)})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := r.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if logs := w.logs.String(); !strings.Contains(logs, `level=INFO msg="rota: runner started" `+tc.want) {
			t.Errorf("Interval %v: start-up line lacks %q:\n%s", tc.interval, tc.want, logs)
		}
	}
}

// TestRunReportsOverlappingCycles runs the loop with a pipeline slower than the interval,
// so cycles overlap and report from their own goroutines (the race detector watches the
// observer), each with its duration on the Runner's clock.
func TestRunReportsOverlappingCycles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		pipe := bridge.PipelineFunc(func(context.Context, tenancy.Context, tenancy.WatchlistEntry) (bridge.Result, error) {
			time.Sleep(90 * time.Second) // virtual time
			return hit, nil
		})
		w := newWorld(t, worldConfig{pipe: pipe})
		for i := range 3 {
			w.add(t, fmt.Sprintf("u%d", i), tenancy.PlanFree, "a", "hot", start.Add(time.Duration(i)*time.Minute))
		}
		rec := &cycleRecorder{}
		r := w.runner(t, bridge.RunnerConfig{Interval: time.Minute, Observer: rec, ShutdownTimeout: 2 * time.Minute})
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			time.Sleep(2*time.Minute + time.Second)
			cancel()
		}()
		if err := r.Run(ctx); err != nil {
			t.Fatalf("Run = %v", err)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.reps) != 3 {
			t.Fatalf("observer saw %d cycles, want 3", len(rec.reps))
		}
		for _, rep := range rec.reps {
			if rep.Dispatched != 1 || rep.Hits != 1 || rep.Duration != 90*time.Second || rep.DispatchDuration != 0 {
				t.Errorf("cycle at %v: dispatched %d, hits %d, durations %v / %v; want 1, 1, 90s / 0s",
					rep.Now.Sub(start), rep.Dispatched, rep.Hits, rep.DispatchDuration, rep.Duration)
			}
		}
	})
}
