package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rotaworks/rota/duework"
)

var (
	// ErrUnknownLane is the reason in Unrouted, and in Reroute's error, when LaneFor
	// returns a lane that Config.Lanes does not hold.
	ErrUnknownLane = errors.New("dispatch: unknown lane")
	// ErrLaneForPanic is the reason in Unrouted, and in Reroute's error, when LaneFor
	// panicked; the panic value follows it in the message.
	ErrLaneForPanic = errors.New("dispatch: LaneFor panicked")
)

// Dispatcher hands out fair batches of due work from a duework.Index; each Dispatch call
// is one cycle. It keeps nothing between cycles — turns, holds and lanes live in the
// index — so several Dispatchers, in one process or many, may share one index. It is safe
// for concurrent use as far as its Index and LaneFor are.
type Dispatcher struct {
	idx        duework.Index
	lanes      []LaneCapacity
	laneIdx    map[Lane]int
	global     int
	laneFor    LaneFor
	claimFor   time.Duration
	holdFor    time.Duration
	retryAfter time.Duration
	routeLimit int
	obs        Observer
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
		claimFor:   cfg.ClaimFor,
		holdFor:    cfg.HoldFor,
		retryAfter: cfg.RetryAfter,
		routeLimit: cfg.RouteLimit,
		obs:        cfg.Observer,
	}
	for i, lc := range d.lanes {
		d.laneIdx[lc.Lane] = i
	}
	return d, nil
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
	// Err wraps LaneFor's error, ErrLaneForPanic, ErrUnknownLane or the Index's error.
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
	// WaitingSince is the Turn of the lane's first ready user the cycle did not serve;
	// zero when none. now − WaitingSince is how long the lane keeps someone waiting.
	WaitingSince time.Time
}

// Dispatch runs one cycle at now and returns what it claimed, whom it left waiting and
// whose lane it could not resolve. It routes up to RouteLimit new users (and users of
// lanes the Config no longer names), reads each lane's next users in turn order, hiding
// them from other dispatchers, lets Select choose, claims the choice until now+ClaimFor,
// hands back the users it did not serve, and moves served users whose lane changed.
//
// A cycle costs what it reads — about GlobalBatchLimit users and RouteLimit new ones, a few
// Index calls per lane, one LaneFor per user it routes or serves — never the number of
// users with due work nor anyone's backlog. On error it returns a zero Batch after handing
// back what it read: nothing is lost. Most callers run it on a timer, as bridge.Runner does.
func (d *Dispatcher) Dispatch(ctx context.Context, now time.Time) (Batch, error) {
	c := cycle{d: d, ctx: ctx, now: now}
	b, err := c.run()
	if d.obs != nil {
		d.obs.ObserveDispatch(CycleInfo{Now: now, Batch: b, Err: err})
	}
	return b, err
}

// Reroute resolves the named users' lanes now and moves each to its lane, keeping its
// place in the queue: a host calls it when a tenant's plan changes, so the change applies
// from the next cycle. Users the index does not store are ignored. It calls LaneFor once
// per user and Index.Route once; the users whose lane could not be resolved are left where
// they are, and the error names each of them.
func (d *Dispatcher) Reroute(ctx context.Context, userIDs ...string) error {
	var errs []error
	routes := make([]duework.Route, 0, len(userIDs))
	for _, id := range userIDs {
		lane, err := d.resolve(ctx, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		routes = append(routes, duework.Route{UserID: id, Group: string(lane)})
	}
	if len(routes) > 0 {
		if err := d.idx.Route(ctx, routes); err != nil {
			errs = append(errs, fmt.Errorf("dispatch: Index.Route: %w", err))
		}
	}
	return errors.Join(errs...)
}

// resolve returns user's lane from LaneFor, or an error when LaneFor fails, panics or
// names a lane the Config does not hold.
func (d *Dispatcher) resolve(ctx context.Context, user string) (lane Lane, err error) {
	defer func() {
		if r := recover(); r != nil {
			lane, err = "", fmt.Errorf("dispatch: LaneFor(%q): %w: %v", user, ErrLaneForPanic, r)
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

// sortUnrouted puts the unrouted users in UserID order.
func sortUnrouted(u []Unrouted) {
	slices.SortFunc(u, func(a, b Unrouted) int { return strings.Compare(a.UserID, b.UserID) })
}
