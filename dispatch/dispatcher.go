package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rotaworks/rota/duework"
)

var (
	// ErrUnknownLane is the reason in Unrouted, and in Reroute's error, when LaneFor
	// returns a lane that Config.Lanes does not hold.
	ErrUnknownLane = errors.New("dispatch: unknown lane")
	// errLaneForPanic is the reason in Unrouted, and in Reroute's error, when LaneFor
	// panicked; the panic value follows it in the message.
	errLaneForPanic = errors.New("dispatch: LaneFor panicked")
	// errLimitsForPanic is errLaneForPanic's twin for LimitsFor.
	errLimitsForPanic = errors.New("dispatch: LimitsFor panicked")
)

// Dispatcher hands out fair batches of due work from a duework.Index; each Dispatch call
// is one cycle. It keeps no state between cycles — turns, holds and lanes live in the
// index — so several Dispatchers, in one process or many, may share one index. It is safe
// for concurrent use as far as its Index and LaneFor are.
type Dispatcher struct {
	idx        duework.Index
	lanes      []LaneCapacity
	laneIdx    map[Lane]int
	global     int
	laneFor    LaneFor
	limitsFor  LimitsFor
	claimFor   time.Duration
	holdFor    time.Duration
	retryAfter time.Duration
	routeLimit int
	obs        Observer
	cfg        Config                  // as given to New, with its defaults
	memory     *duework.Memory         // idx, when it is one: cycles read and claim into kept memory
	spare      atomic.Pointer[scratch] // the last cycle's memory, for the next
}

// New returns a Dispatcher over idx, or an error wrapping ErrInvalidConfig that names
// every bad field when idx is nil or cfg is invalid (see Config). New copies cfg.Lanes.
func New(idx duework.Index, cfg Config) (*Dispatcher, error) {
	cfg = cfg.withDefaults()
	err := cfg.validate()
	if idx == nil {
		err = errors.Join(fmt.Errorf("%w: New's idx must not be nil, got nil", ErrInvalidConfig), err)
	}
	if err != nil {
		return nil, err
	}
	d := &Dispatcher{
		idx:        idx,
		lanes:      slices.Clone(cfg.Lanes),
		laneIdx:    make(map[Lane]int, len(cfg.Lanes)),
		global:     cfg.GlobalBatchLimit,
		laneFor:    cfg.LaneFor,
		limitsFor:  cfg.LimitsFor,
		claimFor:   cfg.ClaimFor,
		holdFor:    cfg.HoldFor,
		retryAfter: cfg.RetryAfter,
		routeLimit: cfg.RouteLimit,
		obs:        cfg.Observer,
		cfg:        cfg,
	}
	d.memory, _ = idx.(*duework.Memory)
	d.cfg.Lanes = slices.Clone(cfg.Lanes)
	for i, lc := range d.lanes {
		d.laneIdx[lc.Lane] = i
	}
	return d, nil
}

// Config returns the Dispatcher's configuration, its zero fields replaced by their
// defaults: what a worker needs to check its claim margin against (ClaimFor, MaxClockSkew).
// The Lanes slice is the caller's.
func (d *Dispatcher) Config() Config {
	c := d.cfg
	c.Lanes = slices.Clone(d.cfg.Lanes)
	return c
}

// Batch is what one dispatch cycle hands out and what it could not.
type Batch struct {
	// Items are the claimed entries, highest lane first, each lane in its fair order.
	Items []Item
	// ShedUserIDs names, sorted and once each, every user a lane read who was left with
	// visible work undispatched. Their work stays due.
	ShedUserIDs []string
	// Unrouted lists, by UserID, the users whose lane could not be resolved, with the
	// reason. A new user's work stays due and it is tried again after RetryAfter; a served
	// user stays in its lane.
	Unrouted []Unrouted
	// Lanes reports each configured lane, in Config order.
	Lanes []LaneReport
}

// Item is one dispatched entry: run it, then complete its claim.
type Item struct {
	Claim duework.Claim
	Lane  Lane
}

// Unrouted is a user whose lane could not be resolved in a cycle.
type Unrouted struct {
	UserID string
	// Err wraps LaneFor's or LimitsFor's error, ErrUnknownLane, duework.ErrInvalid for
	// limits that fail their Validate, or the Index's error; a LaneFor or LimitsFor that
	// panicked is an error naming the function, with the panic value.
	Err error
}

// LaneReport counts one lane's cycle.
type LaneReport struct {
	Lane Lane
	// Users is the number of users the lane read.
	Users int
	// Dispatched is the number of items claimed for the lane.
	Dispatched int
	// Shed is the number of the lane's users named in ShedUserIDs.
	Shed int
	// LostClaims is the number of selected entries another dispatcher claimed first.
	LostClaims int
	// WaitingSince is the Turn of the lane's first ready user the cycle did not serve —
	// read and served nothing, or else the first it left unread; zero when none. now −
	// WaitingSince is how long the lane keeps someone waiting on its neighbours. A user
	// held back by its own limits that got all it could have does not set it.
	WaitingSince time.Time
	// Limited is the number of the lane's users read whose own limits (MaxInFlight or a
	// rate) held back visible work: their Due was shorter than the lane's read. Those that
	// got all their Due are not shed; those the lane cut further are.
	Limited int
	// WeightCapped is the number of the lane's users read with a weight above 1 whose
	// weight times the lane's PerUserLimit exceeds its PerCycleLimit: one cycle of the
	// lane cannot hold their weighted fair cap, so the weight counts less than it says.
	WeightCapped int
	// OldestDue is the oldest DueAt among the visible entries of the users the lane read,
	// served or not, zero when none: now − OldestDue is how late the lane's most overdue
	// work is. A lane left no room still reads its first user, unheld, for WaitingSince;
	// that user counts here and in Overdue (not in Users), so a starved lane's lateness
	// shows.
	OldestDue time.Time
	// Overdue names up to ten of the users counted in OldestDue, with the DueAt of
	// each one's oldest visible entry, oldest first (ties by UserID). The slices of every
	// lane of a Batch share one allocation.
	Overdue []Overdue
}

// maxOverdue is the most users a LaneReport names in Overdue.
const maxOverdue = 10

// Overdue is one user a lane read, with the DueAt of its oldest visible entry.
type Overdue struct {
	UserID string
	DueAt  time.Time
}

// Dispatch runs one cycle at now and returns what it claimed, whom it left waiting and
// whose lane it could not resolve. It routes up to RouteLimit new users (and users of
// lanes the Config no longer names), reads each lane's next users in turn order, hiding
// them from other dispatchers, lets Select choose, claims the choice until now+ClaimFor,
// hands back the users it did not serve, and moves served users whose lane or limits
// changed.
//
// A cycle costs what it reads — about GlobalBatchLimit users and RouteLimit new ones, a few
// Index calls per lane, one LaneFor (and one LimitsFor) per user it routes or serves —
// never the number of users with due work nor anyone's backlog. On error it returns a zero Batch after handing
// back what it read: nothing is lost. Most callers run it on a timer, as bridge.Runner does.
func (d *Dispatcher) Dispatch(ctx context.Context, now time.Time) (Batch, error) {
	return d.dispatch(ctx, now, d.lanes, d.global)
}

// Take caps one cycle of DispatchAtMost: Total caps the whole batch and PerLane[lane] the
// lane's items; a lane absent from PerLane has no cap beyond its PerCycleLimit, and a
// lane PerLane names that Config.Lanes does not is ignored. A negative count is 0; the
// zero Take claims nothing.
type Take struct {
	Total   int
	PerLane map[Lane]int
}

// DispatchAtMost is Dispatch with GlobalBatchLimit lowered to t.Total and each lane's
// PerCycleLimit (and MinShare) to t.PerLane[lane], by the same rules: each lane reads its
// users in the same turn order, and its items are a prefix of the ones a Dispatch would
// give it, or more of them when the lanes above are capped. Routing is not capped. A lane
// capped at 0 reads only one user, unheld, for its WaitingSince, OldestDue and Overdue,
// and a Total of 0 claims nothing. A feeder that hands items to a queue calls it with
// what the queue's consumers can take (see bridge.Sink). It costs what Dispatch costs for
// the lowered caps.
func (d *Dispatcher) DispatchAtMost(ctx context.Context, now time.Time, t Take) (Batch, error) {
	global := min(d.global, max(t.Total, 0))
	lanes := slices.Clone(d.lanes)
	for i := range lanes {
		lc := &lanes[i]
		if n, ok := t.PerLane[lc.Lane]; ok {
			lc.PerCycleLimit = min(lc.PerCycleLimit, max(n, 0))
		}
		lc.MinShare = min(lc.MinShare, lc.PerCycleLimit, global)
	}
	return d.dispatch(ctx, now, lanes, global)
}

// dispatch runs one cycle over lanes, the Dispatcher's with their caps, and global.
func (d *Dispatcher) dispatch(ctx context.Context, now time.Time, lanes []LaneCapacity, global int) (Batch, error) {
	c := cycle{d: d, ctx: ctx, now: now, lanes: lanes, global: global, s: d.getScratch()}
	b, err := c.run()
	d.putScratch(c.s)
	if d.obs != nil {
		d.obs.ObserveDispatch(CycleInfo{Now: now, Batch: b, Err: err})
	}
	return b, err
}

// Reroute resolves the named users' lanes and limits now and moves each to its lane with
// its limits, keeping its place in the queue: a host calls it when a tenant's plan
// changes, so the change applies from the next cycle. Users the index does not store are
// ignored. It calls LaneFor once per user, LimitsFor once per user whose lane it resolved,
// and Index.Route once; the users whose lane or limits could not be resolved are left
// where they are, and the error names each of them.
func (d *Dispatcher) Reroute(ctx context.Context, userIDs ...string) error {
	var errs []error
	routes := make([]duework.Route, 0, len(userIDs))
	for _, id := range userIDs {
		lane, limits, err := d.resolve(ctx, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		routes = append(routes, duework.Route{UserID: id, Group: string(lane), Limits: limits})
	}
	if len(routes) > 0 {
		if err := d.idx.Route(ctx, routes); err != nil {
			errs = append(errs, fmt.Errorf("dispatch: Index.Route: %w", err))
		}
	}
	return errors.Join(errs...)
}

// resolve returns user's lane from LaneFor and, once LaneFor named a configured lane, its
// limits from LimitsFor (zero limits when LimitsFor is nil). It returns an error when
// LaneFor fails, panics or names a lane the Config does not hold, or LimitsFor fails,
// panics or returns limits that fail their Validate: those are never routed.
func (d *Dispatcher) resolve(ctx context.Context, user string) (Lane, duework.Limits, error) {
	lane, err := d.lane(ctx, user)
	if err != nil {
		return "", duework.Limits{}, err
	}
	if d.limitsFor == nil {
		return lane, duework.Limits{}, nil
	}
	limits, err := d.limits(ctx, user)
	if err != nil {
		return "", duework.Limits{}, err
	}
	return lane, limits, nil
}

// lane calls LaneFor, recovering a panic.
func (d *Dispatcher) lane(ctx context.Context, user string) (lane Lane, err error) {
	defer func() {
		if r := recover(); r != nil {
			lane, err = "", fmt.Errorf("dispatch: LaneFor(%q): %w: %v", user, errLaneForPanic, r)
		}
	}()
	lane, err = d.laneFor(ctx, user)
	if err != nil {
		return "", fmt.Errorf("dispatch: LaneFor(%q): %w", user, err)
	}
	if _, ok := d.laneIdx[lane]; !ok {
		return "", fmt.Errorf("dispatch: LaneFor(%q): %w %q", user, ErrUnknownLane, lane)
	}
	return lane, nil
}

// limits calls LimitsFor, recovering a panic, and validates what it returns.
func (d *Dispatcher) limits(ctx context.Context, user string) (limits duework.Limits, err error) {
	defer func() {
		if r := recover(); r != nil {
			limits, err = duework.Limits{}, fmt.Errorf("dispatch: LimitsFor(%q): %w: %v", user, errLimitsForPanic, r)
		}
	}()
	limits, err = d.limitsFor(ctx, user)
	if err == nil {
		err = limits.Validate()
	}
	if err != nil {
		return duework.Limits{}, fmt.Errorf("dispatch: LimitsFor(%q): %w", user, err)
	}
	return limits, nil
}

// sortUnrouted puts the unrouted users in UserID order.
func sortUnrouted(u []Unrouted) {
	slices.SortFunc(u, func(a, b Unrouted) int { return strings.Compare(a.UserID, b.UserID) })
}
