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

	// pollMu serializes Poll and Complete, which read, decide and write the durable state.
	pollMu  sync.Mutex
	known   uint64               // highest fencing token seen
	started map[string]time.Time // dispatched, not completed

	// mu guards the fields below; it is never held during I/O, so a hung Lease or
	// StateStore call never blocks a renewal.
	mu        sync.Mutex
	grants    map[string]Grant // every dispatched, not completed heavy task's grant, as renewed
	heavyTask string           // the latest heavy task dispatched and not completed
	local     map[string]bool  // running in this process (Run)
	runActive bool

	obsMu sync.Mutex
	seen  postureSeen // the latest known posture a poll reported (see observe.go)
}

// NewScheduler validates the registry (see ValidateTasks) and cfg, reporting every
// violation at once, and returns a scheduler over them. The order of tasks is the
// registry order. An empty registry is valid: its gauge reads PostureDisabled.
func NewScheduler(tasks []Task, cfg Config) (*Scheduler, error) {
	c := cfg.withDefaults()
	if err := errors.Join(ValidateTasks(tasks), c.validate()); err != nil {
		return nil, err
	}
	s := &Scheduler{
		pol: policy{
			tasks: make([]Task, len(tasks)), byName: make(map[string]int, len(tasks)), holder: c.Holder,
			offLeaseLive: c.MaxHold + c.LeaseTTL, yieldAfter: c.YieldAfter, limit: c.AlsoDispatchLimit,
		},
		cfg:     c,
		started: make(map[string]time.Time),
		grants:  make(map[string]Grant),
		local:   make(map[string]bool),
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
// lease, runs the second pass over the due off-lease tasks, and saves every dispatch and
// deferral in one fenced write. The caller runs the dispatched tasks, reports each with
// Complete and calls Renew while the heavy one runs: a heavy task whose grant lapses no
// longer counts as running.
//
// A task whose Due func fails is left out and its state untouched; Poll returns the
// result with an error naming the task. When the state cannot be loaded or saved, Poll
// dispatches nothing, writes nothing (a grant it took is released) and returns an error
// with a Gauge whose posture is PostureUnknown (load) or the previous one (save).
//
// Cost: one StateStore Load, one Lease Current, at most one Acquire and one Save (plus a
// Release or a second Current on the failure paths), whatever the number of tasks. Every
// poll is logged and reported to Config.Observer (see PollReport).
func (s *Scheduler) Poll(ctx context.Context, now time.Time) (PollResult, error) {
	res, err := s.poll(ctx, now)
	s.report(now, res, err)
	return res, err
}

// poll is Poll without the report: read, decide, acquire, decide the second pass, write.
func (s *Scheduler) poll(ctx context.Context, now time.Time) (PollResult, error) {
	s.pollMu.Lock()
	defer s.pollMu.Unlock()
	v, err := s.read(ctx, now)
	if err != nil {
		return PollResult{Gauge: Gauge{At: now}}, err
	}
	pl := s.pol.decide(ctx, v)
	grant, acquired := s.acquire(ctx, v, &pl)
	var heavy *Candidate
	if acquired {
		heavy = pl.winner
	}
	also, cons, offDeferred := s.pol.secondPass(pl.off, pl.running, heavy, now)
	maps.Copy(pl.deferred, offDeferred)
	considered := append(pl.considered, cons...)
	dispatched := make(map[string]bool, len(also)+1)
	for _, c := range also {
		dispatched[c.Task.Name] = true
	}
	if heavy != nil {
		dispatched[heavy.Task.Name] = true
	}
	writes, deferrals := s.pol.writes(v, pl, dispatched, grant)
	if err := s.save(ctx, writes); err != nil {
		errs := append(pl.errs, err)
		if heavy != nil {
			if rerr := s.cfg.Lease.Release(ctx, grant); rerr != nil {
				errs = append(errs, fmt.Errorf("maintenance: poll: release lease: %w", rerr))
			}
		}
		return PollResult{Gauge: s.gauge(v.states, v.cur, v.held, now), Considered: considered}, errors.Join(errs...)
	}
	s.commit(heavy, grant, dispatched, now)
	cur, held := v.cur, v.held
	if heavy != nil {
		cur, held = grant, true
	}
	res := PollResult{Deferred: deferrals, Gauge: s.gauge(merged(v, writes), cur, held, now), Considered: considered}
	switch {
	case heavy != nil:
		w := *heavy
		res.Winner, res.AlsoDispatched = &w, also
	case len(also) > 0:
		w := also[0]
		res.Winner, res.AlsoDispatched = &w, also[1:]
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

func (s *Scheduler) observe(token uint64) { s.known = max(s.known, token) }

// read loads what a poll decides from: the state, the lease and this process's runs.
func (s *Scheduler) read(ctx context.Context, now time.Time) (view, error) {
	if err := ValidateTime("poll: now", now); err != nil {
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
	s.observe(snap.Token)
	if held {
		s.observe(cur.Token)
	}
	s.mu.Lock()
	local := maps.Clone(s.local)
	s.mu.Unlock()
	return newView(now, snap, cur, held, local), nil
}

// acquire takes the lease for the plan's heavy winner, if any. When another holder has
// it, the winner is deferred with ReasonLeaseHeld; when the Lease fails, the winner is
// left out and the error added to the plan's.
func (s *Scheduler) acquire(ctx context.Context, v view, pl *plan) (Grant, bool) {
	w := pl.winner
	if w == nil {
		return Grant{}, false
	}
	g, err := s.cfg.Lease.Acquire(ctx, s.cfg.Holder, s.cfg.LeaseTTL, v.now)
	switch {
	case err == nil:
		s.observe(g.Token)
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

// save writes a poll's changed states, fenced by the newest token seen.
func (s *Scheduler) save(ctx context.Context, writes []TaskState) error {
	if len(writes) == 0 {
		return nil
	}
	if err := s.cfg.StateStore.Save(ctx, s.known, writes...); err != nil {
		return fmt.Errorf("maintenance: poll: save state: %w", err)
	}
	return nil
}

// commit records a saved poll's dispatches in memory.
func (s *Scheduler) commit(heavy *Candidate, grant Grant, dispatched map[string]bool, now time.Time) {
	for name := range dispatched {
		s.started[name] = now
	}
	if heavy != nil {
		s.mu.Lock()
		s.grants[heavy.Task.Name], s.heavyTask = grant, heavy.Task.Name
		s.mu.Unlock()
	}
}

func (s *Scheduler) gauge(states []TaskState, cur Grant, held bool, now time.Time) Gauge {
	return computeGauge(states, cur, held, now, s.cfg.DegradeAfter, len(s.pol.tasks) == 0)
}

// Complete records the end of a run that Poll dispatched: LastRunAt becomes the time the
// run started, the outcome is derived from runErr (nil: succeeded; context cancellation,
// ErrHoldExceeded or ErrNotHolder: cancelled; else failed), and the running flag is
// cleared. A heavy task's state is written with the token of the grant it ran under — so
// a holder whose grant was replaced is refused with ErrStaleToken — and that grant is
// then released.
func (s *Scheduler) Complete(ctx context.Context, name string, runErr error, now time.Time) error {
	i, ok := s.pol.byName[name]
	if !ok {
		return fmt.Errorf("%w: complete: unknown task %s", ErrInvalid, quote(name))
	}
	s.pollMu.Lock()
	defer s.pollMu.Unlock()
	snap, err := s.cfg.StateStore.Load(ctx)
	if err != nil {
		return fmt.Errorf("maintenance: complete %q: load state: %w", name, err)
	}
	s.observe(snap.Token)
	var st TaskState
	if j := slices.IndexFunc(snap.States, func(x TaskState) bool { return x.Name == name }); j >= 0 {
		st = snap.States[j]
	}
	started, ok := s.started[name]
	if !ok {
		started = st.RunningSince
	}
	if started.IsZero() {
		started = now
	}
	st = finished(st, s.pol.tasks[i], started, runErr)

	s.mu.Lock()
	grant, heavy := s.grants[name]
	s.mu.Unlock()
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
		s.mu.Lock()
		delete(s.grants, name)
		if s.heavyTask == name {
			s.heavyTask = ""
		}
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}

// finished returns st after a run of t that started at started and ended with runErr.
func finished(st TaskState, t Task, started time.Time, runErr error) TaskState {
	st.Name, st.Class, st.Rank = t.Name, t.Class, t.Rank()
	st.LastRunAt, st.LastError = started, ""
	switch {
	case runErr == nil:
		st.LastOutcome = OutcomeSucceeded
	case errors.Is(runErr, context.Canceled) || errors.Is(runErr, context.DeadlineExceeded) ||
		errors.Is(runErr, ErrHoldExceeded) || errors.Is(runErr, ErrNotHolder):
		st.LastOutcome, st.LastError = OutcomeCancelled, sanitizeText(runErr.Error())
	default:
		st.LastOutcome, st.LastError = OutcomeFailed, sanitizeText(runErr.Error())
	}
	st.Running, st.RunningSince, st.RunningBy, st.RunningToken = false, time.Time{}, "", 0
	return st
}

// Renew extends the grant of the heavy task this scheduler runs, if any, to
// now + LeaseTTL. It returns ErrNotHolder once the grant has expired or was lost and
// ErrHoldExceeded past MaxHold: either way the task must stop. ctx bounds the Lease
// call; a host on the real clock bounds it by the grant's expiry, as Run does. Run
// renews on its own.
func (s *Scheduler) Renew(ctx context.Context, now time.Time) error {
	s.mu.Lock()
	name := s.heavyTask
	g, ok := s.grants[name]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	_, err := s.renewGrant(ctx, name, g, now)
	return err
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
	if cur, ok := s.grants[name]; ok && cur.Token == ng.Token && ng.ExpiresAt.After(cur.ExpiresAt) {
		s.grants[name] = ng
	}
	s.mu.Unlock()
	return ng, nil
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
	return s.gauge(snap.States, cur, held, now), nil
}
