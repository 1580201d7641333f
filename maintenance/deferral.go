package maintenance

import "time"

// Reason says why a due task did not start at a poll.
type Reason string

// The reasons of a Deferral (and of TaskState.DeferReason).
const (
	// ReasonGate: a soft gate's producer is due or running; Blocker is the producer.
	ReasonGate Reason = "gate"
	// ReasonHeavyBusy: heavy backpressure — a heavy task runs; Blocker is that task.
	ReasonHeavyBusy Reason = "heavy-busy"
	// ReasonLeaseHeld: the task won the pick but another holder has the lease; Blocker
	// is that holder.
	ReasonLeaseHeld Reason = "lease-held"
	// ReasonYield: the task won the pick but yielded to a waiter of another scheduler;
	// Blocker is that waiter.
	ReasonYield Reason = "yield"
	// ReasonOutranked: the task lost the pick; Blocker is the winner.
	ReasonOutranked Reason = "outranked"
	// ReasonDependency: a task it DependsOn runs, or a task that depends on it started
	// in the same poll; Blocker is that task.
	ReasonDependency Reason = "dependency-running"
	// ReasonDispatchLimit: an off-lease task beyond AlsoDispatchLimit; no Blocker.
	ReasonDispatchLimit Reason = "dispatch-limit"
)

// Deferral records that a due task did not start at a poll, why, and what blocked it.
type Deferral struct {
	// Task is the deferred task.
	Task string
	// Reason says why.
	Reason Reason
	// Blocker is the blocking task or lease holder ("" for ReasonDispatchLimit).
	Blocker string
	// Since is the start of the task's deferral streak.
	Since time.Time
}
