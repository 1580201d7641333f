package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// steppingClock advances by one second at every Now, so the Runner's durations are
// exact: a Cycle reads it when it starts, after the dispatch and when its last item ends.
type steppingClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

func (c *steppingClock) NewTicker(time.Duration) (<-chan time.Time, func()) {
	panic("steppingClock: only Cycle is driven by it")
}

// failingIndex fails DueHeads while fail is set.
type failingIndex struct {
	duework.Index
	fail atomic.Bool
}

var errDiskOnFire = errors.New("disk on fire")

func (x *failingIndex) DueHeads(ctx context.Context, now time.Time, perUser int) ([]duework.Head, error) {
	if x.fail.Load() {
		return nil, errDiskOnFire
	}
	return x.Index.DueHeads(ctx, now, perUser)
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

// TestRunnerObserverScriptedScenario drives five cycles and checks every field of every
// report the observer gets, the noisy-neighbour alarm included: it fires in the cycle in
// which a user's shed streak reaches ShedAlarmAfter, names the user in its lane with the
// lane's crowders, and not again while the streak goes on.
func TestRunnerObserverScriptedScenario(t *testing.T) {
	pipe := newStub()
	idx := &failingIndex{Index: newIndex()}
	w := newWorld(t, worldConfig{idx: idx, pipe: pipe, global: 100, lanes: []dispatch.LaneCapacity{
		{Lane: "pro", PerUserLimit: 2, PerCycleLimit: 10},
		{Lane: "free", PerUserLimit: 1, PerCycleLimit: 1},
	}})
	w.b.RetryDelay = time.Hour
	for _, k := range []string{"n1", "n2", "n3", "n4", "n5"} {
		w.add(t, "noisy", tenancy.PlanPro, k, "hot", t0)
	}
	if err := w.wl.Remove(context.Background(), mustTC(t, "noisy"), "n4"); err != nil {
		t.Fatal(err)
	}
	w.add(t, "alice", tenancy.PlanFree, "a1", "hot", t0)
	w.add(t, "bob", tenancy.PlanFree, "b1", "hot", t0.Add(time.Second))
	w.add(t, "dan", tenancy.PlanFree, "d1", "hot", t0.Add(2*time.Second))
	w.add(t, "carol", tenancy.PlanPlus, "c1", "hot", t0) // no plus lane: unrouted
	for k, r := range map[string]bridge.Result{"n1": hit, "n2": miss, "a1": hit, "b1": miss, "n5": hit, "d1": hit} {
		pipe.results[k] = r
	}
	pipe.errs["n3"] = errBoom

	rec := &cycleRecorder{}
	r := w.runner(t, bridge.RunnerConfig{Workers: 2, Clock: &steppingClock{t: t0}, Observer: rec, ShedAlarmAfter: 2})
	min := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
	returned := make([]bridge.CycleReport, 5)
	for i := range 5 {
		idx.fail.Store(i == 2)
		returned[i], _ = r.Cycle(context.Background(), min(i+1))
	}

	type want struct {
		items                                                           []string
		dispatched, hits, misses, removed, errors, lostClaims, released int
		shed                                                            []string
		unrouted                                                        []string
		lanes                                                           []dispatch.LaneReport
		dispatchErr                                                     error
		alarms                                                          []bridge.ShedAlarm
	}
	lanes := func(pro, free dispatch.LaneReport) []dispatch.LaneReport {
		pro.Lane, free.Lane = "pro", "free"
		return []dispatch.LaneReport{pro, free}
	}
	wants := []want{
		{ // alice goes first in free (earliest due); bob, dan and noisy are shed, carol unrouted
			items:      []string{"pro:noisy/n1=hit", "pro:noisy/n2=miss", "free:alice/a1=hit"},
			dispatched: 3, hits: 2, misses: 1,
			shed: []string{"bob", "carol", "dan", "noisy"}, unrouted: []string{"carol"},
			lanes: lanes(dispatch.LaneReport{Users: 1, Dispatched: 2, Shed: 1}, dispatch.LaneReport{Users: 3, Dispatched: 1, Shed: 2}),
		},
		{ // bob's turn; dan, carol and noisy are shed for the second cycle running: the alarm
			items:      []string{"pro:noisy/n3=error", "pro:noisy/n4=removed", "free:bob/b1=miss"},
			dispatched: 3, misses: 1, removed: 1, errors: 1,
			shed: []string{"carol", "dan", "noisy"}, unrouted: []string{"carol"},
			lanes: lanes(dispatch.LaneReport{Users: 1, Dispatched: 2, Shed: 1}, dispatch.LaneReport{Users: 2, Dispatched: 1, Shed: 1}),
			alarms: []bridge.ShedAlarm{
				{Lane: "pro", Waiting: []bridge.UserItems{{UserID: "noisy", Items: 2}}, Crowding: []bridge.UserItems{{UserID: "noisy", Items: 2}}},
				{Lane: "free", Waiting: []bridge.UserItems{{UserID: "dan"}}, Crowding: []bridge.UserItems{{UserID: "bob", Items: 1}}},
				{Waiting: []bridge.UserItems{{UserID: "carol"}}},
			},
		},
		{dispatchErr: errDiskOnFire}, // a failed dispatch: the streaks neither grow nor end
		{ // noisy and dan are served in full; carol's streak goes on without a new alarm
			items:      []string{"pro:noisy/n5=hit", "free:dan/d1=hit"},
			dispatched: 2, hits: 2,
			shed: []string{"carol"}, unrouted: []string{"carol"},
			lanes: lanes(dispatch.LaneReport{Users: 1, Dispatched: 1}, dispatch.LaneReport{Users: 1, Dispatched: 1}),
		},
		{ // nothing routable is due
			shed: []string{"carol"}, unrouted: []string{"carol"},
			lanes: lanes(dispatch.LaneReport{}, dispatch.LaneReport{}),
		},
	}

	if len(rec.reps) != len(wants) {
		t.Fatalf("observer saw %d cycles, want %d", len(rec.reps), len(wants))
	}
	for i, w := range wants {
		got := rec.reps[i]
		name := fmt.Sprintf("cycle %d", i+1)
		if diff := cmp.Diff(returned[i], got, cmp.Comparer(func(a, b error) bool { return errors.Is(a, b) || errors.Is(b, a) })); diff != "" {
			t.Errorf("%s: observed report differs from Cycle's (-returned +observed):\n%s", name, diff)
		}
		if !got.Now.Equal(min(i + 1)) {
			t.Errorf("%s: Now %v, want %v", name, got.Now, min(i+1))
		}
		if diff := cmp.Diff(w.items, itemLines(got), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: items (-want +got):\n%s", name, diff)
		}
		for _, it := range got.Items {
			e := it.Item.Claim.Entry
			switch it.Status {
			case bridge.StatusHit:
				if !it.Next.DueAt.Equal(got.Now.Add(5*time.Minute)) || it.Err != nil {
					t.Errorf("%s: hit %s: next %v, err %v", name, e.WorkKey, it.Next.DueAt, it.Err)
				}
			case bridge.StatusMiss:
				if it.Next.MissStreak != 1 || it.Err != nil {
					t.Errorf("%s: miss %s: next %+v, err %v", name, e.WorkKey, it.Next, it.Err)
				}
			case bridge.StatusRemoved:
				if it.Next != (duework.Entry{}) || it.Err != nil {
					t.Errorf("%s: removed %s: next %+v, err %v", name, e.WorkKey, it.Next, it.Err)
				}
			case bridge.StatusError:
				if !errors.Is(it.Err, errBoom) || !it.Next.DueAt.Equal(got.Now.Add(time.Hour)) {
					t.Errorf("%s: error %s: next %v, err %v", name, e.WorkKey, it.Next.DueAt, it.Err)
				}
			}
		}
		gotCounts := [...]int{got.Dispatched, got.Hits, got.Misses, got.Removed, got.Errors, got.LostClaims, got.Released}
		wantCounts := [...]int{w.dispatched, w.hits, w.misses, w.removed, w.errors, w.lostClaims, w.released}
		if gotCounts != wantCounts {
			t.Errorf("%s: counts [dispatched hits misses removed errors lost released] = %v, want %v", name, gotCounts, wantCounts)
		}
		if diff := cmp.Diff(w.shed, got.Shed, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: shed (-want +got):\n%s", name, diff)
		}
		var unrouted []string
		for _, u := range got.Unrouted {
			unrouted = append(unrouted, u.UserID)
			if !errors.Is(u.Err, dispatch.ErrUnknownLane) {
				t.Errorf("%s: unrouted %s: reason %v", name, u.UserID, u.Err)
			}
		}
		if diff := cmp.Diff(w.unrouted, unrouted, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: unrouted (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff(w.lanes, got.Lanes, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: lanes (-want +got):\n%s", name, diff)
		}
		if !errors.Is(got.DispatchErr, w.dispatchErr) || (w.dispatchErr == nil) != (got.DispatchErr == nil) {
			t.Errorf("%s: DispatchErr %v, want %v", name, got.DispatchErr, w.dispatchErr)
		}
		if diff := cmp.Diff(w.alarms, got.ShedAlarms, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: alarms (-want +got):\n%s", name, diff)
		}
		if got.DispatchDuration != time.Second || got.Duration != 2*time.Second {
			t.Errorf("%s: durations %v / %v, want 1s / 2s on the stepping clock", name, got.DispatchDuration, got.Duration)
		}
	}

	logs := w.logs.String()
	for _, s := range []string{
		`level=WARN msg="rota: noisy neighbour" lane=pro shed_cycles=2 waiting=[noisy:2] crowding=[noisy:2]`,
		`level=WARN msg="rota: noisy neighbour" lane=free shed_cycles=2 waiting=[dan:0] crowding=[bob:1]`,
		`level=WARN msg="rota: noisy neighbour" lane="" shed_cycles=2 waiting=[carol:0] crowding=[]`,
		`shed=3 unrouted=1 dispatch_lost_claims=0 shed_alarms=3 dispatch_duration=1s duration=2s`,
	} {
		if !strings.Contains(logs, s) {
			t.Errorf("logs lack %q:\n%s", s, logs)
		}
	}
	if n := strings.Count(logs, "rota: noisy neighbour"); n != 3 {
		t.Errorf("%d alarm lines, want 3:\n%s", n, logs)
	}
	if n := strings.Count(logs, "rota: cycle"); n != 5 {
		t.Errorf("%d cycle lines, want 5", n)
	}
}

// shedEveryCycle runs cycles in which the one user of a one-lane world is shed every time
// (a backlog deeper than its cap) and returns the numbers of the cycles with an alarm.
func shedEveryCycle(t *testing.T, cycles int, cfg bridge.RunnerConfig) []int {
	t.Helper()
	pipe := newStub()
	w := newWorld(t, worldConfig{pipe: pipe, lanes: []dispatch.LaneCapacity{{Lane: "free", PerUserLimit: 1, PerCycleLimit: 1}}})
	for i := range cycles + 1 {
		k := fmt.Sprintf("k%02d", i)
		w.add(t, "deep", tenancy.PlanFree, k, "hot", t0)
		pipe.results[k] = miss
	}
	r := w.runner(t, cfg)
	var fired []int
	for i := range cycles {
		rep, err := r.Cycle(context.Background(), t0.Add(time.Duration(i+1)*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Shed) != 1 {
			t.Fatalf("cycle %d: shed %v, want the deep user", i+1, rep.Shed)
		}
		if len(rep.ShedAlarms) > 0 {
			fired = append(fired, i+1)
		}
	}
	return fired
}

func TestRunnerShedAlarmDefaultThreshold(t *testing.T) {
	if diff := cmp.Diff([]int{bridge.DefaultShedAlarmAfter}, shedEveryCycle(t, bridge.DefaultShedAlarmAfter+3, bridge.RunnerConfig{})); diff != "" {
		t.Errorf("with ShedAlarmAfter zero the alarm fires once, in cycle DefaultShedAlarmAfter (-want +got):\n%s", diff)
	}
}

func TestRunnerShedAlarmOff(t *testing.T) {
	if got := shedEveryCycle(t, bridge.DefaultShedAlarmAfter+3, bridge.RunnerConfig{ShedAlarmAfter: -1}); got != nil {
		t.Errorf("a negative ShedAlarmAfter still fired in cycles %v", got)
	}
}

func TestShedAlarmNamesAtMostMaxCrowding(t *testing.T) {
	// Five users get 3, 2, 2, 1 and 1 items of one lane; u1 has a fourth entry due, so it
	// is shed, and with ShedAlarmAfter 1 it is named at once, as waiting and crowding.
	pipe := newStub()
	w := newWorld(t, worldConfig{pipe: pipe, lanes: []dispatch.LaneCapacity{{Lane: "free", PerUserLimit: 3, PerCycleLimit: 9}}})
	for u, n := range map[string]int{"u1": 4, "u2": 2, "u3": 2, "u4": 1, "u5": 1} {
		for i := range n {
			w.add(t, u, tenancy.PlanFree, fmt.Sprintf("k%d", i), "hot", t0.Add(-time.Hour))
		}
	}
	r := w.runner(t, bridge.RunnerConfig{ShedAlarmAfter: 1})
	rep, err := r.Cycle(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	want := []bridge.ShedAlarm{{
		Lane:     "free",
		Waiting:  []bridge.UserItems{{UserID: "u1", Items: 3}},
		Crowding: []bridge.UserItems{{UserID: "u1", Items: 3}, {UserID: "u2", Items: 2}, {UserID: "u3", Items: 2}},
	}}
	if diff := cmp.Diff(want, rep.ShedAlarms); diff != "" {
		t.Errorf("alarm: the top MaxCrowding users by items, ties by UserID (-want +got):\n%s", diff)
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
		r := w.runner(t, bridge.RunnerConfig{Interval: time.Minute, Observer: rec})
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			time.Sleep(2*time.Minute + time.Second)
			cancel()
		}()
		if err := r.Run(ctx); !errors.Is(err, context.Canceled) {
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
