package maintenance

import (
	"fmt"
	"time"
)

// A run's claim on its task, and the writes a poll or a run makes, each one UpdateFunc:
// a compare-and-set on the tasks' durable states that StateStore.Update applies
// atomically, so that schedulers sharing a store never overwrite each other.

// run is one run of a task as the StateStore records it: who runs it, under which grant
// (heavy tasks; 0 for off-lease ones), since when, and until when its claim holds unless
// extended. Its times are whole microseconds, as every store keeps them.
type run struct {
	task  string
	class Class
	rank  Rank
	by    string
	token uint64
	since time.Time
	until time.Time
}

// newRun returns the run of t by holder from now until until, under token (heavy): its
// start truncated to the microsecond, its end rounded up to one.
func newRun(t Task, holder string, token uint64, now, until time.Time) run {
	return run{task: t.Name, class: t.Class, rank: rankOf(t), by: holder, token: token,
		since: now.Truncate(time.Microsecond), until: ceilMicro(until)}
}

// ceilMicro rounds t up to a whole microsecond.
func ceilMicro(t time.Time) time.Time {
	if c := t.Truncate(time.Microsecond); c.Before(t) {
		return c.Add(time.Microsecond)
	}
	return t.Round(0)
}

// runOf returns the run st records.
func runOf(st TaskState) run {
	return run{task: st.Name, class: st.Class, rank: st.Rank, by: st.RunningBy, token: st.RunningToken,
		since: st.RunningSince, until: st.RunningUntil}
}

// heldBy reports whether st's running flag is r's.
func (r run) heldBy(st TaskState) bool {
	return st.Running && st.RunningBy == r.by && st.RunningToken == r.token &&
		st.RunningSince.Truncate(time.Microsecond).Equal(r.since)
}

// runningAt reports whether st's running flag counts at at, in a store whose fence is
// fence: it is set and its claim has not lapsed, and a heavy run's grant was not replaced
// (a later grant raised the fence above its token).
func (st TaskState) runningAt(at time.Time, fence uint64) bool {
	return st.Running && at.Before(st.RunningUntil) && (st.Class != Heavy || st.RunningToken >= fence)
}

// fenced returns the fence a write of r sees, or ErrStaleToken when r is a heavy run whose
// grant a later one replaced.
func (r run) fenced(fence uint64) (uint64, error) {
	if r.class != Heavy {
		return fence, nil
	}
	if r.token < fence {
		return fence, fmt.Errorf("%w: task %s: token %d below fence %d", ErrStaleToken, quote(r.task), r.token, fence)
	}
	return r.token, nil
}

// claim is one claim of a claiming write: the run, the tasks that must not be running
// for it to start (its DependsOn), and whether it won.
type claim struct {
	run       run
	conflicts []string
	won       bool
}

// mark is what a poll records of a task it did not start: a deferral (reason and
// blocker), or, with no reason, the end of its deferral streak.
type mark struct {
	task    string
	class   Class
	rank    Rank
	reason  Reason
	blocker string
}

// pollWrite is the write of one poll's drops, claims and marks: one Update. The drops are
// claims the scheduler may have left behind (a write that failed after it took effect).
type pollWrite struct {
	at      time.Time
	drops   []run
	claims  []*claim
	marks   []mark
	written []TaskState // what the last call wrote
}

// names returns every task the write reads, each once, in order.
func (w *pollWrite) names() []string {
	var out []string
	seen := map[string]bool{}
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, r := range w.drops {
		add(r.task)
	}
	for _, c := range w.claims {
		add(c.run.task)
		for _, d := range c.conflicts {
			add(d)
		}
	}
	for _, m := range w.marks {
		add(m.task)
	}
	return out
}

// apply is the write's UpdateFunc. Each drop clears its task's flag if the flag is still
// the dropped run's. Each claim, in order, wins when neither its task nor any of its
// conflicts runs at its start, given the claims before it; a heavy claim whose grant was
// replaced fails the whole write with ErrStaleToken. Then each mark applies to its task
// unless the task runs at the poll's instant.
func (w *pollWrite) apply(fence uint64, states []TaskState) ([]TaskState, uint64, error) {
	byName := make(map[string]TaskState, len(states))
	for _, st := range states {
		byName[st.Name] = st
	}
	var order []string
	changed := map[string]bool{}
	set := func(st TaskState) {
		if !changed[st.Name] {
			changed[st.Name] = true
			order = append(order, st.Name)
		}
		byName[st.Name] = st
	}
	for _, r := range w.drops {
		if st := byName[r.task]; r.heldBy(st) {
			set(dropped(st))
		}
	}
	var raise uint64
	for _, c := range w.claims {
		c.won = false
		f, err := c.run.fenced(fence)
		if err != nil {
			return nil, 0, err
		}
		if byName[c.run.task].runningAt(c.run.since, f) || anyRunning(byName, c.conflicts, c.run.since, f) {
			continue
		}
		c.won = true
		set(claimed(byName[c.run.task], c.run))
		if c.run.class == Heavy {
			raise = max(raise, c.run.token)
		}
	}
	for _, m := range w.marks {
		if st := byName[m.task]; !st.runningAt(w.at, max(fence, raise)) {
			if next := marked(st, m, w.at); next != st {
				set(next)
			}
		}
	}
	w.written = w.written[:0]
	for _, n := range order {
		w.written = append(w.written, byName[n])
	}
	return w.written, raise, nil
}

func anyRunning(byName map[string]TaskState, names []string, at time.Time, fence uint64) bool {
	for _, n := range names {
		if byName[n].runningAt(at, fence) {
			return true
		}
	}
	return false
}

// claimed returns st once r has claimed it: running as r, its deferral streak ended.
func claimed(st TaskState, r run) TaskState {
	st.Class, st.Rank = r.class, r.rank
	st.Running, st.RunningSince, st.RunningBy, st.RunningToken, st.RunningUntil = true, r.since, r.by, r.token, r.until
	clearStreak(&st)
	return st
}

// marked returns st with m applied at at: a deferral starts or continues the task's
// streak; an end clears it.
func marked(st TaskState, m mark, at time.Time) TaskState {
	st.Class, st.Rank = m.class, m.rank
	if m.reason == "" {
		clearStreak(&st)
		return st
	}
	if !st.waiting() {
		st.DeferredSince, st.Deferrals = at, 0
	}
	st.DeferredAt, st.Deferrals, st.DeferReason, st.DeferBlocker = at, st.Deferrals+1, m.reason, m.blocker
	return st
}

func clearStreak(st *TaskState) {
	st.DeferredSince, st.DeferredAt, st.Deferrals, st.DeferReason, st.DeferBlocker = time.Time{}, time.Time{}, 0, "", ""
}

// extendRun returns the UpdateFunc that moves r's claim to until, at now: ErrNotHolder
// unless the task's flag is r's and still counts; ErrStaleToken for a replaced heavy run.
func extendRun(r run, until, now time.Time) UpdateFunc {
	return func(fence uint64, states []TaskState) ([]TaskState, uint64, error) {
		f, err := r.fenced(fence)
		if err != nil {
			return nil, 0, err
		}
		st := states[0]
		if !r.heldBy(st) || !st.runningAt(now, f) {
			return nil, 0, fmt.Errorf("%w: task %s: the claim of %s's run since %v has lapsed or was taken",
				ErrNotHolder, quote(r.task), quote(r.by), r.since)
		}
		st.RunningUntil = ceilMicro(until)
		return []TaskState{st}, 0, nil
	}
}

// finishRun returns the UpdateFunc that ends r with outcome and lastError: LastRunAt
// becomes r's start and the flag is cleared, the streak kept. A finish repeated after it
// took effect (its task's LastRunAt is r's start) writes nothing and succeeds; any other
// task whose flag is not r's is ErrNotHolder; a replaced heavy run is ErrStaleToken.
func finishRun(r run, outcome Outcome, lastError string) UpdateFunc {
	return func(fence uint64, states []TaskState) ([]TaskState, uint64, error) {
		st := states[0]
		if !r.heldBy(st) && st.LastRunAt.Equal(r.since) && !r.since.IsZero() {
			return nil, 0, nil
		}
		if _, err := r.fenced(fence); err != nil {
			return nil, 0, err
		}
		if !r.heldBy(st) {
			return nil, 0, fmt.Errorf("%w: task %s: no longer runs as %s's run since %v", ErrNotHolder, quote(r.task), quote(r.by), r.since)
		}
		st.Class, st.Rank = r.class, r.rank
		st.LastRunAt, st.LastOutcome, st.LastError = r.since, outcome, lastError
		return []TaskState{dropped(st)}, 0, nil
	}
}

// dropRun returns the UpdateFunc that clears r's flag without recording a run, if the
// flag is still r's: for a run that never started.
func dropRun(r run) UpdateFunc {
	return func(_ uint64, states []TaskState) ([]TaskState, uint64, error) {
		if st := states[0]; r.heldBy(st) {
			return []TaskState{dropped(st)}, 0, nil
		}
		return nil, 0, nil
	}
}

// dropped returns st with its running flag cleared.
func dropped(st TaskState) TaskState {
	st.Running, st.RunningSince, st.RunningBy, st.RunningToken, st.RunningUntil = false, time.Time{}, "", 0, time.Time{}
	return st
}
