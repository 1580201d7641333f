package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// start is the simulated clock's first instant.
var start = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// claimFor is every scene's Config.ClaimFor: longer than any simulated job.
const claimFor = 5 * time.Minute

// world is one scene's deployment, in memory: an Index, the tenants' plans, a Dispatcher
// built by the scene, and simulated workers that run each dispatched item for a fixed time
// on the simulated clock and then complete it.
type world struct {
	idx     *duework.Memory
	plans   *tenancy.MemoryEntitlements
	d       *dispatch.Dispatcher
	work    time.Duration // how long a worker takes over one item; 0: done before the next cycle
	running []job         // items started and not yet completed
}

// job is one item a simulated worker is running.
type job struct {
	claim duework.Claim
	ends  time.Time
}

func newWorld() *world {
	return &world{idx: duework.NewMemory(), plans: tenancy.NewMemoryEntitlements()}
}

// dispatcher builds the world's Dispatcher: the given lanes, every tenant in the lane of
// its plan and with the limits of its plan (bridge.PlanLanes and bridge.PlanLimits over
// the host's two tables).
func (w *world) dispatcher(lanes []dispatch.LaneCapacity, global int, lanesByPlan map[tenancy.PlanID]dispatch.Lane,
	limitsByPlan map[tenancy.PlanID]duework.Limits) error {
	laneFor, err := bridge.PlanLanes(w.plans, lanesByPlan, lanes)
	if err != nil {
		return err
	}
	limitsFor, err := bridge.PlanLimits(w.plans, limitsByPlan)
	if err != nil {
		return err
	}
	w.d, err = dispatch.New(w.idx, dispatch.Config{
		Lanes: lanes, GlobalBatchLimit: global, LaneFor: laneFor, LimitsFor: limitsFor, ClaimFor: claimFor,
	})
	return err
}

// tenant puts user on plan and schedules sources of its work, all due at due.
func (w *world) tenant(ctx context.Context, user string, plan tenancy.PlanID, sources int, due time.Time) error {
	tc, err := tenancy.NewContext(user)
	if err != nil {
		return err
	}
	if err := w.plans.SetPlan(ctx, tc, plan); err != nil {
		return err
	}
	for i := range sources {
		e := duework.Entry{UserID: user, WorkKey: fmt.Sprintf("src%03d", i), Tier: "digest_weekly", DueAt: due}
		if err := w.idx.Schedule(ctx, tc, e); err != nil {
			return err
		}
	}
	return nil
}

// cycle completes the items whose job ended by now, then dispatches at now and starts the
// batch's items. A completed source is due again a week later (its weekly tier), so within
// a scene every source runs at most once.
func (w *world) cycle(ctx context.Context, now time.Time) (dispatch.Batch, error) {
	var done []duework.Done
	keep := w.running[:0]
	for _, r := range w.running {
		if r.ends.After(now) {
			keep = append(keep, r)
			continue
		}
		tc, err := tenancy.NewContext(r.claim.Entry.UserID)
		if err != nil {
			return dispatch.Batch{}, err
		}
		next := duework.Advance(r.claim.Entry, cadence.DigestWeekly, true, r.ends)
		done = append(done, duework.Done{Tenant: tc, Claim: r.claim, Next: next})
	}
	w.running = keep
	if len(done) > 0 {
		errs, err := w.idx.CompleteMany(ctx, done)
		if err != nil {
			return dispatch.Batch{}, err
		}
		if err := errors.Join(errs...); err != nil {
			return dispatch.Batch{}, err
		}
	}
	b, err := w.d.Dispatch(ctx, now)
	if err != nil {
		return dispatch.Batch{}, err
	}
	for _, it := range b.Items {
		w.running = append(w.running, job{claim: it.Claim, ends: now.Add(w.work)})
	}
	return b, nil
}

// started counts a batch's items per user.
func started(b dispatch.Batch) map[string]int {
	n := map[string]int{}
	for _, it := range b.Items {
		n[it.Claim.Entry.UserID]++
	}
	return n
}

// inFlight is the number of user's items running at now, as the Index counts them.
func (w *world) inFlight(ctx context.Context, user string, now time.Time) (int, error) {
	st, err := w.idx.User(ctx, user, now)
	return st.InFlight, err
}

// order lists the users a batch served, in dispatch order, each once.
func order(b dispatch.Batch) []string {
	var users []string
	for _, it := range b.Items {
		if u := it.Claim.Entry.UserID; !slices.Contains(users, u) {
			users = append(users, u)
		}
	}
	return users
}

// clock formats an instant of a scene as minutes and seconds from its start.
func clock(t time.Time) string {
	d := t.Sub(start)
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}
