package dispatch

import (
	"context"
	"time"
)

// Observer is told about every dispatch cycle of a Dispatcher whose Config.Observer it is:
// a logger, a metrics exporter (the rota/otel module has one), a test's recorder.
//
// ObserveDispatch is called once per cycle, synchronously, before Dispatch or Cycle
// returns, from the goroutine that dispatched; a Dispatcher used from several goroutines
// calls it from each, so an Observer shared that way must be safe for concurrent use. It
// must not modify the report's slices, and must copy what it keeps: they are the Batch the
// caller is handed. It should return quickly: the cycle's claims are running.
type Observer interface {
	ObserveDispatch(CycleInfo)
}

// ObserverFunc adapts a function to an Observer.
type ObserverFunc func(CycleInfo)

// ObserveDispatch calls f(info).
func (f ObserverFunc) ObserveDispatch(info CycleInfo) { f(info) }

// CycleInfo is what one dispatch cycle knows about itself: the Batch it handed out, with its
// per-lane counts (Batch.Lanes: users with due work, dispatched, shed, lost claims), the
// unrouted users (Batch.Unrouted), and the lane of every shed user. A Dispatcher has no
// clock, so the cycle's duration is not here: bridge.Runner measures it on its Clock.
type CycleInfo struct {
	// Now is the cycle's now.
	Now time.Time
	// Batch is what Dispatch returns: the zero Batch when Err is not nil.
	Batch Batch
	// Shed is Batch.ShedUserIDs with each user's lane, in the same (UserID) order; the
	// lane is empty for a user who is shed because it is unrouted.
	Shed []ShedUser
	// Err is the cycle's error, as Dispatch returns it.
	Err error
}

// ShedUser is one user who had due work in a cycle and did not get all of it dispatched.
type ShedUser struct {
	UserID string
	// Lane is the user's lane this cycle; empty when the user was unrouted.
	Lane Lane
}

// Cycle runs one dispatch cycle exactly like [Dispatcher.Dispatch] and returns its
// CycleInfo, Batch included; the Config.Observer, if any, is told before Cycle returns.
// Dispatch is what most callers want; Cycle is for a caller that wants the shed users'
// lanes too, such as bridge.Runner's noisy-neighbour alarm. It costs Dispatch plus one
// slice of the shed users.
func (d *Dispatcher) Cycle(ctx context.Context, now time.Time) (CycleInfo, error) {
	b, shed, err := d.dispatch(ctx, now, true)
	info := CycleInfo{Now: now, Batch: b, Shed: shed, Err: err}
	if d.obs != nil {
		d.obs.ObserveDispatch(info)
	}
	return info, err
}
