package maintenance

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var pt0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func noRun(context.Context) error { return nil }

func ptask(name string, class Class, cadence time.Duration) Task {
	return Task{Name: name, Class: class, Cadence: cadence, Run: noRun}
}

// testPolicy is the policy of a scheduler over tasks with the default knobs.
func testPolicy(tasks ...Task) policy {
	p := policy{byName: map[string]int{}, holder: "me", yieldAfter: defaultYieldAfter, limit: defaultAlsoDispatchLimit}
	for i, t := range tasks {
		p.tasks = append(p.tasks, t)
		p.byName[t.Name] = i
	}
	return p
}

func testView(states []TaskState, cur Grant, held bool, local ...string) view {
	l := map[string]bool{}
	for _, n := range local {
		l[n] = true
	}
	return newView(pt0, Snapshot{States: states}, cur, held, l, nil)
}

func names(ts []Task) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

func cnames(cs []Candidate) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Task.Name)
	}
	return out
}

// liveTasks: a running flag counts until its claim lapses, a heavy one only under the
// live grant; this process's runs always count; its unrecorded runs come last.
func TestLiveTasks(t *testing.T) {
	p := testPolicy(ptask("h1", Heavy, time.Hour), ptask("h2", Heavy, time.Hour), ptask("h3", Heavy, time.Hour),
		ptask("o1", OffLease, time.Hour), ptask("o2", OffLease, time.Hour), ptask("mine", OffLease, time.Hour))
	later, lapsed := pt0.Add(time.Second), pt0
	states := []TaskState{
		{Name: "foreign", Class: Heavy, Running: true, RunningToken: 7, RunningUntil: later},
		{Name: "h1", Class: Heavy, Running: true, RunningToken: 7, RunningUntil: later},
		{Name: "h2", Class: Heavy, Running: true, RunningToken: 6, RunningUntil: later},
		{Name: "h3", Class: Heavy, Running: true, RunningToken: 7, RunningUntil: lapsed},
		{Name: "o1", Class: OffLease, Running: true, RunningSince: pt0.Add(-24 * time.Hour), RunningUntil: later},
		{Name: "o2", Class: OffLease, Running: true, RunningSince: pt0.Add(-time.Second), RunningUntil: lapsed},
	}
	live, running := p.liveTasks(testView(states, Grant{Token: 7}, true, "mine", "h2"))
	if want := []string{"foreign", "h1", "h2", "o1", "mine"}; !slices.Equal(names(running), want) {
		t.Errorf("running %v, want %v", names(running), want)
	}
	if !live["h2"] || live["h3"] || live["o2"] || !live["foreign"] {
		t.Errorf("live %v", live)
	}
	if running[0].Class != Heavy {
		t.Errorf("a foreign task's class comes from its state: %+v", running[0])
	}
	if _, running := p.liveTasks(testView(states, Grant{}, false)); !slices.Equal(names(running), []string{"o1"}) {
		t.Errorf("with the lease free no heavy flag counts: %v", names(running))
	}
}

// dueTasks: the cadence rule or the Due func, for tasks that do not run; a failing Due
// func leaves its task out, named in an error.
func TestDueTasks(t *testing.T) {
	boom := errors.New("boom")
	failing := ptask("failing", Heavy, 0)
	failing.Due = func(context.Context, time.Time, TaskState) (bool, error) { return false, boom }
	named := ptask("named", OffLease, 0)
	named.Due = func(_ context.Context, now time.Time, st TaskState) (bool, error) {
		return st.Name == "named" && now.Equal(pt0), nil
	}
	p := testPolicy(ptask("never-ran", Heavy, time.Hour), ptask("fresh", Heavy, time.Hour), ptask("stale", Heavy, time.Hour), ptask("running", Heavy, time.Minute), failing, named)
	v := testView([]TaskState{{Name: "fresh", LastRunAt: pt0.Add(-59 * time.Minute)}, {Name: "stale", LastRunAt: pt0.Add(-time.Hour)}}, Grant{}, false)
	due, failed, errs := p.dueTasks(context.Background(), v, map[string]bool{"running": true})
	want := map[string]bool{"never-ran": true, "fresh": false, "stale": true, "named": true}
	if diff := cmp.Diff(want, due); diff != "" {
		t.Errorf("due (-want +got):\n%s", diff)
	}
	if !failed["failing"] || len(failed) != 1 || len(errs) != 1 || !errors.Is(errs[0], boom) {
		t.Errorf("failed %v, errs %v", failed, errs)
	}
}

// candidates: due tasks split by class in registry order; a gate whose producer is due or
// running defers the task.
func TestCandidates(t *testing.T) {
	gated := ptask("gated", Heavy, time.Hour)
	gated.Gates = []Gate{{Producer: "idle"}, {Producer: "producer"}}
	open := ptask("open", OffLease, time.Hour)
	open.Gates = []Gate{{Producer: "idle"}}
	byRunning := ptask("by-running", OffLease, time.Hour)
	byRunning.Gates = []Gate{{Producer: "runs"}}
	p := testPolicy(ptask("producer", Heavy, time.Hour), gated, open, byRunning, ptask("h", Heavy, time.Hour), ptask("idle", Heavy, time.Hour))
	v := testView([]TaskState{{Name: "h", LastRunAt: pt0.Add(-time.Hour), DeferredSince: pt0.Add(-time.Minute)}}, Grant{}, false)
	due := map[string]bool{"producer": true, "gated": true, "open": true, "by-running": true, "h": true}
	heavy, off, deferred := p.candidates(v, due, map[string]bool{"runs": true})
	if !slices.Equal(cnames(heavy), []string{"producer", "h"}) || !slices.Equal(cnames(off), []string{"open"}) {
		t.Errorf("heavy %v, off %v", cnames(heavy), cnames(off))
	}
	if h := heavy[1]; !h.LastRunAt.Equal(pt0.Add(-time.Hour)) || !h.WaitingSince.Equal(pt0.Add(-time.Minute)) {
		t.Errorf("a candidate carries its state: %+v", h)
	}
	want := map[string]deferral{"gated": {ReasonGate, "producer"}, "by-running": {ReasonGate, "runs"}}
	if diff := cmp.Diff(want, deferred, cmp.AllowUnexported(deferral{})); diff != "" {
		t.Errorf("gated (-want +got):\n%s", diff)
	}
}

// heavyPass: the pick's winner and a deferral for every loser, with its reason.
func TestHeavyPass(t *testing.T) {
	dep := ptask("dep", Heavy, time.Hour)
	dep.DependsOn = []string{"offrun"}
	p := testPolicy()
	cands := []Candidate{{Task: ptask("a", Heavy, time.Hour)}, {Task: ptask("b", Heavy, time.Hour)}, {Task: dep}}
	w, cons, deferred := p.heavyPass(cands, []Task{ptask("offrun", OffLease, time.Hour)}, pt0)
	if w == nil || w.Task.Name != "a" || len(cons) != 3 {
		t.Fatalf("winner %v, %d considerations", w, len(cons))
	}
	want := map[string]deferral{"b": {ReasonOutranked, "a"}, "dep": {ReasonDependency, "offrun"}}
	if diff := cmp.Diff(want, deferred, cmp.AllowUnexported(deferral{})); diff != "" {
		t.Errorf("deferred (-want +got):\n%s", diff)
	}
	_, _, deferred = p.heavyPass(cands[:1], []Task{ptask("big", Heavy, time.Hour)}, pt0)
	if d := deferred["a"]; d != (deferral{ReasonHeavyBusy, "big"}) {
		t.Errorf("heavy backpressure: %+v", d)
	}
}

// yieldTo: a fresh waiter of another scheduler of higher rank at once, of equal rank
// after YieldAfter and longer than the winner; never this scheduler's own waiter.
func TestYieldTo(t *testing.T) {
	p := testPolicy(ptask("mine", Heavy, time.Hour))
	w := Candidate{Task: ptask("mine", Heavy, time.Hour)}
	waiter := func(name string, r Rank, waited time.Duration) TaskState {
		return TaskState{Name: name, Class: Heavy, Rank: r, DeferredSince: pt0.Add(-waited), DeferredAt: pt0.Add(-time.Minute)}
	}
	for _, tt := range []struct {
		states []TaskState
		want   string
	}{
		{[]TaskState{waiter("x", RankBootstrap, time.Minute)}, "x"},
		{[]TaskState{waiter("x", Rank(0), 31*time.Minute)}, "x"},
		{[]TaskState{waiter("x", Rank(0), 29*time.Minute)}, ""},
		{[]TaskState{waiter("mine", RankDataSafety, time.Hour)}, ""},
		{[]TaskState{waiter("old", Rank(0), 3*time.Hour), waiter("safe", RankDataSafety, time.Minute)}, "safe"},
		{[]TaskState{waiter("b", Rank(0), time.Hour), waiter("a", Rank(0), 2*time.Hour)}, "a"},
		{[]TaskState{{Name: "stale", Class: Heavy, Rank: RankDataSafety, DeferredSince: pt0.Add(-time.Hour), DeferredAt: pt0.Add(-31 * time.Minute)}}, ""},
		{[]TaskState{{Name: "off", Class: OffLease, Rank: RankDataSafety, DeferredSince: pt0.Add(-time.Hour), DeferredAt: pt0}}, ""},
	} {
		got, ok := p.yieldTo(w, tt.states, pt0)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("yieldTo over %+v = %q, %v; want %q", tt.states, got, ok, tt.want)
		}
	}
}

// secondPass: up to limit off-lease tasks beside the heavy winner; tasks started in one
// poll count as running for each other's DependsOn, either way; the rest wait for the
// limit.
func TestSecondPass(t *testing.T) {
	needsB := ptask("needs-b", OffLease, time.Hour)
	needsB.DependsOn = []string{"b"}
	heavy := ptask("h", Heavy, time.Hour)
	heavy.DependsOn = []string{"a"}
	p := testPolicy()
	p.limit = 2
	off := []Candidate{{Task: ptask("a", OffLease, time.Hour)}, {Task: ptask("b", OffLease, time.Hour)}, {Task: needsB}, {Task: ptask("c", OffLease, time.Hour)}, {Task: ptask("d", OffLease, time.Hour)}}
	also, cons, deferred := p.secondPass(off, nil, &Candidate{Task: heavy}, pt0)
	if !slices.Equal(cnames(also), []string{"b", "c"}) || len(cons) != 4 {
		t.Fatalf("also %v, %d considerations", cnames(also), len(cons))
	}
	want := map[string]deferral{"a": {ReasonDependency, "h"}, "needs-b": {ReasonDependency, "b"}, "d": {ReasonDispatchLimit, ""}}
	if diff := cmp.Diff(want, deferred, cmp.AllowUnexported(deferral{})); diff != "" {
		t.Errorf("deferred (-want +got):\n%s", diff)
	}
	if also, _, _ := p.secondPass(nil, nil, nil, pt0); len(also) != 0 {
		t.Errorf("no candidates, no dispatch: %v", cnames(also))
	}
}

// marks: a deferred task starts or continues its streak; a task tried, running or
// failed is left alone; any other stored task ends its streak, or has its Class and Rank
// brought up to date; a task without state and without a deferral is not written.
func TestMarks(t *testing.T) {
	safe := ptask("safe", Heavy, time.Hour)
	safe.DataSafety = true
	p := testPolicy(ptask("tried", Heavy, time.Hour), ptask("new-wait", Heavy, time.Hour),
		ptask("old-wait", Heavy, time.Hour), ptask("runs", Heavy, time.Hour), ptask("failed", Heavy, time.Hour),
		ptask("settled", Heavy, time.Hour), ptask("idle", Heavy, time.Hour), ptask("unknown", Heavy, time.Hour), safe)
	streak := func(name string) TaskState {
		return TaskState{Name: name, DeferredSince: pt0.Add(-time.Hour), DeferredAt: pt0.Add(-time.Minute), Deferrals: 4, DeferReason: ReasonGate, DeferBlocker: "x"}
	}
	settled := TaskState{Name: "settled", LastRunAt: pt0.Add(-time.Hour)}
	v := testView([]TaskState{streak("tried"), streak("old-wait"), streak("runs"), streak("failed"), settled, streak("idle"), {Name: "safe"}}, Grant{}, false)
	pl := plan{
		live: map[string]bool{"runs": true}, failed: map[string]bool{"failed": true}, tried: map[string]bool{"tried": true},
		deferred: map[string]deferral{"new-wait": {ReasonOutranked, "h"}, "old-wait": {ReasonLeaseHeld, "other"}},
	}
	marks, out := p.marks(v, pl)
	want := []mark{
		{task: "new-wait", reason: ReasonOutranked, blocker: "h"},
		{task: "old-wait", reason: ReasonLeaseHeld, blocker: "other"},
		{task: "idle"},
		{task: "safe", rank: RankDataSafety},
	}
	if diff := cmp.Diff(want, marks, cmp.AllowUnexported(mark{})); diff != "" {
		t.Errorf("marks (-want +got):\n%s", diff)
	}
	wantOut := []Deferral{{Task: "new-wait", Reason: ReasonOutranked, Blocker: "h", Since: pt0}, {Task: "old-wait", Reason: ReasonLeaseHeld, Blocker: "other", Since: pt0.Add(-time.Hour)}}
	if diff := cmp.Diff(wantOut, out); diff != "" {
		t.Errorf("deferrals (-want +got):\n%s", diff)
	}
}

// decide: the phases together — a yielding winner is deferred and acquires nothing.
func TestDecide(t *testing.T) {
	p := testPolicy(ptask("h", Heavy, time.Hour), ptask("o", OffLease, time.Hour))
	remote := TaskState{Name: "remote", Class: Heavy, Rank: RankDataSafety, DeferredSince: pt0.Add(-time.Minute), DeferredAt: pt0}
	pl := p.decide(context.Background(), testView([]TaskState{remote}, Grant{}, false))
	if pl.winner != nil || pl.deferred["h"] != (deferral{ReasonYield, "remote"}) || !slices.Equal(cnames(pl.off), []string{"o"}) {
		t.Errorf("winner %v, deferred %v, off %v", pl.winner, pl.deferred, cnames(pl.off))
	}
	pl = p.decide(context.Background(), testView(nil, Grant{}, false))
	if pl.winner == nil || pl.winner.Task.Name != "h" || len(pl.deferred) != 0 {
		t.Errorf("without a waiter h must acquire: %+v", pl)
	}
}

func TestFirstAndBestWhere(t *testing.T) {
	eligible := []int{1, 3, 4, 6}
	odd := func(i int) bool { return i%2 == 1 }
	if got := firstWhere(eligible, odd); got != 1 {
		t.Errorf("firstWhere = %d, want 1", got)
	}
	if got := firstWhere(eligible, func(i int) bool { return i > 6 }); got != -1 {
		t.Errorf("firstWhere with no match = %d", got)
	}
	score := map[int]int{1: 2, 3: 5, 4: 5, 6: 1}
	if got := bestWhere(eligible, func(int) bool { return true }, func(a, b int) bool { return score[a] > score[b] }); got != 3 {
		t.Errorf("bestWhere = %d, want the first of the best, 3", got)
	}
}
