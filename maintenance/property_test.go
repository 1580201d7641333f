package maintenance_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rotaworks/rota/maintenance"
	"pgregory.net/rapid"
)

const yieldAfter = 30 * time.Minute

// genRegistry draws up to 8 tasks of either class with cadences from 1 minute to 7 days
// (or none, with a Due func), rare data-safety and bootstrap flags and random
// dependencies on earlier or later tasks.
func genRegistry(t *rapid.T) []maintenance.Task {
	n := rapid.IntRange(0, 8).Draw(t, "tasks")
	tasks := make([]maintenance.Task, n)
	for i := range tasks {
		task := maintenance.Task{Name: fmt.Sprintf("t%d", i), Run: noop}
		if rapid.Bool().Draw(t, "offLease") {
			task.Class = maintenance.OffLease
		}
		if rapid.IntRange(0, 5).Draw(t, "cadenceless") == 0 {
			task.Due = always
		} else {
			task.Cadence = time.Duration(rapid.Int64Range(int64(time.Minute), int64(7*day)).Draw(t, "cadence"))
		}
		task.DataSafety = rapid.IntRange(0, 9).Draw(t, "dataSafety") == 0
		task.Bootstrap = rapid.IntRange(0, 9).Draw(t, "bootstrap") == 0
		tasks[i] = task
	}
	for i := range tasks {
		for j := range tasks {
			if i != j && rapid.IntRange(0, 5).Draw(t, "dep") == 0 {
				tasks[i].DependsOn = append(tasks[i].DependsOn, tasks[j].Name)
			}
		}
	}
	return tasks
}

func genPickInput(t *rapid.T) maintenance.PickInput {
	tasks := genRegistry(t)
	in := maintenance.PickInput{Now: t0}
	if rapid.Bool().Draw(t, "promotion") {
		in.YieldAfter = yieldAfter
	}
	for _, task := range tasks {
		switch rapid.IntRange(0, 3).Draw(t, "role") {
		case 0: // not due
		case 1:
			in.Running = append(in.Running, task)
		default:
			c := maintenance.Candidate{Task: task}
			if !rapid.Bool().Draw(t, "neverRan") {
				c.LastRunAt = t0.Add(-time.Duration(rapid.Int64Range(0, int64(30*day)).Draw(t, "ago")))
			}
			if rapid.Bool().Draw(t, "waiter") {
				c.WaitingSince = t0.Add(-time.Duration(rapid.Int64Range(0, int64(3*time.Hour)).Draw(t, "waited")))
			}
			in.Candidates = append(in.Candidates, c)
		}
	}
	return in
}

// refPick is the reference model of Pick, written as a sort over rank keys rather than
// a sequence of passes.
func refPick(in maintenance.PickInput) string {
	running := map[string]bool{}
	heavyRuns := false
	for _, t := range in.Running {
		running[t.Name] = true
		heavyRuns = heavyRuns || t.Class == maintenance.Heavy
	}
	type row struct {
		i     int
		c     maintenance.Candidate
		ratio float64
	}
	var el []row
	for i, c := range in.Candidates {
		if running[c.Task.Name] || (heavyRuns && c.Task.Class == maintenance.Heavy) ||
			slices.ContainsFunc(c.Task.DependsOn, func(d string) bool { return running[d] }) {
			continue
		}
		el = append(el, row{i, c, ratio(c, in.Now)})
	}
	if len(el) == 0 {
		return ""
	}
	promoted := func(r row) bool {
		return in.YieldAfter > 0 && !r.c.WaitingSince.IsZero() && in.Now.Sub(r.c.WaitingSince) >= in.YieldAfter
	}
	// Class of each row: 0 data-safety, 1 bootstrap, 2 promoted waiter, 3 the rest.
	class := func(r row) int {
		switch {
		case r.c.Task.DataSafety:
			return 0
		case r.c.Task.Bootstrap:
			return 1
		case promoted(r):
			return 2
		}
		return 3
	}
	slices.SortStableFunc(el, func(a, b row) int {
		if ca, cb := class(a), class(b); ca != cb {
			return ca - cb
		}
		if class(a) == 2 {
			return a.c.WaitingSince.Compare(b.c.WaitingSince)
		}
		return 0
	})
	if class(el[0]) < 3 {
		return el[0].c.Task.Name
	}
	// The rest, in registry order: the representative, unless a cadence-less one is earlier.
	slices.SortStableFunc(el, func(a, b row) int { return a.i - b.i })
	best := -1
	for k, r := range el {
		if r.c.Task.Cadence > 0 && (best < 0 || r.ratio > el[best].ratio) {
			best = k
		}
	}
	for k, r := range el {
		if r.c.Task.Cadence <= 0 && (best < 0 || k < best) {
			return r.c.Task.Name
		}
	}
	return el[best].c.Task.Name
}

func TestPickProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genPickInput(t)
		sel := maintenance.Pick(in)
		again := maintenance.Pick(in)
		if !cmp.Equal(sel.Considered, again.Considered) || (sel.Winner == nil) != (again.Winner == nil) ||
			(sel.Winner != nil && sel.Winner.Task.Name != again.Winner.Task.Name) {
			t.Fatalf("rule: Pick is deterministic: %v", cmp.Diff(sel.Considered, again.Considered))
		}
		if len(sel.Considered) != len(in.Candidates) {
			t.Fatalf("rule: every candidate is explained: %d of %d", len(sel.Considered), len(in.Candidates))
		}
		want := refPick(in)
		if sel.Winner == nil {
			if want != "" {
				t.Fatalf("rule: the reference model picks %q, Pick none: %+v", want, sel.Considered)
			}
			return
		}
		w := sel.Winner.Task
		heavyRuns := false
		for _, r := range in.Running {
			if r.Name == w.Name {
				t.Fatalf("rule: Pick never returns a running task: %s", w.Name)
			}
			if slices.Contains(w.DependsOn, r.Name) {
				t.Fatalf("rule: Pick never returns a task whose dependency runs: %s needs %s", w.Name, r.Name)
			}
			heavyRuns = heavyRuns || r.Class == maintenance.Heavy
		}
		if heavyRuns && w.Class == maintenance.Heavy {
			t.Fatalf("rule: Pick never returns a heavy task while a heavy one runs: %s", w.Name)
		}
		if w.Name != want {
			t.Fatalf("rule: Pick agrees with the reference model: got %q, want %q; %+v", w.Name, want, sel.Considered)
		}
	})
}

// TestPickMaxRatio: when no data-safety or bootstrap candidate is eligible, no waiter has
// waited YieldAfter and every candidate has a cadence, the winner is the eligible
// candidate with the greatest ratio, the first in registry order on a tie.
func TestPickMaxRatio(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genPickInput(t)
		sel := maintenance.Pick(in)
		eligible := map[string]bool{}
		for _, c := range sel.Considered {
			if c.Reason == "" || c.Reason[0] == 'w' || c.Reason[0] == 'o' { // won / outranked
				eligible[c.Name] = true
			}
		}
		best, bestRatio := "", math.Inf(-1)
		for _, c := range in.Candidates {
			if !eligible[c.Task.Name] {
				continue
			}
			if c.Task.DataSafety || c.Task.Bootstrap || c.Task.Cadence == 0 ||
				(in.YieldAfter > 0 && !c.WaitingSince.IsZero() && t0.Sub(c.WaitingSince) >= in.YieldAfter) {
				return // outside the property's premise
			}
			if r := ratio(c, t0); r > bestRatio {
				best, bestRatio = c.Task.Name, r
			}
		}
		got := ""
		if sel.Winner != nil {
			got = sel.Winner.Task.Name
		}
		if got != best {
			t.Fatalf("rule: the max-ratio eligible candidate wins: got %q, want %q (%+v)", got, best, sel.Considered)
		}
	})
}

// rankOf is the rank a task's state records: data-safety, then bootstrap, then ordinary.
func rankOf(t maintenance.Task) maintenance.Rank {
	switch {
	case t.DataSafety:
		return maintenance.RankDataSafety
	case t.Bootstrap:
		return maintenance.RankBootstrap
	default:
		return ordinary
	}
}

// TestPollSecondPassProperties: AlsoDispatched never holds a heavy task, never exceeds
// its bound, and no dispatched task is running or has a running dependency.
func TestPollSecondPassProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tasks := genRegistry(t)
		limit := rapid.IntRange(1, 4).Draw(t, "limit")
		store := maintenance.NewMemoryStateStore()
		lease := maintenance.NewMemoryLease(2 * time.Hour)
		var heavyRunning *maintenance.Grant
		running := map[string]bool{}
		for _, task := range tasks {
			st := maintenance.TaskState{Name: task.Name, Class: task.Class, Rank: rankOf(task)}
			if !rapid.Bool().Draw(t, "neverRan") {
				st.LastRunAt = t0.Add(-time.Duration(rapid.Int64Range(0, int64(10*day)).Draw(t, "ago")))
			}
			if rapid.IntRange(0, 4).Draw(t, "running") == 0 {
				if task.Class == maintenance.Heavy {
					if heavyRunning != nil {
						continue
					}
					g, err := lease.Acquire(bg, "other", time.Hour, t0.Add(-time.Minute))
					if err != nil {
						t.Fatal(err)
					}
					heavyRunning = &g
					st.RunningToken = g.Token
				}
				st.Running, st.RunningSince, st.RunningBy, st.RunningUntil = true, t0.Add(-time.Minute), "other", t0.Add(time.Hour)
				running[task.Name] = true
			}
			if err := store.Save(bg, 0, st); err != nil {
				t.Fatal(err)
			}
		}
		s, err := maintenance.NewScheduler(tasks, maintenance.Config{StateStore: store, Lease: lease, AlsoDispatchLimit: limit, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Poll(context.Background(), t0)
		if err != nil {
			t.Fatal(err)
		}
		off := 0
		for _, c := range res.AlsoDispatched {
			if c.Task.Class == maintenance.Heavy {
				t.Fatalf("rule: AlsoDispatched never holds a heavy task: %s", c.Task.Name)
			}
		}
		dispatched := res.Dispatched()
		for _, c := range dispatched {
			if c.Task.Class == maintenance.OffLease {
				off++
			}
			if running[c.Task.Name] {
				t.Fatalf("rule: a running task is never dispatched: %s", c.Task.Name)
			}
			for _, d := range c.Task.DependsOn {
				if running[d] {
					t.Fatalf("rule: a task whose dependency runs is never dispatched: %s needs %s", c.Task.Name, d)
				}
				if slices.ContainsFunc(dispatched, func(o maintenance.Candidate) bool { return o.Task.Name == d }) {
					t.Fatalf("rule: a task is never dispatched beside its dependency: %s needs %s", c.Task.Name, d)
				}
			}
		}
		if off > limit {
			t.Fatalf("rule: at most AlsoDispatchLimit (%d) off-lease tasks per poll: %d", limit, off)
		}
		if res.Winner != nil && res.Winner.Task.Class == maintenance.Heavy && heavyRunning != nil {
			t.Fatalf("rule: no heavy winner while a heavy task runs: %s", res.Winner.Task.Name)
		}
		for _, d := range res.Deferred {
			if slices.ContainsFunc(dispatched, func(c maintenance.Candidate) bool { return c.Task.Name == d.Task }) {
				t.Fatalf("a dispatched task is not also deferred: %+v", d)
			}
		}
	})
}
