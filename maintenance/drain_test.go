package maintenance_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rotaworks/rota/maintenance"
	"pgregory.net/rapid"
)

// simTask is one heavy task of a simulated fleet.
type simTask struct {
	name       string
	cadence    time.Duration
	runLen     time.Duration // how long a run would take; cut at MaxHold
	dataSafety bool
	lastRun    time.Time // zero: never ran
}

// simConfig is one simulation's knobs.
type simConfig struct {
	poll, maxHold, yieldAfter, horizon time.Duration
}

// bound is the design's bound on a heavy task's wait.
func (c simConfig) bound(n int) time.Duration {
	return c.yieldAfter + time.Duration(n)*c.maxHold + c.poll
}

// waitTracker records, per task, the longest time from becoming due to starting.
type waitTracker struct {
	start   time.Time
	dueAt   map[string]time.Time
	longest map[string]time.Duration
}

func newWaitTracker(start time.Time, fleet []simTask) *waitTracker {
	w := &waitTracker{start: start, dueAt: map[string]time.Time{}, longest: map[string]time.Duration{}}
	for _, t := range fleet {
		w.ranAt(t, t.lastRun)
	}
	return w
}

func (w *waitTracker) ranAt(t simTask, at time.Time) {
	due := w.start
	if !at.IsZero() && at.Add(t.cadence).After(w.start) {
		due = at.Add(t.cadence)
	}
	w.dueAt[t.name] = due
}

func (w *waitTracker) started(t simTask, now time.Time) {
	if wait := now.Sub(w.dueAt[t.name]); wait > w.longest[t.name] {
		w.longest[t.name] = wait
	}
	w.ranAt(t, now)
}

// finish counts the waits of tasks still waiting at the end.
func (w *waitTracker) finish(fleet []simTask, end time.Time) {
	for _, t := range fleet {
		if due := w.dueAt[t.name]; due.Before(end) && end.Sub(due) > w.longest[t.name] {
			w.longest[t.name] = end.Sub(due)
		}
	}
}

func (w *waitTracker) worst() (string, time.Duration) {
	name, worst := "", time.Duration(0)
	for _, n := range slices.Sorted(mapKeys(w.longest)) {
		if w.longest[n] > worst {
			name, worst = n, w.longest[n]
		}
	}
	return name, worst
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// simulateScheduler runs the fleet under rota's Scheduler on a simulated clock: a poll
// every poll interval and as soon as a run ends, the lease renewed at every tick, each
// run cut at MaxHold.
func simulateScheduler(t testing.TB, fleet []simTask, c simConfig) *waitTracker {
	t.Helper()
	start := t0
	store := maintenance.NewMemoryStateStore()
	tasks := make([]maintenance.Task, len(fleet))
	byName := map[string]simTask{}
	for i, ft := range fleet {
		tasks[i] = maintenance.Task{Name: ft.name, Class: maintenance.Heavy, Cadence: ft.cadence, DataSafety: ft.dataSafety, Run: noop}
		byName[ft.name] = ft
		if !ft.lastRun.IsZero() {
			if err := store.Save(bg, 0, maintenance.TaskState{Name: ft.name, LastRunAt: ft.lastRun}); err != nil {
				t.Fatal(err)
			}
		}
	}
	s, err := maintenance.NewScheduler(tasks, maintenance.Config{
		StateStore: store, Lease: maintenance.NewMemoryLease(c.maxHold), MaxHold: c.maxHold,
		LeaseTTL: 2 * c.poll, YieldAfter: c.yieldAfter, PollInterval: c.poll, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	w := newWaitTracker(start, fleet)
	end := start.Add(c.horizon)
	now, nextTick := start, start
	running, runEnd := "", time.Time{}
	for now.Before(end) {
		if running != "" && !now.Before(runEnd) {
			if err := s.Complete(bg, running, nil, now); err != nil {
				t.Fatal(err)
			}
			running = ""
		} else if running != "" {
			if err := s.Renew(bg, now); err != nil {
				t.Fatalf("renew at %v: %v", now.Sub(start), err)
			}
		}
		if running == "" {
			res, err := s.Poll(bg, now)
			if err != nil {
				t.Fatal(err)
			}
			if res.Winner != nil {
				ft := byName[res.Winner.Task.Name]
				w.started(ft, now)
				running, runEnd = ft.name, now.Add(min(ft.runLen, c.maxHold))
			}
		} else if _, err := s.Poll(bg, now); err != nil { // keeps deferral streaks current
			t.Fatal(err)
		}
		if !nextTick.After(now) {
			nextTick = nextTick.Add(c.poll)
		}
		now = nextTick
		if running != "" && runEnd.Before(now) {
			now = runEnd
		}
	}
	w.finish(fleet, end)
	return w
}

// simulatePicker runs the fleet under a naive picker on the same clock: one exclusive
// run at a time, picked at every tick and as soon as a run ends.
func simulatePicker(fleet []simTask, c simConfig, pick func(due []maintenance.Candidate, now time.Time) string) *waitTracker {
	start := t0
	w := newWaitTracker(start, fleet)
	last := map[string]time.Time{}
	for _, ft := range fleet {
		last[ft.name] = ft.lastRun
	}
	end := start.Add(c.horizon)
	now, nextTick := start, start
	running, runEnd := "", time.Time{}
	for now.Before(end) {
		if running != "" && !now.Before(runEnd) {
			running = ""
		}
		if running == "" {
			var due []maintenance.Candidate
			for _, ft := range fleet {
				if last[ft.name].IsZero() || now.Sub(last[ft.name]) >= ft.cadence {
					due = append(due, maintenance.Candidate{
						Task:      maintenance.Task{Name: ft.name, Cadence: ft.cadence, DataSafety: ft.dataSafety},
						LastRunAt: last[ft.name]})
				}
			}
			if name := pick(due, now); name != "" {
				for _, ft := range fleet {
					if ft.name == name {
						w.started(ft, now)
						last[name] = now
						running, runEnd = name, now.Add(min(ft.runLen, c.maxHold))
					}
				}
			}
		}
		if !nextTick.After(now) {
			nextTick = nextTick.Add(c.poll)
		}
		now = nextTick
		if running != "" && runEnd.Before(now) {
			now = runEnd
		}
	}
	w.finish(fleet, end)
	return w
}

// stalenessOnly is the plain staleness picker: Pick without fairness promotion.
func stalenessOnly(due []maintenance.Candidate, now time.Time) string {
	if sel := maintenance.Pick(maintenance.PickInput{Candidates: due, Now: now}); sel.Winner != nil {
		return sel.Winner.Task.Name
	}
	return ""
}

// registryOrder is the static picker: the first due task in the registry.
func registryOrder(due []maintenance.Candidate, _ time.Time) string {
	if len(due) == 0 {
		return ""
	}
	return due[0].Task.Name
}

// TestBoundedDrain: in a random fleet of heavy tasks with cadences from 1 minute to 7
// days and runs up to and past MaxHold, no due heavy task waits longer than
// YieldAfter + (number of heavy tasks) × MaxHold + one poll interval under the
// Scheduler. Data-safety tasks, which win outright, get cadences longer than the bound.
// The naive pickers' long waits over the same fleets are logged.
func TestBoundedDrain(t *testing.T) {
	c := simConfig{poll: 15 * time.Minute, maxHold: 2 * time.Hour, yieldAfter: 30 * time.Minute, horizon: 2 * day}
	var worstStatic, worstStaleness time.Duration
	var worstStaticFleet, worstStalenessFleet string
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 6).Draw(rt, "tasks")
		bound := c.bound(n)
		fleet := make([]simTask, n)
		for i := range fleet {
			ft := simTask{name: fmt.Sprintf("h%d", i)}
			ft.cadence = time.Duration(rapid.Int64Range(int64(time.Minute), int64(7*day)).Draw(rt, "cadence"))
			ft.runLen = time.Duration(rapid.Int64Range(int64(time.Minute), int64(3*c.maxHold/2)).Draw(rt, "runLen"))
			if rapid.IntRange(0, 5).Draw(rt, "dataSafety") == 0 {
				ft.dataSafety = true
				ft.cadence = bound + time.Duration(rapid.Int64Range(int64(time.Minute), int64(7*day)).Draw(rt, "extra"))
			}
			if !rapid.Bool().Draw(rt, "neverRan") {
				ft.lastRun = t0.Add(-time.Duration(rapid.Int64Range(0, int64(2*ft.cadence)).Draw(rt, "ago")))
			}
			fleet[i] = ft
		}
		w := simulateScheduler(t, fleet, c)
		for _, ft := range fleet {
			if got := w.longest[ft.name]; got > bound {
				rt.Fatalf("rule: no due heavy task waits longer than YieldAfter + %d × MaxHold + poll = %v: %s waited %v in %+v",
					n, bound, ft.name, got, fleet)
			}
		}
		if name, wait := simulatePicker(fleet, c, registryOrder).worst(); wait > bound && wait > worstStatic {
			worstStatic, worstStaticFleet = wait, fmt.Sprintf("%s in %d tasks (bound %v)", name, n, bound)
		}
		if name, wait := simulatePicker(fleet, c, stalenessOnly).worst(); wait > bound && wait > worstStaleness {
			worstStaleness, worstStalenessFleet = wait, fmt.Sprintf("%s in %d tasks (bound %v)", name, n, bound)
		}
	})
	t.Logf("registry-order picker: longest wait past the bound %v: %s", worstStatic, worstStaticFleet)
	t.Logf("staleness ratio without promotion: longest wait past the bound %v: %s", worstStaleness, worstStalenessFleet)
}

// TestNaivePickersStarve pins the starvation shape: a task with a 10 min cadence and
// 45 min runs re-wins every release under both naive pickers, and a 24 h task waits far
// past the bound, which the Scheduler keeps.
func TestNaivePickersStarve(t *testing.T) {
	c := simConfig{poll: time.Minute, maxHold: 2 * time.Hour, yieldAfter: 30 * time.Minute, horizon: 7 * day}
	fleet := []simTask{
		{name: "summary", cadence: 10 * time.Minute, runLen: 45 * time.Minute, lastRun: t0.Add(-10 * time.Minute)},
		{name: "dream", cadence: time.Hour, runLen: 20 * time.Minute, lastRun: t0.Add(-5 * time.Hour)},
		{name: "nightly-compact", cadence: day, runLen: 30 * time.Minute, lastRun: t0.Add(-23 * time.Hour)},
	}
	bound := c.bound(len(fleet))
	rota := simulateScheduler(t, fleet, c)
	for name, wait := range rota.longest {
		if wait > bound {
			t.Errorf("rule: the Scheduler bounds every wait by %v: %s waited %v", bound, name, wait)
		}
	}
	static := simulatePicker(fleet, c, registryOrder)
	staleness := simulatePicker(fleet, c, stalenessOnly)
	t.Logf("longest waits  scheduler: %v  registry order: %v  staleness only: %v", rota.longest, static.longest, staleness.longest)
	if static.longest["dream"] < 6*day {
		t.Errorf("registry order: dream should starve behind summary for the whole week: %v", static.longest["dream"])
	}
	if staleness.longest["nightly-compact"] < 3*day {
		t.Errorf("staleness only: nightly-compact should wait days (ratio must pass summary's 4.5): %v", staleness.longest["nightly-compact"])
	}
}
