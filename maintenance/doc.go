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
// dispatches up to AlsoDispatchLimit of them beside it. Every due task that does not start
// is a Deferral with a Reason and its blocker, and starts or continues its durable
// deferral streak. The Gauge, computed from the durable state, shows the lease holder,
// every waiter and its wait, the deferral chain depth and a Posture.
//
// # Where to start
//
// Build the registry (a []Task, in priority order for ties), call NewScheduler with a
// Config (zero values are defaults; nil Lease and StateStore mean in-memory ones) and call
// Run. Hosts with their own loop call Poll, run what it dispatched, call Renew while the
// heavy task runs and Complete when each task ends. Pick is pure and usable alone.
//
// # Running it
//
// Run polls every PollInterval and as soon as a task ends and runs each dispatched task in
// its own goroutine. A heavy task runs exactly as long as a live grant covers it: Run
// renews the grant every LeaseTTL/3, retries a failed renewal until the grant expires, and
// cancels the task's context when the grant expires unrenewed — on a timer at ExpiresAt,
// whatever a hung renewal is doing — when the lease is lost, and at MaxHold. Run reads
// time only from Config.Clock; Poll, Renew and Complete take now.
//
// # Observing
//
// Every poll writes one line to Config.Logger — Info, or Error with the error — and,
// when Config.Observer is set, hands it a PollReport. When a waiter has waited longer
// than DegradeAfter the gauge reads PostureDegraded: the report says so once
// (PollReport.TurnedDegraded) with a Warn line naming the longest waiter, and once more
// when it recovers. Because the gauge is computed from durable state, a stall that began
// before a restart is reported at the first poll after it. The rota/otel module exports
// the reports as metrics.
//
// # Durable state and fencing
//
// The StateStore keeps every task's TaskState. Its writes are fenced by the lease: a
// holder whose grant was replaced can write nothing, from the moment of the new grant. A
// heavy task's running flag counts only while the grant it runs under is live, so a
// crashed holder blocks nobody past one LeaseTTL; an off-lease task's counts for MaxHold +
// LeaseTTL. Names are at most MaxNameLength bytes of printable UTF-8 and stored times lie
// in years 1 through 9999 UTC; every Lease and StateStore refuses anything else with
// ErrInvalid, and maintenancetest holds every adapter to that and to the rest of the
// contracts.
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
// input. A poll makes one StateStore Load, one Lease Current, at most one Acquire and one
// Save, whatever the number of tasks; with a registry of tens of tasks those round trips
// are the cost, not the ranking.
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
//     MaxHold it is cancelled with a cause wrapping ErrHoldExceeded, and when its grant
//     expires unrenewed or is lost, with one wrapping ErrNotHolder.
//   - A renewal error other than ErrNotHolder, ErrHoldExceeded or ErrInvalid is transient:
//     Run retries it after LeaseTTL/64, doubling up to LeaseTTL/8, until the grant expires.
//   - A task's error is stored as LastError with invalid UTF-8 and NUL replaced by U+FFFD,
//     so that every store can hold it.
package maintenance
