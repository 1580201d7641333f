package dispatch

import (
	"context"
	"time"

	"github.com/rotaworks/rota/duework"
)

// Lane names a priority lane, such as "pro", "plus" or "free".
type Lane string

// LaneCapacity bounds one lane's share of a dispatch cycle.
type LaneCapacity struct {
	Lane Lane
	// PerUserLimit is the most items one user gets from this lane in a cycle.
	PerUserLimit int
	// PerCycleLimit is the most items the lane dispatches in a cycle.
	PerCycleLimit int
	// MinShare reserves that many of the global batch slots for this lane before higher
	// lanes take the rest. Zero (the default) is strict priority.
	MinShare int
}

// LaneFor resolves a user's lane, typically from the user's plan (see bridge.PlanLanes).
type LaneFor func(ctx context.Context, userID string) (Lane, error)

// Config configures a Dispatcher. Every field is required but Observer.
type Config struct {
	// Lanes lists the lanes, highest priority first.
	Lanes []LaneCapacity
	// GlobalBatchLimit is the most items one cycle dispatches across all lanes.
	GlobalBatchLimit int
	// LaneFor resolves each user with due work to a lane.
	LaneFor LaneFor
	// ClaimFor is how long a dispatched item stays claimed: the worker's deadline, after
	// which the entry is due again and may be dispatched elsewhere.
	ClaimFor time.Duration
	// Observer, when not nil, is told about every cycle (see Observer). Nil reports
	// nothing and costs nothing.
	Observer Observer
}

// Batch is what one dispatch cycle hands out and what it could not.
type Batch struct {
	// Items are the claimed entries, highest lane first, each lane in its fair order.
	Items []Item
	// ShedUserIDs names, sorted and once each, every user who had due work this cycle and
	// did not get all of it dispatched. Their work stays due.
	ShedUserIDs []string
	// Unrouted lists the users whose lane could not be resolved; their work stays due.
	Unrouted []Unrouted
	// Lanes reports each configured lane, in Config order.
	Lanes []LaneReport
}

// Item is one dispatched entry: run it, then complete its claim.
type Item struct {
	Claim duework.Claim
	Lane  Lane
}

// Unrouted is a user with due work whose lane could not be resolved this cycle.
type Unrouted struct {
	UserID string
	Err    error
}

// LaneReport counts one lane's cycle.
type LaneReport struct {
	Lane Lane
	// Users is the number of users in the lane with due work this cycle.
	Users int
	// Dispatched is the number of items claimed for the lane.
	Dispatched int
	// Shed is the number of the lane's users named in ShedUserIDs.
	Shed int
	// LostClaims is the number of selected entries another dispatcher claimed first.
	LostClaims int
}

// SelectInput is everything the pure selection needs.
type SelectInput struct {
	// Heads are the users with due work, as duework.Index.DueHeads returns them.
	Heads []duework.Head
	// LaneOf maps each routed user to its lane; users missing from it are not selected.
	LaneOf map[string]Lane
	// Lanes lists the lanes, highest priority first.
	Lanes []LaneCapacity
	// GlobalBatchLimit caps the selection across lanes.
	GlobalBatchLimit int
}

// Selection is the fair batch Select chose, before any claim.
type Selection struct {
	// Items in dispatch order: highest lane first, each lane in its fair order.
	Items []Selected
	// ShedUserIDs names, sorted and once each, every user of Heads who was not selected
	// for all of its due work (including users without a lane).
	ShedUserIDs []string
}

// Selected is one entry Select chose, with its lane.
type Selected struct {
	Entry duework.Entry
	Lane  Lane
}
