package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
)

// LateAlarm names a tenant whose work is late: the oldest visible DueAt among its
// entries, as its lane's read found it (dispatch.LaneReport.Overdue), lies more than
// RunnerConfig.AlarmAfter before the cycle's now. Where the noisy-neighbour alarm says a
// lane keeps someone waiting, this one says whose work waits, whatever the reason — its
// neighbours, its own limits, or too few workers. A tenant raises it once per episode; the
// episode ends in the first cycle that finds its work within the threshold, or its lane's
// oldest work within it (CycleReport.LateRecovered). A failed dispatch neither raises nor
// ends one.
type LateAlarm struct {
	Lane   dispatch.Lane
	UserID string
	// Late is how late the tenant's oldest visible work was: the cycle's now minus its
	// DueAt.
	Late time.Duration
}

// lateState holds the tenants in an episode, each with its lane.
type lateState struct {
	mu sync.Mutex
	on map[string]dispatch.Lane
}

// update raises and ends lateness alarms for batch b at now. Pure but for the state.
func (s *lateState) update(after time.Duration, now time.Time, b dispatch.Batch) (raised []LateAlarm, recovered []string) {
	if after < 0 {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range b.Lanes {
		seen := make(map[string]bool, len(l.Overdue))
		for _, o := range l.Overdue {
			seen[o.UserID] = true
			late := now.Sub(o.DueAt)
			_, on := s.on[o.UserID]
			switch {
			case late > after && !on:
				if s.on == nil {
					s.on = map[string]dispatch.Lane{}
				}
				s.on[o.UserID] = l.Lane
				raised = append(raised, LateAlarm{Lane: l.Lane, UserID: o.UserID, Late: late})
			case late > after:
				s.on[o.UserID] = l.Lane
			case on:
				delete(s.on, o.UserID)
				recovered = append(recovered, o.UserID)
			}
		}
		if l.OldestDue.IsZero() || now.Sub(l.OldestDue) <= after {
			for u, lane := range s.on {
				if lane == l.Lane && !seen[u] {
					delete(s.on, u)
					recovered = append(recovered, u)
				}
			}
		}
	}
	slices.Sort(recovered)
	return raised, recovered
}

// starvedCycles is how many cycles in a row a Runner must dispatch nothing, while due
// work is kept from it, before it reports a Starvation.
const starvedCycles = 3

// Starvation says a Runner has dispatched nothing for three cycles in a row
// although due work was there, kept from it by other dispatchers. The likely cause is
// clock skew: a replica whose clock lags the others' finds every user it could serve
// already served at a later time than its now, or held by another replica, and its claims
// lose. It is reported once (a Warn line "rota: dispatching nothing"), and again only
// after a cycle dispatched or found no due work kept from it (CycleReport.StarvationEnded).
type Starvation struct {
	// Cycles is how many cycles in a row dispatched nothing.
	Cycles int
	// Reason is what the last of them saw.
	Reason string
}

// The reasons of a Starvation.
const (
	starvedLost   = "every claim lost to another dispatcher"
	starvedServed = "due work whose user another dispatcher served at a later time than this Runner's clock reads"
	starvedHeld   = "due work whose user another dispatcher holds for longer than HoldFor from this Runner's clock"
)

// skewState counts the cycles in a row that dispatched nothing while due work was kept
// from the Runner.
type skewState struct {
	mu     sync.Mutex
	run    int
	warned bool
}

// update counts a cycle that saw reason ("" when it dispatched, or found no due work kept
// from it) and says whether it starts or ends a Starvation.
func (s *skewState) update(reason string) (starved *Starvation, ended bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if reason == "" {
		s.run = 0
		ended, s.warned = s.warned, false
		return nil, ended
	}
	s.run++
	if s.run >= starvedCycles && !s.warned {
		s.warned = true
		return &Starvation{Cycles: s.run, Reason: reason}, false
	}
	return nil, false
}

// watchSkew counts the cycle of batch b for the Starvation report. A cycle that dispatched
// nothing without a lost claim costs one Index.DueBefore of one entry, and one Index.User
// when it finds one. A failed dispatch or probe counts for nothing.
func (r *Runner) watchSkew(ctx context.Context, rep *CycleReport, b dispatch.Batch, err error) {
	if err != nil {
		return
	}
	reason := ""
	switch {
	case len(b.Items) > 0:
	case dispatchLostClaims(b.Lanes) > 0:
		reason = starvedLost
	default:
		reason, err = r.probe(ctx, rep.Now)
		if err != nil {
			rep.ProbeErr = err
			return
		}
	}
	rep.Starved, rep.StarvationEnded = r.skew.update(reason)
}

// probe looks at the oldest due entry visible at now and says whether its user is kept
// from this Runner by another dispatcher whose clock runs ahead of this Runner's: served
// at a later time than this Runner's clock reads, or held beyond it plus HoldFor. A user
// another dispatcher is serving at that moment, in step with this clock, is not.
func (r *Runner) probe(ctx context.Context, now time.Time) (string, error) {
	due, err := r.b.Index.DueBefore(ctx, now, 1)
	if err != nil {
		return "", fmt.Errorf("bridge: probe for due work at %v: %w", now, err)
	}
	if len(due) == 0 {
		return "", nil
	}
	st, err := r.b.Index.User(ctx, due[0].UserID, now)
	clockNow := r.cfg.Clock.Now()
	switch {
	case errors.Is(err, duework.ErrNotFound):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("bridge: probe for due work at %v: %w", now, err)
	// With the clocks in step, another dispatcher's LastServed is no later than the time
	// of this probe and its hold no later than that plus HoldFor: more is its clock ahead.
	case st.LastServed.After(clockNow):
		return starvedServed, nil
	case st.HeldUntil.After(clockNow.Add(r.holdFor)):
		return starvedHeld, nil
	}
	return "", nil
}
