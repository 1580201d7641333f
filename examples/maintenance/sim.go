package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/rotaworks/rota/maintenance"
)

// TaskSpec is one task of the simulated incident.
type TaskSpec struct {
	Name       string
	Class      maintenance.Class
	Cadence    time.Duration
	DataSafety bool
	// LastRunAgo is how long before the start the task last ran; 0 means never.
	LastRunAgo time.Duration
	// Gate names the producer this task's soft gate waits on ("" for none); only rota's
	// scheduler has gates.
	Gate string
	// RunLen is how long a run takes; rollup's depends on its backlog instead.
	RunLen time.Duration
}

// Scenario is the incident: the tasks in registry order, the rollup backlog and the
// scheduler's knobs.
type Scenario struct {
	Tasks []TaskSpec
	// Backlog batches wait for rollup; Overflow of them can only be rolled up after
	// compact has run.
	Backlog, Overflow int
	// PerRun batches are rolled up by one rollup run, which takes BusyRun while a
	// backlog remains and IdleRun once it has drained.
	PerRun           int
	BusyRun, IdleRun time.Duration
	// Poll, MaxHold, YieldAfter and Horizon drive the simulated clock.
	Poll, MaxHold, YieldAfter, Horizon time.Duration
}

// Incident returns the backlog incident: 371 batches behind, reindex starved, verify
// weeks stale.
func Incident() Scenario {
	return Scenario{
		Tasks: []TaskSpec{
			{Name: "rollup", Cadence: 10 * time.Minute, LastRunAgo: 10 * time.Minute, Gate: "compact"},
			{Name: "compact", Cadence: 6 * time.Hour, RunLen: 30 * time.Minute},
			{Name: "reindex", Cadence: time.Hour, LastRunAgo: 5 * time.Hour, RunLen: 20 * time.Minute},
			{Name: "verify", Class: maintenance.OffLease, Cadence: time.Hour, LastRunAgo: 18 * 24 * time.Hour,
				Gate: "reindex", RunLen: 2 * time.Minute},
			{Name: "snapshot", Cadence: 24 * time.Hour, DataSafety: true, LastRunAgo: 23 * time.Hour, RunLen: 15 * time.Minute},
		},
		Backlog: 371, Overflow: 120, PerRun: 20,
		BusyRun: 45 * time.Minute, IdleRun: 3 * time.Minute,
		Poll: time.Minute, MaxHold: 2 * time.Hour, YieldAfter: 30 * time.Minute, Horizon: 48 * time.Hour,
	}
}

// Bound is the scheduler's bound on a heavy task's wait:
// YieldAfter + (number of heavy tasks) × MaxHold + one poll interval.
func (sc Scenario) Bound() time.Duration {
	n := 0
	for _, t := range sc.Tasks {
		if t.Class == maintenance.Heavy {
			n++
		}
	}
	return sc.YieldAfter + time.Duration(n)*sc.MaxHold + sc.Poll
}

// Picker names a scheduling policy.
type Picker string

const (
	// Static is a static picker: the first due task in registry order wins
	// every poll, one run at a time, no gates, no second pass.
	Static Picker = "static registry-order picker"
	// Rota is maintenance.Scheduler: staleness ratio with fairness promotion, data-safety
	// first, soft gates, the off-lease second pass and the enforced MaxHold.
	Rota Picker = "rota scheduler"
)

// Run is one run in the timeline.
type Run struct {
	Task       string
	Start, End time.Duration // since the scenario's start
	Backlog    int           // rollup backlog when the run ended
}

// Result is one simulation's outcome.
type Result struct {
	Picker Picker
	// Runs is the timeline, in start order.
	Runs []Run
	// LongestWait is, per task, the longest time from becoming due to starting (for a
	// task still waiting at the horizon, until the horizon).
	LongestWait map[string]time.Duration
	// NeverRan lists, in registry order, the tasks that never started: the starved ones.
	NeverRan []string
	// Drained reports whether the chain drained to idle — the rollup backlog empty and
	// every task run at least once — and DrainedAt when.
	Drained   bool
	DrainedAt time.Duration
}

// world is the simulated state shared by both pickers.
type world struct {
	sc          Scenario
	start       time.Time
	backlog     int
	overflow    int // overflow batches not yet compacted
	dueAt       map[string]time.Time
	firstEnd    map[string]time.Time
	backlogZero time.Time
	res         *Result
	spec        map[string]TaskSpec
}

func newWorld(sc Scenario, p Picker, start time.Time) *world {
	w := &world{sc: sc, start: start, backlog: sc.Backlog, overflow: sc.Overflow,
		dueAt: map[string]time.Time{}, firstEnd: map[string]time.Time{}, spec: map[string]TaskSpec{},
		res: &Result{Picker: p, LongestWait: map[string]time.Duration{}}}
	for _, t := range sc.Tasks {
		w.spec[t.Name] = t
		w.dueAt[t.Name] = start
		if t.LastRunAgo > 0 {
			w.dueAt[t.Name] = laterOf(start, start.Add(t.Cadence-t.LastRunAgo))
		}
	}
	return w
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// begin records a start and returns how long the run will take.
func (w *world) begin(name string, now time.Time) time.Duration {
	if wait := now.Sub(w.dueAt[name]); wait > w.res.LongestWait[name] {
		w.res.LongestWait[name] = wait
	}
	w.dueAt[name] = now.Add(w.spec[name].Cadence)
	d := w.spec[name].RunLen
	if name == "rollup" {
		d = w.sc.IdleRun
		if w.backlog > 0 {
			d = w.sc.BusyRun
		}
	}
	d = min(d, w.sc.MaxHold)
	w.res.Runs = append(w.res.Runs, Run{Task: name, Start: now.Sub(w.start), End: now.Add(d).Sub(w.start)})
	return d
}

// end applies a finished run's effect.
func (w *world) end(name string, now time.Time) {
	switch name {
	case "rollup":
		ready := w.backlog - w.overflow
		w.backlog -= min(ready, w.sc.PerRun)
		if w.backlog == 0 && w.backlogZero.IsZero() {
			w.backlogZero = now
		}
	case "compact":
		w.overflow = 0
	}
	if _, ok := w.firstEnd[name]; !ok {
		w.firstEnd[name] = now
	}
	for i := len(w.res.Runs) - 1; i >= 0; i-- {
		if w.res.Runs[i].Task == name {
			w.res.Runs[i].Backlog = w.backlog
			break
		}
	}
}

func (w *world) finish(end time.Time) Result {
	drained := w.backlogZero
	ok := !drained.IsZero()
	for _, t := range w.sc.Tasks {
		if wait := end.Sub(w.dueAt[t.Name]); w.dueAt[t.Name].Before(end) && wait > w.res.LongestWait[t.Name] {
			w.res.LongestWait[t.Name] = wait
		}
		fe, ran := w.firstEnd[t.Name]
		if !ran {
			ok = false
			w.res.NeverRan = append(w.res.NeverRan, t.Name)
			continue
		}
		drained = laterOf(drained, fe)
	}
	w.res.Drained = ok
	if ok {
		w.res.DrainedAt = drained.Sub(w.start)
	}
	return *w.res
}

// Simulate runs the scenario under picker p on a simulated clock: a poll every Poll and
// as soon as a run ends.
func Simulate(sc Scenario, p Picker) (Result, error) {
	start := time.Date(2026, 6, 20, 0, 0, 0, 0, time.UTC)
	if p == Rota {
		return simulateRota(sc, start)
	}
	return simulateStatic(sc, start), nil
}

// clock steps from tick to tick, stopping early at the next run end.
type clock struct {
	now, nextTick time.Time
	poll          time.Duration
}

func (c *clock) advance(running map[string]time.Time) {
	if !c.nextTick.After(c.now) {
		c.nextTick = c.nextTick.Add(c.poll)
	}
	next := c.nextTick
	for _, end := range running {
		if end.Before(next) {
			next = end
		}
	}
	c.now = next
}

func simulateStatic(sc Scenario, start time.Time) Result {
	w := newWorld(sc, Static, start)
	end := start.Add(sc.Horizon)
	c := &clock{now: start, nextTick: start, poll: sc.Poll}
	running := map[string]time.Time{}
	for c.now.Before(end) {
		for _, t := range sc.Tasks {
			if e, ok := running[t.Name]; ok && !c.now.Before(e) {
				w.end(t.Name, c.now)
				delete(running, t.Name)
			}
		}
		if len(running) == 0 {
			for _, t := range sc.Tasks {
				if !c.now.Before(w.dueAt[t.Name]) {
					running[t.Name] = c.now.Add(w.begin(t.Name, c.now))
					break
				}
			}
		}
		c.advance(running)
	}
	return w.finish(end)
}

func simulateRota(sc Scenario, start time.Time) (Result, error) {
	ctx := context.Background()
	w := newWorld(sc, Rota, start)
	store := maintenance.NewMemoryStateStore()
	tasks := make([]maintenance.Task, len(sc.Tasks))
	for i, t := range sc.Tasks {
		tasks[i] = maintenance.Task{Name: t.Name, Class: t.Class, Cadence: t.Cadence, DataSafety: t.DataSafety,
			Run: func(context.Context) error { return nil }}
		if t.Gate != "" {
			tasks[i].Gates = []maintenance.Gate{{Producer: t.Gate}}
		}
		if t.LastRunAgo > 0 {
			if err := store.Save(ctx, 0, maintenance.TaskState{Name: t.Name, LastRunAt: start.Add(-t.LastRunAgo)}); err != nil {
				return Result{}, err
			}
		}
	}
	s, err := maintenance.NewScheduler(tasks, maintenance.Config{
		StateStore: store, Lease: maintenance.NewMemoryLease(sc.MaxHold), Holder: "daemon",
		MaxHold: sc.MaxHold, LeaseTTL: 5 * sc.Poll, YieldAfter: sc.YieldAfter, PollInterval: sc.Poll,
		Logger: slog.New(slog.DiscardHandler), // the simulation reports its own results
	})
	if err != nil {
		return Result{}, err
	}
	end := start.Add(sc.Horizon)
	c := &clock{now: start, nextTick: start, poll: sc.Poll}
	running := map[string]time.Time{}
	for c.now.Before(end) {
		for _, t := range sc.Tasks {
			if e, ok := running[t.Name]; ok && !c.now.Before(e) {
				w.end(t.Name, c.now)
				delete(running, t.Name)
				if err := s.Complete(ctx, t.Name, nil, c.now); err != nil {
					return Result{}, fmt.Errorf("complete %s: %w", t.Name, err)
				}
			}
		}
		if len(running) > 0 { // keeps the runs' claims, and the heavy run's lease
			if err := s.Renew(ctx, c.now); err != nil {
				return Result{}, fmt.Errorf("renew: %w", err)
			}
		}
		res, err := s.Poll(ctx, c.now)
		if err != nil {
			return Result{}, err
		}
		for _, d := range res.Dispatched() {
			running[d.Task.Name] = c.now.Add(w.begin(d.Task.Name, c.now))
		}
		c.advance(running)
	}
	return w.finish(end), nil
}
