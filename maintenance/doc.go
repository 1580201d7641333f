// Package maintenance schedules the heavy maintenance jobs of one daemon, or of a fleet,
// that share one exclusive lease, so that the chain of jobs drains to idle in bounded time.
//
// # The model
//
// A Task is Heavy (it contends for the lease) or OffLease (it never takes it). At every
// poll the Scheduler asks each task whether it is due, defers the tasks whose soft Gate is
// closed (the producer is due or running), and ranks the due heavy tasks with Pick:
//
//  1. drop candidates already running; while a heavy task runs, every heavy candidate;
//     candidates a DependsOn task of which runs;
//  2. a data-safety candidate wins (registry order among them), then a bootstrap one;
//  3. then the oldest waiter that has waited at least YieldAfter (fairness promotion);
//  4. then the staleness representative, the greatest (now − LastRunAt) / Cadence, never-run
//     tasks first, registry order on a tie — unless a task without cadence stands earlier in
//     the registry, which goes first.
//
// The heavy winner yields to a better waiter of another scheduler sharing the state, or
// acquires the Lease; a second pass then ranks the due OffLease tasks the same way and
// dispatches up to AlsoDispatchLimit of them beside it. Every task that starts is claimed
// in the StateStore first, so that it runs on one scheduler of the fleet at a time. Every
// due task that does not start is a Deferral with a Reason and its blocker, and starts or
// continues its durable deferral streak. The Gauge, computed from the durable state,
// shows the lease holder, every waiter and its wait, the deferral chain depth and a
// Posture.
//
// # Where to start
//
// Build the registry (a []Task, in priority order for ties), call NewScheduler with a
// Config (zero values are defaults; nil Lease and StateStore mean in-memory ones) and call
// Run. Hosts with their own loop call Poll, run what it dispatched, call Renew while
// tasks run and Complete when each task ends. Pick is pure and usable alone.
//
// # Running it
//
// Run polls every PollInterval and as soon as a task ends and runs each dispatched task in
// its own goroutine. A task runs exactly as long as its claim covers it — a heavy task's
// claim follows its lease grant: Run extends the claim every LeaseTTL/3 (renewing the
// grant first), retries a failed extension until the claim would lapse, and cancels the
// task's context when the claim lapses unextended — on a timer, whatever a hung call is
// doing — when the grant or the claim is lost, and at MaxHold. It records each outcome,
// retrying a failed write until the claim would lapse. Run reads time only from
// Config.Clock; Poll, Renew and Complete take now.
//
// # Observing
//
// Every poll writes one line to Config.Logger — Info, or Error with the error — and,
// when Config.Observer is set, hands it a PollReport. When a waiter has waited longer
// than DegradeAfter the gauge reads PostureDegraded: the report says so once
// (PollReport.TurnedDegraded) with a Warn line naming the longest waiter, and once more
// when it recovers. Because the gauge is computed from durable state, a stall that began
// before a restart is reported at the first poll after it, and any process — an operator
// page, a health check — reads it with ReadGauge from the StateStore (and the Lease, if it
// has it) alone, without the task list. The rota/otel module exports the reports as
// metrics.
//
// # Durable state, claims and fencing
//
// The StateStore keeps every task's TaskState, and every write the Scheduler makes is a
// StateStore.Update: an atomic read-modify-write of a few states, so that schedulers
// sharing a store never overwrite each other. A task starts only through a claim, a
// compare-and-set that wins when no scheduler of the fleet runs the task nor a task it
// DependsOn: two schedulers that poll at the same instant start it once, and DependsOn
// holds across the fleet. A claim lapses on its own at RunningUntil, LeaseTTL after its
// last extension and never past MaxHold from its start, so a scheduler that crashed, or
// whose write of an outcome could not be made, blocks the task for at most one LeaseTTL.
// Deferrals are recorded by every scheduler, holder of the lease or not, and never over
// a task that runs elsewhere.
//
// Writes are fenced by the lease: a heavy run whose grant a later one replaced can claim,
// extend or finish nothing (ErrStaleToken), and its running flag stops counting from the
// moment of the new grant.
//
// # Names and times
//
// Task, holder and lease names are valid names by the rule every rota package uses
// (tenancy.ValidateID's): 1 to 256 bytes of valid UTF-8, no control or format character
// (Unicode Cc and Cf) anywhere and no white space at either end. Stored times, and every
// now, lie in years 1 to 9999 UTC, both included; the zero time stands for "never". Every
// Lease and StateStore refuses anything else with ErrInvalid, naming the field, and
// maintenancetest holds every adapter to that and to the rest of the contracts.
//
// # Bounds
//
// With promotion, the enforced MaxHold and fleet yielding, no due heavy task waits longer
// than YieldAfter + (number of heavy tasks) × MaxHold + one poll interval, provided the
// host polls again as soon as a run ends (Run does) — data-safety tasks excepted: they
// win outright. Without promotion a short-cadence task that holds the lease long (a 10
// minute cadence, 45 minute runs) wins every release and a daily task waits for days.
//
// # Performance
//
// Pick is O(candidates × (running + dependencies)) and allocates in proportion to its
// input. A poll makes one StateStore Load, one Lease Current, at most one Acquire and two
// Updates (the heavy claim; the second pass's claims and the deferrals), whatever the
// number of tasks; a run makes one Update per extension, every LeaseTTL/3, and one to
// finish. With a registry of tens of tasks those round trips are the cost, not the
// ranking.
//
// # Details
//
//   - A promoted waiter outranks a cadence-less task earlier in the registry (otherwise an
//     always-due cadence-less task could starve it); data-safety and bootstrap still win.
//   - PickInput.YieldAfter ≤ 0 disables promotion: Pick is then the plain staleness
//     picker. The Scheduler always passes its YieldAfter.
//   - LastRunAt is the start of the latest finished run, whatever its outcome, so a task
//     that runs longer than its cadence is due again as soon as it ends, and a failing task
//     does not stay the stalest forever.
//   - Lease.Acquire refuses the caller too while its own grant is live; only Renew extends a
//     hold, so MaxHold cannot be dodged by re-acquiring.
//   - Fleet yielding looks only at waiters of tasks this scheduler does not know (its own
//     are ranked by Pick), and ignores waiter records not refreshed within YieldAfter,
//     presumed abandoned by a scheduler that stopped.
//   - Tasks started in one poll count as running for each other's DependsOn in both
//     directions: a task does not start beside a task that depends on it.
//   - Winner is the heavy winner, or the first off-lease task when no heavy one started;
//     Winner and AlsoDispatched together hold at most AlsoDispatchLimit off-lease tasks.
//   - An empty registry is valid and its gauge reads PostureDisabled; PostureUnknown is
//     the posture of a poll that could not read the state.
//   - A task's context has no Deadline, which would be meaningless on a fake Clock: at
//     MaxHold it is cancelled with a cause wrapping ErrHoldExceeded, and when its grant or
//     claim lapses unextended or is lost, with one wrapping ErrNotHolder.
//   - An error other than ErrNotHolder, ErrStaleToken, ErrHoldExceeded or ErrInvalid is
//     transient: Run retries a renewal, an extension or the write of an outcome after
//     LeaseTTL/64, doubling up to LeaseTTL/8, until the grant or the claim would lapse.
//   - A claim whose write failed may have taken effect all the same: the scheduler's next
//     poll does not count it as running and clears it, so the task waits one poll, not a
//     LeaseTTL.
//   - A claim that another scheduler took first is no Deferral: that task runs.
//   - A task's error is stored as LastError with invalid UTF-8 and NUL replaced by U+FFFD,
//     so that every store can hold it.
package maintenance
