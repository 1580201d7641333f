package maintenance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// apply runs w's UpdateFunc over states (by name) at fence and returns the states after
// it, the raise and the error.
func applyWrite(w *pollWrite, fence uint64, states map[string]TaskState) (map[string]TaskState, uint64, error) {
	names := w.names()
	cur := make([]TaskState, len(names))
	for i, n := range names {
		st, ok := states[n]
		if !ok {
			st = TaskState{Name: n}
		}
		cur[i] = st
	}
	writes, raise, err := w.apply(fence, cur)
	out := map[string]TaskState{}
	for n, st := range states {
		out[n] = st
	}
	for _, st := range writes {
		out[st.Name] = st
	}
	return out, raise, err
}

// A poll's write: a claim wins when neither its task nor a task it depends on runs at its
// start, counting the claims before it; a lapsed claim, a heavy run under a replaced
// grant and a dropped orphan do not count; a heavy claim under a replaced grant fails the
// write; marks skip the tasks that run and start or continue the others' streaks.
func TestPollWriteApply(t *testing.T) {
	at := pt0
	running := func(name string, class Class, token uint64, until time.Time) TaskState {
		return TaskState{Name: name, Class: class, Running: true, RunningSince: at.Add(-time.Minute), RunningBy: "other", RunningToken: token, RunningUntil: until}
	}
	off := func(name string) run {
		return newRun(Task{Name: name, Class: OffLease}, "me", 0, at, at.Add(time.Minute))
	}
	heavyRun := func(name string, token uint64) run {
		return newRun(Task{Name: name, Class: Heavy}, "me", token, at, at.Add(time.Minute))
	}
	orphan := running("orphan", OffLease, 0, at.Add(time.Hour))
	states := map[string]TaskState{
		"busy":    running("busy", OffLease, 0, at.Add(time.Second)),
		"lapsed":  running("lapsed", OffLease, 0, at),
		"stale":   running("stale", Heavy, 4, at.Add(time.Hour)),
		"current": running("current", Heavy, 5, at.Add(time.Hour)),
		"orphan":  orphan,
		"waiting": {Name: "waiting", DeferredSince: at.Add(-time.Hour), DeferredAt: at.Add(-time.Minute), Deferrals: 2, DeferReason: ReasonGate},
	}
	w := &pollWrite{at: at, drops: []run{runOf(orphan)}}
	for _, c := range []struct {
		r         run
		conflicts []string
	}{
		{off("busy"), nil},              // runs: lost
		{off("lapsed"), nil},            // its claim lapsed at at: won
		{off("a"), []string{"busy"}},    // a dependency runs: lost
		{off("b"), []string{"stale"}},   // a heavy dependency under a replaced grant: won
		{off("c"), []string{"current"}}, // a heavy dependency under the live grant: lost
		{off("d"), []string{"b"}},       // b was claimed just before: lost
		{off("orphan"), nil},            // dropped first: won
	} {
		w.claims = append(w.claims, &claim{run: c.r, conflicts: c.conflicts})
	}
	w.marks = []mark{{task: "busy", reason: ReasonDispatchLimit}, {task: "waiting", reason: ReasonOutranked, blocker: "x"}, {task: "new", reason: ReasonGate, blocker: "y"}}
	after, raise, err := applyWrite(w, 5, states)
	if err != nil || raise != 0 {
		t.Fatalf("apply = raise %d, %v", raise, err)
	}
	var won []string
	for _, c := range w.claims {
		if c.won {
			won = append(won, c.run.task)
		}
	}
	if want := []string{"lapsed", "b", "orphan"}; !slices.Equal(won, want) {
		t.Errorf("claims won %v, want %v", won, want)
	}
	if st := after["b"]; !st.Running || st.RunningBy != "me" || !st.RunningUntil.Equal(at.Add(time.Minute)) || st.Class != OffLease {
		t.Errorf("a won claim runs as its run: %+v", st)
	}
	if after["busy"] != states["busy"] {
		t.Errorf("a mark skips a task that runs: %+v", after["busy"])
	}
	if st := after["waiting"]; !st.DeferredSince.Equal(at.Add(-time.Hour)) || st.Deferrals != 3 || st.DeferReason != ReasonOutranked || !st.DeferredAt.Equal(at) {
		t.Errorf("a mark continues a streak: %+v", st)
	}
	if st := after["new"]; !st.DeferredSince.Equal(at) || st.Deferrals != 1 || st.DeferBlocker != "y" {
		t.Errorf("a mark starts a streak: %+v", st)
	}

	// Heavy claims: one under the live grant wins over a replaced grant's run and raises
	// the fence; one under a replaced grant fails the write.
	hw := &pollWrite{at: at, claims: []*claim{{run: heavyRun("stale", 6)}}}
	if after, raise, err := applyWrite(hw, 5, states); err != nil || raise != 6 || !hw.claims[0].won || after["stale"].RunningToken != 6 {
		t.Errorf("a heavy claim under a new grant = won %v, raise %d, %v", hw.claims[0].won, raise, err)
	}
	hw = &pollWrite{at: at, claims: []*claim{{run: heavyRun("x", 4)}}}
	if _, _, err := applyWrite(hw, 5, states); !errors.Is(err, ErrStaleToken) {
		t.Errorf("a heavy claim under a replaced grant = %v, want ErrStaleToken", err)
	}
}

// extendRun moves a live claim of the run's own; finishRun records the run once, and a
// repeat after it took effect succeeds without a write; neither touches another's run,
// and a heavy run under a replaced grant is refused.
func TestExtendAndFinishRun(t *testing.T) {
	r := newRun(Task{Name: "t", Class: OffLease}, "me", 0, pt0, pt0.Add(time.Minute))
	mine := claimed(TaskState{Name: "t"}, r)
	other := mine
	other.RunningBy = "other"
	call := func(f UpdateFunc, fence uint64, st TaskState) ([]TaskState, error) {
		writes, _, err := f(fence, []TaskState{st})
		return writes, err
	}
	if w, err := call(extendRun(r, pt0.Add(2*time.Minute), pt0.Add(30*time.Second)), 0, mine); err != nil || !w[0].RunningUntil.Equal(pt0.Add(2*time.Minute)) {
		t.Errorf("extend a live claim = %+v, %v", w, err)
	}
	for what, st := range map[string]TaskState{"another's run": other, "a lapsed claim": mine} {
		if _, err := call(extendRun(r, pt0.Add(2*time.Minute), pt0.Add(time.Minute)), 0, st); !errors.Is(err, ErrNotHolder) {
			t.Errorf("extend %s = %v, want ErrNotHolder", what, err)
		}
	}
	w, err := call(finishRun(r, OutcomeSucceeded, ""), 0, mine)
	if err != nil || len(w) != 1 || w[0].Running || !w[0].LastRunAt.Equal(pt0) {
		t.Fatalf("finish = %+v, %v", w, err)
	}
	if again, err := call(finishRun(r, OutcomeSucceeded, ""), 0, w[0]); err != nil || len(again) != 0 {
		t.Errorf("a repeated finish = %+v, %v; want no write and no error", again, err)
	}
	if _, err := call(finishRun(r, OutcomeSucceeded, ""), 0, other); !errors.Is(err, ErrNotHolder) {
		t.Errorf("finish over another's run = %v, want ErrNotHolder", err)
	}
	h := newRun(Task{Name: "t", Class: Heavy}, "me", 3, pt0, pt0.Add(time.Minute))
	if _, err := call(finishRun(h, OutcomeSucceeded, ""), 4, claimed(TaskState{Name: "t"}, h)); !errors.Is(err, ErrStaleToken) {
		t.Errorf("finish of a heavy run under a replaced grant = %v, want ErrStaleToken", err)
	}
	if w, err := call(dropRun(r), 0, other); err != nil || len(w) != 0 {
		t.Errorf("drop leaves another's run: %+v, %v", w, err)
	}
}

// claimModel is the naive model of claims: each task's claim, if any, by holder and end.
type claimModel struct {
	holder map[string]string
	since  map[string]time.Time
	until  map[string]time.Time
}

func (m claimModel) runs(task string, at time.Time) bool {
	return m.holder[task] != "" && at.Before(m.until[task])
}

// Claims, extensions, finishes and drops by several schedulers, in any order, at any
// instants, through a MemoryStateStore, agree with the naive model: a claim wins exactly
// when neither its task nor a task it depends on holds a live claim, and a task never
// holds two.
func TestClaimProperties(t *testing.T) {
	tasks := []string{"a", "b", "c", "d"}
	deps := map[string][]string{"b": {"a"}, "d": {"a", "c"}}
	rapid.Check(t, func(rt *rapid.T) {
		store := NewMemoryStateStore()
		model := claimModel{holder: map[string]string{}, since: map[string]time.Time{}, until: map[string]time.Time{}}
		now := pt0
		ctx := context.Background()
		for step := range rapid.IntRange(1, 60).Draw(rt, "steps") {
			now = now.Add(time.Duration(rapid.IntRange(0, 90).Draw(rt, "advance")) * time.Second)
			task := rapid.SampledFrom(tasks).Draw(rt, "task")
			holder := rapid.SampledFrom([]string{"h1", "h2", "h3"}).Draw(rt, "holder")
			cur := run{task: task, class: OffLease, by: model.holder[task], since: model.since[task], until: model.until[task]}
			switch op := rapid.IntRange(0, 3).Draw(rt, "op"); op {
			case 0: // claim
				r := newRun(Task{Name: task, Class: OffLease}, holder, 0, now, now.Add(time.Duration(rapid.IntRange(1, 120).Draw(rt, "ttl"))*time.Second))
				c := &claim{run: r, conflicts: deps[task]}
				w := &pollWrite{at: now, claims: []*claim{c}}
				if err := store.Update(ctx, w.names(), w.apply); err != nil {
					rt.Fatalf("step %d: claim: %v", step, err)
				}
				want := !model.runs(task, now) && !slices.ContainsFunc(deps[task], func(d string) bool { return model.runs(d, now) })
				if c.won != want {
					rt.Fatalf("step %d: claim of %s by %s at %v won %v, the model says %v (%+v)", step, task, holder, now.Sub(pt0), c.won, want, model)
				}
				if c.won {
					model.holder[task], model.since[task], model.until[task] = holder, r.since, r.until
				}
			case 1: // extend the current claim
				if model.holder[task] == "" {
					continue
				}
				until := now.Add(time.Minute)
				err := store.Update(ctx, []string{task}, extendRun(cur, until, now))
				if live := model.runs(task, now); live != (err == nil) {
					rt.Fatalf("step %d: extend %s at %v = %v, the model says live %v", step, task, now.Sub(pt0), err, live)
				}
				if err == nil {
					model.until[task] = until
				}
			case 2, 3: // finish or drop the current claim
				if model.holder[task] == "" {
					continue
				}
				f := finishRun(cur, OutcomeSucceeded, "")
				if op == 3 {
					f = dropRun(cur)
				}
				if err := store.Update(ctx, []string{task}, f); err != nil {
					rt.Fatalf("step %d: end %s: %v", step, task, err)
				}
				delete(model.holder, task)
			}
			snap, _ := store.Load(ctx)
			for _, st := range snap.States {
				if live := st.runningAt(now, snap.Token); live != model.runs(st.Name, now) || (live && st.RunningBy != model.holder[st.Name]) {
					rt.Fatalf("step %d: %s is %+v, the model says %v by %q", step, st.Name, st, model.runs(st.Name, now), model.holder[st.Name])
				}
			}
		}
	})
}

// TestClaimedAndMarked pins the two state transitions a poll writes.
func TestClaimedAndMarked(t *testing.T) {
	waiting := TaskState{Name: "t", LastRunAt: pt0.Add(-time.Hour), DeferredSince: pt0.Add(-time.Hour), DeferredAt: pt0, Deferrals: 3, DeferReason: ReasonGate, DeferBlocker: "p"}
	r := newRun(Task{Name: "t", Class: Heavy, DataSafety: true}, "me", 9, pt0.Add(123456789), pt0.Add(time.Minute+1))
	want := TaskState{Name: "t", Class: Heavy, Rank: RankDataSafety, LastRunAt: pt0.Add(-time.Hour), Running: true,
		RunningSince: pt0.Add(123456 * time.Microsecond), RunningBy: "me", RunningToken: 9, RunningUntil: pt0.Add(time.Minute + time.Microsecond)}
	if diff := cmp.Diff(want, claimed(waiting, r)); diff != "" {
		t.Errorf("claimed: a claim runs as its run (start truncated, end rounded up to the microsecond) and ends the streak (-want +got):\n%s", diff)
	}
	ended := marked(waiting, mark{task: "t", class: OffLease}, pt0)
	if ended.Class != OffLease || ended.waiting() || ended.Deferrals != 0 || ended.LastRunAt != waiting.LastRunAt {
		t.Errorf("marked without a reason ends the streak: %+v", ended)
	}
	if got := fmt.Sprint(marked(TaskState{Name: "t"}, mark{task: "t", reason: ReasonGate, blocker: "p"}, pt0).Deferrals); got != "1" {
		t.Errorf("a first deferral counts 1: %s", got)
	}
}
