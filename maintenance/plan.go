package maintenance

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"
)

// policy is what a poll's decisions depend on: the registry and the knobs of Config. Its
// methods are the phases of a poll; they read no clock and do no Lease or StateStore I/O.
type policy struct {
	tasks      []Task
	byName     map[string]int
	holder     string
	yieldAfter time.Duration
	limit      int
}

// view is what a poll read before deciding: the durable states, the lease's live grant
// (held false: free), the tasks this process runs, and the claims it may have left
// behind (see Scheduler.orphans).
type view struct {
	now     time.Time
	states  []TaskState // ordered by name
	byName  map[string]TaskState
	cur     Grant
	held    bool
	local   map[string]bool
	orphans map[string]run
}

func newView(now time.Time, snap Snapshot, cur Grant, held bool, local map[string]bool, orphans map[string]run) view {
	v := view{now: now, states: snap.States, byName: make(map[string]TaskState, len(snap.States)), cur: cur, held: held,
		local: local, orphans: orphans}
	for _, st := range snap.States {
		v.byName[st.Name] = st
	}
	return v
}

// deferral is a Deferral before it is written: why and what blocked the task.
type deferral struct {
	reason  Reason
	blocker string
}

// plan is what a poll decided before it touched the lease.
type plan struct {
	// live run at the poll's instant; failed are those whose Due func failed; tried are
	// those the poll tried to claim, whether it won or not.
	live, failed, tried map[string]bool
	// running are the running tasks, in name order, this process's unrecorded ones last.
	running []Task
	// off are the due off-lease candidates that no gate holds back.
	off []Candidate
	// winner is the heavy winner that must acquire the lease; nil when none (or it yields).
	winner     *Candidate
	deferred   map[string]deferral
	considered []Consideration
	errs       []error
}

// decide runs every phase before the lease: what runs, what is due, the gates, the heavy
// pick and the fleet yield. It calls the tasks' Due funcs and nothing else outside it.
func (p *policy) decide(ctx context.Context, v view) plan {
	pl := plan{tried: make(map[string]bool)}
	pl.live, pl.running = p.liveTasks(v)
	due, failed, errs := p.dueTasks(ctx, v, pl.live)
	pl.failed, pl.errs = failed, errs
	var heavy []Candidate
	heavy, pl.off, pl.deferred = p.candidates(v, due, pl.live)
	var losers map[string]deferral
	pl.winner, pl.considered, losers = p.heavyPass(heavy, pl.running, v.now)
	maps.Copy(pl.deferred, losers)
	if w := pl.winner; w != nil {
		if x, ok := p.yieldTo(*w, v.states, v.now); ok {
			pl.deferred[w.Task.Name] = deferral{ReasonYield, x}
			pl.winner = nil
		}
	}
	return pl
}

// task returns the registry entry of st's task, or one made from st for a task of another
// scheduler.
func (p *policy) task(st TaskState) Task {
	if i, ok := p.byName[st.Name]; ok {
		return p.tasks[i]
	}
	return Task{Name: st.Name, Class: st.Class}
}

// liveTasks returns the tasks running at v.now and the running tasks in name order, this
// process's unrecorded ones last. A running flag counts until its claim lapses
// (RunningUntil), and a heavy task's only while the grant it runs under is the live one;
// a claim this process left behind does not count (the poll's write drops it).
func (p *policy) liveTasks(v view) (map[string]bool, []Task) {
	live := make(map[string]bool)
	var running []Task
	for _, st := range v.states {
		t := p.task(st)
		ok := v.local[st.Name]
		orphan, isOrphan := v.orphans[st.Name]
		switch {
		case ok || !st.Running || (isOrphan && orphan.heldBy(st)):
		case t.Class == Heavy:
			ok = v.held && st.RunningToken == v.cur.Token && v.now.Before(st.RunningUntil)
		default:
			ok = v.now.Before(st.RunningUntil)
		}
		if ok {
			live[st.Name] = true
			running = append(running, t)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(v.local)) {
		if !live[name] {
			live[name] = true
			running = append(running, p.task(TaskState{Name: name}))
		}
	}
	return live, running
}

// dueTasks asks every task that does not run whether it is due. A task whose Due func
// fails is in failed, with an error naming it.
func (p *policy) dueTasks(ctx context.Context, v view, live map[string]bool) (due, failed map[string]bool, errs []error) {
	due, failed = make(map[string]bool), make(map[string]bool)
	for _, t := range p.tasks {
		if live[t.Name] {
			continue
		}
		st := v.byName[t.Name]
		st.Name = t.Name
		ok, err := t.isDue(ctx, v.now, st)
		if err != nil {
			failed[t.Name] = true
			errs = append(errs, fmt.Errorf("maintenance: poll: task %q: due: %w", t.Name, err))
			continue
		}
		due[t.Name] = ok
	}
	return due, failed, errs
}

// candidates returns the due heavy and off-lease tasks as candidates, in registry order,
// and the due tasks a closed gate defers instead: a gate is closed while its producer is
// due or running.
func (p *policy) candidates(v view, due, live map[string]bool) (heavy, off []Candidate, gated map[string]deferral) {
	gated = make(map[string]deferral)
	for _, t := range p.tasks {
		if !due[t.Name] {
			continue
		}
		if g := slices.IndexFunc(t.Gates, func(g Gate) bool { return due[g.Producer] || live[g.Producer] }); g >= 0 {
			gated[t.Name] = deferral{ReasonGate, t.Gates[g].Producer}
			continue
		}
		st := v.byName[t.Name]
		c := Candidate{Task: t, LastRunAt: st.LastRunAt, WaitingSince: st.DeferredSince}
		if t.Class == Heavy {
			heavy = append(heavy, c)
		} else {
			off = append(off, c)
		}
	}
	return heavy, off, gated
}

// heavyPass ranks the heavy candidates with Pick and returns the winner (nil if none), the
// explanation and the losers' deferrals.
func (p *policy) heavyPass(heavy []Candidate, running []Task, now time.Time) (*Candidate, []Consideration, map[string]deferral) {
	sel, losses := pick(PickInput{Candidates: heavy, Running: running, Now: now, YieldAfter: p.yieldAfter})
	deferred := make(map[string]deferral)
	for i, l := range losses {
		switch l.kind {
		case lossHeavy:
			deferred[heavy[i].Task.Name] = deferral{ReasonHeavyBusy, l.blocker}
		case lossDependency:
			deferred[heavy[i].Task.Name] = deferral{ReasonDependency, l.blocker}
		case lossOutranked:
			deferred[heavy[i].Task.Name] = deferral{ReasonOutranked, l.blocker}
		}
	}
	return sel.Winner, sel.Considered, deferred
}

// yieldTo returns the waiter of another scheduler that the heavy winner w yields to: a
// heavy waiter of higher rank at once, or of equal rank that has waited at least
// YieldAfter and longer than w. Waiters of this scheduler's own tasks were ranked by Pick;
// a waiter record not refreshed within YieldAfter is presumed abandoned.
func (p *policy) yieldTo(w Candidate, states []TaskState, now time.Time) (string, bool) {
	wRank := rankOf(w.Task)
	var wWait time.Duration
	if !w.WaitingSince.IsZero() {
		wWait = now.Sub(w.WaitingSince)
	}
	best := -1
	for i, st := range states {
		if _, mine := p.byName[st.Name]; mine || st.Class != Heavy || !st.waiting() || st.Running {
			continue
		}
		if now.Sub(st.DeferredAt) > p.yieldAfter {
			continue
		}
		wait := now.Sub(st.DeferredSince)
		if st.Rank < wRank || (st.Rank == wRank && (wait < p.yieldAfter || wait <= wWait)) {
			continue
		}
		if best < 0 || st.Rank > states[best].Rank ||
			(st.Rank == states[best].Rank && st.DeferredSince.Before(states[best].DeferredSince)) {
			best = i
		}
	}
	if best < 0 {
		return "", false
	}
	return states[best].Name, true
}

// secondPass ranks the off-lease candidates the way the heavy pass does and takes up to
// limit of them beside the heavy winner (nil: none started). Tasks started in one poll
// count as running for each other's DependsOn, either way. It returns the dispatched
// tasks, the first pick's explanation and the deferrals of the rest.
func (p *policy) secondPass(off []Candidate, running []Task, heavy *Candidate, now time.Time) ([]Candidate, []Consideration, map[string]deferral) {
	deferred := make(map[string]deferral)
	running = slices.Clip(running)
	rest := off
	// started counts t as running and defers the candidates t depends on.
	started := func(t Task) {
		running = append(running, t)
		rest = slices.DeleteFunc(slices.Clone(rest), func(c Candidate) bool {
			if c.Task.Name == t.Name {
				return true
			}
			if slices.Contains(t.DependsOn, c.Task.Name) {
				deferred[c.Task.Name] = deferral{ReasonDependency, t.Name}
				return true
			}
			return false
		})
	}
	if heavy != nil {
		started(heavy.Task)
	}
	var also []Candidate
	var considered []Consideration
	for first := true; len(rest) > 0 && len(also) < p.limit; first = false {
		sel, _ := pick(PickInput{Candidates: rest, Running: running, Now: now, YieldAfter: p.yieldAfter})
		if first {
			considered = sel.Considered
		}
		if sel.Winner == nil {
			break
		}
		also = append(also, *sel.Winner)
		started(sel.Winner.Task)
	}
	_, losses, _ := screen(PickInput{Candidates: rest, Running: running, Now: now})
	for i, l := range losses {
		d := deferral{ReasonDispatchLimit, ""}
		if l.kind == lossDependency {
			d = deferral{ReasonDependency, l.blocker}
		}
		deferred[rest[i].Task.Name] = d
	}
	return also, considered, deferred
}

// marks returns what a poll records of the tasks it did not try to start, and the
// Deferrals, in registry order: a deferred task starts or continues its streak; a task
// that runs, or whose Due failed, is left alone; any other task with a stored state ends
// its streak (and has its Class and Rank brought up to date).
func (p *policy) marks(v view, pl plan) ([]mark, []Deferral) {
	var marks []mark
	var out []Deferral
	for _, t := range p.tasks {
		st, stored := v.byName[t.Name]
		d, deferred := pl.deferred[t.Name]
		m := mark{task: t.Name, class: t.Class, rank: rankOf(t)}
		switch {
		case pl.tried[t.Name] || pl.live[t.Name] || pl.failed[t.Name]:
		case deferred:
			m.reason, m.blocker = d.reason, d.blocker
			marks = append(marks, m)
			since := st.DeferredSince
			if !st.waiting() {
				since = v.now
			}
			out = append(out, Deferral{Task: t.Name, Reason: d.reason, Blocker: d.blocker, Since: since})
		case stored && (st.waiting() || st.Class != m.class || st.Rank != m.rank):
			marks = append(marks, m)
		}
	}
	return marks, out
}
