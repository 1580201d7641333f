package maintenance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Reason codes of a Deferral (and of TaskState.DeferReason).
const (
	// ReasonGate: a soft gate's producer is due or running; Blocker is the producer.
	ReasonGate = "gate"
	// ReasonHeavyBusy: heavy backpressure — a heavy task runs; Blocker is that task.
	ReasonHeavyBusy = "heavy-busy"
	// ReasonLeaseHeld: the task won the pick but another holder has the lease; Blocker
	// is that holder.
	ReasonLeaseHeld = "lease-held"
	// ReasonYield: the task won the pick but yielded to a waiter of another scheduler
	// (fleet fairness); Blocker is that waiter.
	ReasonYield = "yield"
	// ReasonOutranked: the task lost the pick; Blocker is the winner.
	ReasonOutranked = "outranked"
	// ReasonDependency: a task it DependsOn runs, or a task that depends on it started
	// in the same poll; Blocker is that task.
	ReasonDependency = "dependency-running"
	// ReasonDispatchLimit: an off-lease task beyond AlsoDispatchLimit; no Blocker.
	ReasonDispatchLimit = "dispatch-limit"
)

// Deferral records that a due task did not start at a poll, why, and what blocked it.
type Deferral struct {
	// Task is the deferred task, Reason one of the Reason constants, Blocker the
	// blocking task or lease holder.
	Task, Reason, Blocker string
	// Since is the start of the task's deferral streak.
	Since time.Time
}

// PollResult is what one poll decided.
type PollResult struct {
	// Winner is the heavy task that acquired the lease, or — when no heavy task was
	// dispatched — the first off-lease task dispatched; nil when nothing was.
	Winner *Candidate
	// AlsoDispatched are the other off-lease tasks dispatched (never a heavy one; with
	// Winner, at most AlsoDispatchLimit off-lease tasks in all).
	AlsoDispatched []Candidate
	// Deferred holds every due task that did not start, in registry order.
	Deferred []Deferral
	// Gauge is the stall gauge after the poll.
	Gauge Gauge
	// Considered explains the heavy pick, then the first off-lease pick.
	Considered []Consideration
}

// Dispatched returns Winner (if any) followed by AlsoDispatched.
func (r PollResult) Dispatched() []Candidate {
	var out []Candidate
	if r.Winner != nil {
		out = append(out, *r.Winner)
	}
	return append(out, r.AlsoDispatched...)
}

// Scheduler decides, at every poll, which maintenance tasks start: one heavy winner on the
// lease and a bounded second pass of off-lease tasks. Most callers want Run; Poll,
// Complete and Renew are the steps Run is made of, for hosts that drive their own loop
// (or a simulated clock). Safe for concurrent use.
type Scheduler struct {
	tasks  []Task
	byName map[string]int
	cfg    Config

	mu        sync.Mutex
	grant     Grant // the grant of the latest heavy task this scheduler dispatched
	holding   bool
	heavyTask string
	grants    map[string]Grant     // every dispatched, not completed heavy task's grant
	known     uint64               // highest fencing token seen
	started   map[string]time.Time // dispatched, not completed
	local     map[string]bool      // running in this process (Run)
	runActive bool

	obsMu sync.Mutex
	seen  postureSeen // the latest known posture a poll reported (see observe.go)
}

// NewScheduler validates the registry (see ValidateTasks) and cfg, reporting every
// violation at once, and returns a scheduler over them. The order of tasks is the
// registry order. An empty registry is valid: its gauge reads Disabled.
func NewScheduler(tasks []Task, cfg Config) (*Scheduler, error) {
	c, cerr := cfg.withDefaults()
	if err := errors.Join(ValidateTasks(tasks), cerr); err != nil {
		return nil, err
	}
	s := &Scheduler{
		tasks:   make([]Task, len(tasks)),
		byName:  make(map[string]int, len(tasks)),
		cfg:     c,
		started: make(map[string]time.Time),
		local:   make(map[string]bool),
		grants:  make(map[string]Grant),
	}
	for i, t := range tasks {
		t.DependsOn = slices.Clone(t.DependsOn)
		t.Gates = slices.Clone(t.Gates)
		s.tasks[i] = t
		s.byName[t.Name] = i
	}
	return s, nil
}

// Config returns the scheduler's configuration with defaults filled in.
func (s *Scheduler) Config() Config { return s.cfg }

func (s *Scheduler) observe(token uint64) {
	s.known = max(s.known, token)
}

// isLive reports whether a stored running flag still counts: a heavy task's while the
// grant it runs under is the live one, an off-lease task's for MaxHold + LeaseTTL.
func (s *Scheduler) isLive(st TaskState, cur Grant, held bool, now time.Time) bool {
	if s.local[st.Name] {
		return true
	}
	if !st.Running {
		return false
	}
	class := st.Class
	if i, ok := s.byName[st.Name]; ok {
		class = s.tasks[i].Class
	}
	if class == Heavy {
		return held && st.RunningToken == cur.Token
	}
	return now.Sub(st.RunningSince) < s.cfg.MaxHold+s.cfg.LeaseTTL
}

func (s *Scheduler) taskFor(st TaskState) Task {
	if i, ok := s.byName[st.Name]; ok {
		return s.tasks[i]
	}
	return Task{Name: st.Name, Class: st.Class}
}

type deferral struct{ reason, blocker string }

// Poll decides what starts at now. It loads the durable state and the lease, asks every
// task not running whether it is due, defers gated tasks, ranks the due heavy tasks with
// Pick, lets the winner yield to a better waiter of another scheduler or acquire the lease,
// runs the second pass over the due off-lease tasks, and saves every dispatch and
// deferral in one fenced write. The dispatched tasks are marked running: the caller runs
// them and reports each with Complete (and calls Renew while the heavy one runs: a heavy
// task whose grant lapses no longer counts as running and may be dispatched again).
//
// A task whose Due func fails is left out and its state untouched; Poll then returns the
// result together with an error naming the task. When the state cannot be loaded or saved,
// Poll dispatches nothing, writes nothing (an acquired grant is released) and returns an
// error with a Gauge whose posture is Unknown (load) or the previous one (save).
//
// Every poll, failed ones included, logs one Info line to Config.Logger, a Warn line when
// the gauge turns Degraded, and is reported to Config.Observer, if any, after the
// scheduler's lock is released (see PollReport).
func (s *Scheduler) Poll(ctx context.Context, now time.Time) (PollResult, error) {
	res, err := s.poll(ctx, now)
	s.report(now, res, err)
	return res, err
}

// poll is Poll without the report.
func (s *Scheduler) poll(ctx context.Context, now time.Time) (PollResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, err := s.cfg.StateStore.Load(ctx)
	if err != nil {
		return PollResult{Gauge: Gauge{At: now}}, fmt.Errorf("maintenance: poll: load state: %w", err)
	}
	cur, held, err := s.cfg.Lease.Current(ctx, now)
	if err != nil {
		return PollResult{Gauge: Gauge{At: now}}, fmt.Errorf("maintenance: poll: read lease: %w", err)
	}
	s.observe(snap.Token)
	if held {
		s.observe(cur.Token)
	}
	states := make(map[string]TaskState, len(snap.States))
	for _, st := range snap.States {
		states[st.Name] = st
	}

	// Running tasks, in name order, then this process's unrecorded ones.
	live := make(map[string]bool)
	var running []Task
	for _, st := range snap.States {
		if s.isLive(st, cur, held, now) {
			live[st.Name] = true
			running = append(running, s.taskFor(st))
		}
	}
	for _, name := range sortedKeys(s.local) {
		if !live[name] {
			live[name] = true
			running = append(running, s.taskFor(TaskState{Name: name}))
		}
	}

	// Due-ness.
	var errs []error
	due := make(map[string]bool)
	failed := make(map[string]bool)
	for _, t := range s.tasks {
		if live[t.Name] {
			continue
		}
		st := states[t.Name]
		st.Name = t.Name
		ok, err := t.isDue(ctx, now, st)
		if err != nil {
			failed[t.Name] = true
			errs = append(errs, fmt.Errorf("maintenance: poll: task %q: due: %w", t.Name, err))
			continue
		}
		due[t.Name] = ok
	}

	// Soft gates, then the two classes.
	deferred := make(map[string]deferral)
	var heavyC, offC []Candidate
	for _, t := range s.tasks {
		if !due[t.Name] {
			continue
		}
		if p := gateBlocker(t, due, live); p != "" {
			deferred[t.Name] = deferral{ReasonGate, p}
			continue
		}
		st := states[t.Name]
		c := Candidate{Task: t, LastRunAt: st.LastRunAt, WaitingSince: st.DeferredSince}
		if t.Class == Heavy {
			heavyC = append(heavyC, c)
		} else {
			offC = append(offC, c)
		}
	}

	// Heavy pass.
	sel, losses := pick(PickInput{Candidates: heavyC, Running: running, Now: now, YieldAfter: s.cfg.YieldAfter})
	considered := sel.Considered
	for i, l := range losses {
		switch l.kind {
		case lossHeavy:
			deferred[heavyC[i].Task.Name] = deferral{ReasonHeavyBusy, l.blocker}
		case lossDependency:
			deferred[heavyC[i].Task.Name] = deferral{ReasonDependency, l.blocker}
		case lossOutranked:
			deferred[heavyC[i].Task.Name] = deferral{ReasonOutranked, l.blocker}
		}
	}
	var heavyWinner *Candidate
	var grant Grant
	if w := sel.Winner; w != nil {
		if x, ok := s.yieldTo(*w, snap.States, now); ok {
			deferred[w.Task.Name] = deferral{ReasonYield, x}
		} else {
			g, err := s.cfg.Lease.Acquire(ctx, s.cfg.Holder, s.cfg.LeaseTTL, now)
			switch {
			case err == nil:
				heavyWinner, grant = w, g
				s.observe(g.Token)
			case errors.Is(err, ErrLeaseHeld):
				holder := cur.Holder
				if !held {
					if g, ok, err := s.cfg.Lease.Current(ctx, now); err == nil && ok {
						holder = g.Holder
					}
				}
				deferred[w.Task.Name] = deferral{ReasonLeaseHeld, holder}
			default:
				failed[w.Task.Name] = true
				errs = append(errs, fmt.Errorf("maintenance: poll: task %q: acquire lease: %w", w.Task.Name, err))
			}
		}
	}

	// Second pass: off-lease tasks, ranked the same way, beside the heavy winner.
	offRunning := slices.Clip(running)
	if heavyWinner != nil {
		offRunning = append(offRunning, heavyWinner.Task)
	}
	var also []Candidate
	rest := offC
	// Tasks started in one poll count as running for each other's DependsOn, either way:
	// a task a just-started one depends on does not start beside it.
	dropDependencies := func(started Task) {
		rest = slices.DeleteFunc(slices.Clone(rest), func(c Candidate) bool {
			if slices.Contains(started.DependsOn, c.Task.Name) {
				deferred[c.Task.Name] = deferral{ReasonDependency, started.Name}
				return true
			}
			return false
		})
	}
	if heavyWinner != nil {
		dropDependencies(heavyWinner.Task)
	}
	for first := true; len(rest) > 0 && len(also) < s.cfg.AlsoDispatchLimit; first = false {
		sel, _ := pick(PickInput{Candidates: rest, Running: offRunning, Now: now, YieldAfter: s.cfg.YieldAfter})
		if first {
			considered = append(considered, sel.Considered...)
		}
		if sel.Winner == nil {
			break
		}
		also = append(also, *sel.Winner)
		offRunning = append(offRunning, sel.Winner.Task)
		rest = slices.DeleteFunc(slices.Clone(rest), func(c Candidate) bool { return c.Task.Name == sel.Winner.Task.Name })
		dropDependencies(sel.Winner.Task)
	}
	if len(rest) > 0 {
		_, losses := pick(PickInput{Candidates: rest, Running: offRunning, Now: now})
		for i, l := range losses {
			switch l.kind {
			case lossDependency:
				deferred[rest[i].Task.Name] = deferral{ReasonDependency, l.blocker}
			default:
				deferred[rest[i].Task.Name] = deferral{ReasonDispatchLimit, ""}
			}
		}
	}

	// One fenced write of every change.
	dispatched := make(map[string]bool, len(also)+1)
	for _, c := range also {
		dispatched[c.Task.Name] = true
	}
	if heavyWinner != nil {
		dispatched[heavyWinner.Task.Name] = true
	}
	var writes []TaskState
	var out []Deferral
	for _, t := range s.tasks {
		old, ok := states[t.Name]
		st := old
		st.Name, st.Class, st.Rank = t.Name, t.Class, t.Rank()
		d, isDeferred := deferred[t.Name]
		switch {
		case dispatched[t.Name]:
			st.Running, st.RunningSince, st.RunningBy, st.RunningToken = true, now, s.cfg.Holder, 0
			if t.Class == Heavy {
				st.RunningToken = grant.Token
			}
			clearStreak(&st)
		case isDeferred:
			if !st.Waiting() {
				st.DeferredSince, st.Deferrals = now, 0
			}
			st.DeferredAt, st.Deferrals, st.DeferReason, st.DeferBlocker = now, st.Deferrals+1, d.reason, d.blocker
			out = append(out, Deferral{Task: t.Name, Reason: d.reason, Blocker: d.blocker, Since: st.DeferredSince})
		case live[t.Name] || failed[t.Name]:
			continue
		default:
			clearStreak(&st)
		}
		if !ok || st != old {
			writes = append(writes, st)
			states[t.Name] = st
		}
	}
	token := s.known
	if len(writes) > 0 {
		if err := s.cfg.StateStore.Save(ctx, token, writes...); err != nil {
			errs = append(errs, fmt.Errorf("maintenance: poll: save state: %w", err))
			if heavyWinner != nil {
				if rerr := s.cfg.Lease.Release(ctx, grant); rerr != nil {
					errs = append(errs, fmt.Errorf("maintenance: poll: release lease: %w", rerr))
				}
			}
			gauge := computeGauge(snap.States, cur, held, now, s.cfg.DegradeAfter, len(s.tasks) == 0)
			return PollResult{Gauge: gauge, Considered: considered}, errors.Join(errs...)
		}
	}
	if heavyWinner != nil {
		s.grant, s.holding, s.heavyTask = grant, true, heavyWinner.Task.Name
		s.grants[heavyWinner.Task.Name] = grant
		cur, held = grant, true
	}
	for name := range dispatched {
		s.started[name] = now
	}

	all := make([]TaskState, 0, len(states))
	for _, st := range states {
		all = append(all, st)
	}
	res := PollResult{
		Deferred:   out,
		Gauge:      computeGauge(all, cur, held, now, s.cfg.DegradeAfter, len(s.tasks) == 0),
		Considered: considered,
	}
	switch {
	case heavyWinner != nil:
		w := *heavyWinner
		res.Winner, res.AlsoDispatched = &w, also
	case len(also) > 0:
		w := also[0]
		res.Winner, res.AlsoDispatched = &w, also[1:]
	}
	return res, errors.Join(errs...)
}

func clearStreak(st *TaskState) {
	st.DeferredSince, st.DeferredAt, st.Deferrals, st.DeferReason, st.DeferBlocker = time.Time{}, time.Time{}, 0, "", ""
}

// gateBlocker returns the producer of t's first closed gate: one that is due or running.
func gateBlocker(t Task, due, live map[string]bool) string {
	for _, g := range t.Gates {
		if due[g.Producer] || live[g.Producer] {
			return g.Producer
		}
	}
	return ""
}

// yieldTo returns the waiter of another scheduler that the heavy winner w yields to: a
// heavy waiter of higher rank at once, or of equal rank that has waited at least
// YieldAfter and longer than w. Waiters of this scheduler's own tasks were ranked by Pick;
// a waiter record not refreshed within YieldAfter is presumed abandoned.
func (s *Scheduler) yieldTo(w Candidate, states []TaskState, now time.Time) (string, bool) {
	wRank := w.Task.Rank()
	var wWait time.Duration
	if !w.WaitingSince.IsZero() {
		wWait = now.Sub(w.WaitingSince)
	}
	best := -1
	for i, st := range states {
		if _, mine := s.byName[st.Name]; mine || st.Class != Heavy || !st.Waiting() || st.Running {
			continue
		}
		if now.Sub(st.DeferredAt) > s.cfg.YieldAfter {
			continue
		}
		wait := now.Sub(st.DeferredSince)
		if st.Rank < wRank || (st.Rank == wRank && (wait < s.cfg.YieldAfter || wait <= wWait)) {
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

// Complete records the end of a run that Poll dispatched: LastRunAt becomes the time the
// run started, the outcome is derived from runErr (nil: succeeded; context cancellation
// or ErrHoldExceeded: cancelled; else failed), and the running flag is cleared. For a
// heavy task it writes with the token of the grant the run was dispatched under — so a
// holder whose grant was replaced is refused with ErrStaleToken, even if this scheduler
// holds a newer grant — and then releases that grant.
func (s *Scheduler) Complete(ctx context.Context, name string, runErr error, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.byName[name]
	if !ok {
		return fmt.Errorf("maintenance: complete: task %q: unknown: %w", name, ErrInvalid)
	}
	t := s.tasks[i]
	snap, err := s.cfg.StateStore.Load(ctx)
	if err != nil {
		return fmt.Errorf("maintenance: complete %q: load state: %w", name, err)
	}
	s.observe(snap.Token)
	var st TaskState
	for _, x := range snap.States {
		if x.Name == name {
			st = x
		}
	}
	started, ok := s.started[name]
	if !ok {
		started = st.RunningSince
	}
	if started.IsZero() {
		started = now
	}
	st.Name, st.Class, st.Rank = t.Name, t.Class, t.Rank()
	st.LastRunAt, st.LastError = started, ""
	switch {
	case runErr == nil:
		st.LastOutcome = OutcomeSucceeded
	case errors.Is(runErr, context.Canceled) || errors.Is(runErr, context.DeadlineExceeded) ||
		errors.Is(runErr, ErrHoldExceeded):
		st.LastOutcome, st.LastError = OutcomeCancelled, runErr.Error()
	default:
		st.LastOutcome, st.LastError = OutcomeFailed, runErr.Error()
	}
	st.Running, st.RunningSince, st.RunningBy, st.RunningToken = false, time.Time{}, "", 0

	grant, heavy := s.grants[name]
	if heavy && s.holding && s.heavyTask == name {
		grant = s.grant // the renewed grant, same token
	}
	token := s.known
	if heavy {
		token = grant.Token
	}
	var errs []error
	if err := s.cfg.StateStore.Save(ctx, token, st); err != nil {
		errs = append(errs, fmt.Errorf("maintenance: complete %q: save state: %w", name, err))
	} else {
		delete(s.started, name)
	}
	if heavy {
		if err := s.cfg.Lease.Release(ctx, grant); err != nil && !errors.Is(err, ErrNotHolder) {
			errs = append(errs, fmt.Errorf("maintenance: complete %q: release lease: %w", name, err))
		}
		delete(s.grants, name)
		if s.heavyTask == name {
			s.holding, s.heavyTask = false, ""
		}
	}
	return errors.Join(errs...)
}

// Renew extends the lease grant of the heavy task this scheduler runs, if any, to
// now + LeaseTTL. It returns the Lease's error: ErrHoldExceeded past MaxHold, ErrNotHolder
// once the grant was lost — either way the running task must stop.
func (s *Scheduler) Renew(ctx context.Context, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.holding {
		return nil
	}
	g, err := s.cfg.Lease.Renew(ctx, s.grant, s.cfg.LeaseTTL, now)
	if err != nil {
		return fmt.Errorf("maintenance: renew lease for %q: %w", s.heavyTask, err)
	}
	s.grant = g
	return nil
}

// Gauge computes the stall gauge at now from the durable state alone, without polling: a
// new Scheduler over the same StateStore and Lease reads the same gauge.
func (s *Scheduler) Gauge(ctx context.Context, now time.Time) (Gauge, error) {
	snap, err := s.cfg.StateStore.Load(ctx)
	if err != nil {
		return Gauge{At: now}, fmt.Errorf("maintenance: gauge: load state: %w", err)
	}
	cur, held, err := s.cfg.Lease.Current(ctx, now)
	if err != nil {
		return Gauge{At: now}, fmt.Errorf("maintenance: gauge: read lease: %w", err)
	}
	return computeGauge(snap.States, cur, held, now, s.cfg.DegradeAfter, len(s.tasks) == 0), nil
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
