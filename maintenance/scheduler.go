package maintenance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

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
	pol policy
	cfg Config

	// pollMu serializes polls.
	pollMu sync.Mutex

	// mu guards the fields below; it is never held during I/O, so a hung Lease or
	// StateStore call never blocks a renewal.
	mu        sync.Mutex
	runs      map[string]taskRun // every dispatched, not completed run
	heavyTask string             // the latest heavy task dispatched and not completed
	local     map[string]bool    // running in this process (Run)
	// orphans are claims this scheduler may have left in the store: the claims of a write
	// that failed (it may have taken effect all the same), an abandoned run's claim it could
	// not clear. Its polls do not count them as running and drop them.
	orphans   map[string]run
	runActive bool

	obsMu sync.Mutex
	seen  postureSeen // the latest known posture a poll reported (see observe.go)
}

// taskRun is a run this scheduler dispatched: its claim and, for a heavy task, the grant
// it runs under, each as last extended.
type taskRun struct {
	run   run
	grant Grant
}

// NewScheduler validates the registry and cfg, reporting every violation at once, and
// returns a scheduler over them. Each task needs a unique, valid Name (see Names and times
// in the package documentation), a known Class, Cadence >= 0 and either Cadence > 0 or a
// Due func, a Run func, and DependsOn and gate producers that name other tasks of the
// list; each violation wraps ErrInvalid and names the task and field. The order of tasks
// is the registry order. An empty registry is valid: its gauge reads PostureDisabled.
func NewScheduler(tasks []Task, cfg Config) (*Scheduler, error) {
	c := cfg.withDefaults()
	if err := errors.Join(validateTasks(tasks), c.validate()); err != nil {
		return nil, err
	}
	s := &Scheduler{
		pol: policy{
			tasks: make([]Task, len(tasks)), byName: make(map[string]int, len(tasks)), holder: c.Holder,
			yieldAfter: c.YieldAfter, limit: c.AlsoDispatchLimit,
		},
		cfg:     c,
		runs:    make(map[string]taskRun),
		local:   make(map[string]bool),
		orphans: make(map[string]run),
	}
	for i, t := range tasks {
		t.DependsOn = slices.Clone(t.DependsOn)
		t.Gates = slices.Clone(t.Gates)
		s.pol.tasks[i] = t
		s.pol.byName[t.Name] = i
	}
	return s, nil
}

// Poll decides what starts at now. It loads the durable state and the lease, asks every
// task not running whether it is due, defers gated tasks, ranks the due heavy tasks with
// Pick, lets the winner yield to a better waiter of another scheduler or acquire the
// lease and claim its task, runs the second pass over the due off-lease tasks, and in one
// StateStore.Update claims the tasks the second pass chose and records every deferral.
//
// A claim is a compare-and-set across every scheduler sharing the StateStore: a task
// starts only if no scheduler runs it, nor a task it DependsOn; a task another scheduler
// claimed first is neither dispatched nor deferred. It lasts LeaseTTL (a heavy task's,
// as long as its grant) unless renewed. Deferrals are recorded whoever holds the lease,
// and never over a task that another scheduler runs. The caller runs the dispatched
// tasks, calls Renew while they run and reports each with Complete.
//
// A task whose Due func fails is left out and its state untouched; Poll returns the
// result with an error naming the task. When the state cannot be loaded, Poll dispatches
// nothing and returns the error with a Gauge whose posture is PostureUnknown. When the
// heavy winner's claim cannot be written it is not dispatched and its grant is released;
// when the second write fails, Poll returns the heavy winner alone, with the error.
//
// Cost: one StateStore Load, one Lease Current, at most one Acquire and two Updates (the
// heavy claim; the second pass and the deferrals), plus a Release or a second Current on
// the failure paths, whatever the number of tasks. Every poll is logged and reported to
// Config.Observer (see PollReport).
func (s *Scheduler) Poll(ctx context.Context, now time.Time) (PollResult, error) {
	res, err := s.poll(ctx, now)
	s.report(now, res, err)
	return res, err
}

// poll is Poll without the report: read, decide, acquire and claim the heavy winner,
// decide the second pass, claim it and record the deferrals.
func (s *Scheduler) poll(ctx context.Context, now time.Time) (PollResult, error) {
	s.pollMu.Lock()
	defer s.pollMu.Unlock()
	v, err := s.read(ctx, now)
	if err != nil {
		return PollResult{Gauge: Gauge{At: now}}, err
	}
	pl := s.pol.decide(ctx, v)
	heavy, grant, written := s.startHeavy(ctx, v, &pl)
	also, cons, offDeferred := s.pol.secondPass(pl.off, pl.running, heavy, now)
	maps.Copy(pl.deferred, offDeferred)
	considered := append(pl.considered, cons...)
	w := &pollWrite{at: now}
	for _, c := range also {
		pl.tried[c.Task.Name] = true
		r := newRun(c.Task, s.cfg.Holder, 0, now, now.Add(s.cfg.LeaseTTL))
		w.claims = append(w.claims, &claim{run: r, conflicts: c.Task.DependsOn})
	}
	var deferrals []Deferral
	w.marks, deferrals = s.pol.marks(v, pl)
	if err := s.write(ctx, v, w); err != nil {
		pl.errs = append(pl.errs, fmt.Errorf("maintenance: poll: write state: %w", err))
		also, deferrals = nil, nil
	} else {
		also = s.commit(also, w)
		written = append(written, w.written...)
	}
	cur, held := v.cur, v.held
	if heavy != nil {
		cur, held = grant, true
	}
	res := PollResult{Deferred: deferrals, Gauge: s.gauge(merged(v, written), cur, held, now), Considered: considered}
	switch {
	case heavy != nil:
		h := *heavy
		res.Winner, res.AlsoDispatched = &h, also
	case len(also) > 0:
		first := also[0]
		res.Winner, res.AlsoDispatched = &first, also[1:]
	}
	return res, errors.Join(pl.errs...)
}

// merged returns v's states with writes applied.
func merged(v view, writes []TaskState) []TaskState {
	byName := maps.Clone(v.byName)
	for _, st := range writes {
		byName[st.Name] = st
	}
	return slices.Collect(maps.Values(byName))
}

// read loads what a poll decides from: the state, the lease and this process's runs.
func (s *Scheduler) read(ctx context.Context, now time.Time) (view, error) {
	if err := validTime("poll: now", now); err != nil {
		return view{}, err
	}
	snap, err := s.cfg.StateStore.Load(ctx)
	if err != nil {
		return view{}, fmt.Errorf("maintenance: poll: load state: %w", err)
	}
	cur, held, err := s.cfg.Lease.Current(ctx, now)
	if err != nil {
		return view{}, fmt.Errorf("maintenance: poll: read lease: %w", err)
	}
	s.mu.Lock()
	local, orphans := maps.Clone(s.local), maps.Clone(s.orphans)
	s.mu.Unlock()
	return newView(now, snap, cur, held, local, orphans), nil
}

// startHeavy acquires the lease for the plan's heavy winner, if any, and claims its task.
// It returns the winner it started, its grant and what the claim wrote; nil when none
// started. When another holder has the lease, the winner is deferred with
// ReasonLeaseHeld; when the Lease fails, or the claim, the winner is left out (its grant
// released) and the error added to the plan's; a claim lost to another scheduler (the
// task or one it depends on runs there) leaves it out without an error.
func (s *Scheduler) startHeavy(ctx context.Context, v view, pl *plan) (*Candidate, Grant, []TaskState) {
	w := pl.winner
	if w == nil {
		return nil, Grant{}, nil
	}
	g, ok := s.acquire(ctx, v, pl)
	if !ok {
		return nil, Grant{}, nil
	}
	name := w.Task.Name
	pl.tried[name] = true
	c := &claim{run: newRun(w.Task, s.cfg.Holder, g.Token, v.now, g.ExpiresAt), conflicts: w.Task.DependsOn}
	pw := &pollWrite{at: v.now, claims: []*claim{c}}
	err := s.write(ctx, v, pw)
	if err == nil && c.won {
		s.mu.Lock()
		s.runs[name], s.heavyTask = taskRun{run: c.run, grant: g}, name
		s.mu.Unlock()
		return w, g, pw.written
	}
	if err != nil {
		pl.errs = append(pl.errs, fmt.Errorf("maintenance: poll: task %q: claim: %w", name, err))
	}
	if rerr := s.cfg.Lease.Release(ctx, g); rerr != nil {
		pl.errs = append(pl.errs, fmt.Errorf("maintenance: poll: release lease: %w", rerr))
	}
	return nil, Grant{}, nil
}

// acquire takes the lease for the plan's heavy winner. When another holder has it, the
// winner is deferred with ReasonLeaseHeld; when the Lease fails, the winner is left out
// and the error added to the plan's.
func (s *Scheduler) acquire(ctx context.Context, v view, pl *plan) (Grant, bool) {
	w := pl.winner
	g, err := s.cfg.Lease.Acquire(ctx, s.cfg.Holder, s.cfg.LeaseTTL, v.now)
	switch {
	case err == nil:
		return g, true
	case errors.Is(err, ErrLeaseHeld):
		holder := v.cur.Holder
		if !v.held {
			if g, ok, err := s.cfg.Lease.Current(ctx, v.now); err == nil && ok {
				holder = g.Holder
			}
		}
		pl.deferred[w.Task.Name] = deferral{ReasonLeaseHeld, holder}
	default:
		pl.failed[w.Task.Name] = true
		pl.errs = append(pl.errs, fmt.Errorf("maintenance: poll: task %q: acquire lease: %w", w.Task.Name, err))
	}
	return Grant{}, false
}

// write performs a poll's claims and marks in one Update, dropping first the claims this
// scheduler may have left behind (none when there is nothing to write). When the write
// fails its claims may have taken effect all the same: they become orphans.
func (s *Scheduler) write(ctx context.Context, v view, w *pollWrite) error {
	for _, name := range slices.Sorted(maps.Keys(v.orphans)) {
		w.drops = append(w.drops, v.orphans[name])
	}
	names := w.names()
	if len(names) == 0 {
		return nil
	}
	err := s.cfg.StateStore.Update(ctx, names, w.apply)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		for _, c := range w.claims {
			s.orphans[c.run.task] = c.run
		}
		return err
	}
	for _, r := range w.drops {
		if cur, ok := s.orphans[r.task]; ok && cur == r {
			delete(s.orphans, r.task)
		}
	}
	return nil
}

// commit records the runs of the second pass's claims that won and returns their
// candidates, in order.
func (s *Scheduler) commit(also []Candidate, w *pollWrite) []Candidate {
	var out []Candidate
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, c := range w.claims {
		if c.won {
			s.runs[c.run.task] = taskRun{run: c.run}
			out = append(out, also[i])
		}
	}
	return out
}

func (s *Scheduler) gauge(states []TaskState, cur Grant, held bool, now time.Time) Gauge {
	return computeGauge(states, cur, held, now, s.cfg.DegradeAfter, len(s.pol.tasks) == 0)
}

// Complete records the end of a run that Poll dispatched: LastRunAt becomes the time the
// run started, the outcome is derived from runErr (nil: succeeded; context cancellation,
// ErrHoldExceeded or ErrNotHolder: cancelled; else failed), and the running flag is
// cleared — only if the flag is still this run's, in one Update. A heavy task's run whose
// grant was replaced is refused with ErrStaleToken, a run whose claim another scheduler
// took since with ErrNotHolder; either way the run is forgotten and a heavy task's grant
// released. Any other error leaves the run and its grant as they are, so that Complete
// can be called again (Run retries until the claim would lapse), and succeeds without a
// second record if the failed write took effect all the same. A run this scheduler did
// not dispatch — it restarted — is completed from the StateStore if it runs there under
// this scheduler's Holder; a task that runs nowhere under it is ErrNotHolder. now is when
// the run ended.
func (s *Scheduler) Complete(ctx context.Context, name string, runErr error, now time.Time) error {
	i, ok := s.pol.byName[name]
	if !ok {
		return fmt.Errorf("%w: complete: unknown task %s", ErrInvalid, quote(name))
	}
	if err := validTime("complete: now", now); err != nil {
		return err
	}
	tr, err := s.runToComplete(ctx, name)
	if err != nil {
		return err
	}
	tr.run.class, tr.run.rank = s.pol.tasks[i].Class, rankOf(s.pol.tasks[i])
	outcome, lastError := outcomeOf(runErr)
	err = s.cfg.StateStore.Update(ctx, []string{name}, finishRun(tr.run, outcome, lastError))
	if err != nil {
		err = fmt.Errorf("maintenance: complete %q: record outcome: %w", name, err)
		if !final(err) {
			return err
		}
	}
	return errors.Join(err, s.forget(ctx, name, tr))
}

// runToComplete returns the run of task name that Complete ends: the one this scheduler
// dispatched, or the one the StateStore records under this scheduler's holder.
func (s *Scheduler) runToComplete(ctx context.Context, name string) (taskRun, error) {
	s.mu.Lock()
	tr, ok := s.runs[name]
	s.mu.Unlock()
	if ok {
		return tr, nil
	}
	snap, err := s.cfg.StateStore.Load(ctx)
	if err != nil {
		return taskRun{}, fmt.Errorf("maintenance: complete %q: load state: %w", name, err)
	}
	j := slices.IndexFunc(snap.States, func(st TaskState) bool { return st.Name == name })
	if j < 0 || !snap.States[j].Running || snap.States[j].RunningBy != s.cfg.Holder {
		return taskRun{}, fmt.Errorf("%w: complete %q: the task has no run of holder %q", ErrNotHolder, name, s.cfg.Holder)
	}
	st := snap.States[j]
	tr = taskRun{run: runOf(st)}
	if st.Class == Heavy {
		tr.grant = Grant{Holder: st.RunningBy, Token: st.RunningToken, AcquiredAt: st.RunningSince, ExpiresAt: st.RunningUntil}
	}
	return tr, nil
}

// forget drops the run tr of task name and releases a heavy run's grant.
func (s *Scheduler) forget(ctx context.Context, name string, tr taskRun) error {
	s.mu.Lock()
	if cur, ok := s.runs[name]; ok && cur.run.since.Equal(tr.run.since) {
		delete(s.runs, name)
		if s.heavyTask == name {
			s.heavyTask = ""
		}
	}
	s.mu.Unlock()
	if tr.run.class != Heavy || tr.grant.Token == 0 {
		return nil
	}
	if err := s.cfg.Lease.Release(ctx, tr.grant); err != nil && !errors.Is(err, ErrNotHolder) {
		return fmt.Errorf("maintenance: complete %q: release lease: %w", name, err)
	}
	return nil
}

// abandon forgets the run of task name, which will not start or whose outcome could not
// be recorded: it clears the run's claim (if it cannot, the next poll drops it, or it
// lapses on its own) and releases a heavy run's grant.
func (s *Scheduler) abandon(ctx context.Context, name string) {
	s.mu.Lock()
	tr, ok := s.runs[name]
	s.mu.Unlock()
	if !ok {
		return
	}
	if err := s.cfg.StateStore.Update(ctx, []string{name}, dropRun(tr.run)); err != nil {
		s.mu.Lock()
		s.orphans[name] = tr.run // the next poll drops it
		s.mu.Unlock()
	}
	if err := s.forget(ctx, name, tr); err != nil {
		s.cfg.Logger.Warn("maintenance: releasing an abandoned run's lease failed; it lapses on its own", "task", name, "error", err)
	}
}

// final reports whether err is one that no retry can cure: a stale grant or claim, a
// hold past MaxHold, bad input.
func final(err error) bool {
	return errors.Is(err, ErrNotHolder) || errors.Is(err, ErrStaleToken) || errors.Is(err, ErrHoldExceeded) || errors.Is(err, ErrInvalid)
}

// outcomeOf returns the outcome of a run that ended with runErr, and the LastError to
// store.
func outcomeOf(runErr error) (Outcome, string) {
	switch {
	case runErr == nil:
		return OutcomeSucceeded, ""
	case errors.Is(runErr, context.Canceled) || errors.Is(runErr, context.DeadlineExceeded) ||
		errors.Is(runErr, ErrHoldExceeded) || errors.Is(runErr, ErrNotHolder):
		return OutcomeCancelled, sanitizeText(runErr.Error())
	default:
		return OutcomeFailed, sanitizeText(runErr.Error())
	}
}

// Renew keeps the runs this scheduler dispatched and has not completed: it extends the
// grant of its heavy run, if any, to now + LeaseTTL, and every run's claim with it (an
// off-lease run's to now + LeaseTTL, never past MaxHold from its start). It returns an
// error wrapping ErrNotHolder once a grant or claim has lapsed or was taken, and
// ErrHoldExceeded past MaxHold: either way that task must stop. ctx bounds the calls; a
// host on the real clock bounds them by the earliest lapse, as Run does. A host that
// drives its own loop calls Renew every LeaseTTL/3 while any task runs; Run renews on its
// own.
func (s *Scheduler) Renew(ctx context.Context, now time.Time) error {
	s.mu.Lock()
	runs, heavyTask := maps.Clone(s.runs), s.heavyTask
	s.mu.Unlock()
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(runs)) {
		tr := runs[name]
		if tr.run.class == Heavy && name != heavyTask {
			continue // a heavy run whose grant a later one of this scheduler's replaced
		}
		if tr.run.class == Heavy {
			g, err := s.renewGrant(ctx, name, tr.grant, now)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			tr.grant = g
		}
		if _, err := s.extendClaim(ctx, name, tr, now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// grantExpired is the error of a renewal of the heavy task name's grant g after g expired.
func grantExpired(name string, g Grant) error {
	return fmt.Errorf("%w: renew lease for %q: grant expired at %v", ErrNotHolder, name, g.ExpiresAt)
}

// renewGrant renews g, the grant of the heavy task name, and records the renewed grant.
// It does not call the Lease for a grant already expired at now.
func (s *Scheduler) renewGrant(ctx context.Context, name string, g Grant, now time.Time) (Grant, error) {
	if !now.Before(g.ExpiresAt) {
		return g, grantExpired(name, g)
	}
	ng, err := s.cfg.Lease.Renew(ctx, g, s.cfg.LeaseTTL, now)
	if err != nil {
		return g, fmt.Errorf("maintenance: renew lease for %q: %w", name, err)
	}
	s.mu.Lock()
	if cur, ok := s.runs[name]; ok && cur.grant.Token == ng.Token && ng.ExpiresAt.After(cur.grant.ExpiresAt) {
		cur.grant = ng
		s.runs[name] = cur
	}
	s.mu.Unlock()
	return ng, nil
}

// claimExpired is the error of an extension of the claim of r after it lapsed.
func claimExpired(r run) error {
	return fmt.Errorf("%w: extend the claim of %q: lapsed at %v", ErrNotHolder, r.task, r.until)
}

// extendClaim moves the claim of tr, a run of task name, forward at now: a heavy run's
// to its grant's expiry, an off-lease run's to now + LeaseTTL but not past MaxHold from
// its start; and records it. It writes nothing when that would not move the claim, and
// does not call the StateStore for a claim already lapsed at now.
func (s *Scheduler) extendClaim(ctx context.Context, name string, tr taskRun, now time.Time) (taskRun, error) {
	if !now.Before(tr.run.until) {
		return tr, claimExpired(tr.run)
	}
	until := now.Add(s.cfg.LeaseTTL)
	if capAt := tr.run.since.Add(s.cfg.MaxHold); until.After(capAt) {
		until = capAt
	}
	if tr.run.class == Heavy {
		until = tr.grant.ExpiresAt
	}
	until = ceilMicro(until)
	if !until.After(tr.run.until) {
		return tr, nil
	}
	if err := s.cfg.StateStore.Update(ctx, []string{name}, extendRun(tr.run, until, now)); err != nil {
		return tr, fmt.Errorf("maintenance: extend the claim of %q: %w", name, err)
	}
	tr.run.until = until
	s.mu.Lock()
	if cur, ok := s.runs[name]; ok && cur.run.since.Equal(tr.run.since) && until.After(cur.run.until) {
		cur.run.until = until
		s.runs[name] = cur
	}
	s.mu.Unlock()
	return tr, nil
}
