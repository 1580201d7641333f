// Package maintenance schedules the heavy maintenance jobs of one daemon, or of a fleet,
// that share one exclusive lease, so the chain of jobs drains to idle in bounded time.
//
// It implements ADR 0022 (heavy-maintenance scheduling fairness) and makes its bounds
// real: the hold cap is enforced by the lease and by the scheduler, not advisory.
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
// The heavy winner yields to a better waiter of another scheduler sharing the state
// (fleet fairness) or acquires the Lease; a second pass then ranks the due OffLease tasks
// the same way and dispatches up to AlsoDispatchLimit of them beside it. Every due task
// that does not start is a Deferral with a reason code and its blocker, and starts or
// continues its durable deferral streak. The Gauge, computed from the durable state,
// shows the lease holder, every waiter and its wait, the deferral chain depth and a
// Posture.
//
// # Where to start
//
// Build the registry (a []Task, in priority order for ties), call NewScheduler with a
// Config (zero values are defaults; nil Lease and StateStore mean in-memory ones) and call
// Run. Hosts with a simulated clock pass it as Config.Clock; hosts with their own loop
// call Poll, run what it dispatched, call Renew while the heavy task runs and Complete
// when each task ends.
// Pick is pure and usable alone.
//
// # Running it
//
// Run polls every PollInterval and as soon as a task ends, runs each dispatched task in
// its own goroutine, renews the lease every LeaseTTL/3 while a heavy task runs, cancels
// the task's context at MaxHold or when the lease is lost, records every outcome and,
// when its context ends, stops polling and waits for the running tasks. It reads time
// only from Config.Clock (nil: the real clock) — its now, its poll and renewal tickers and
// its MaxHold timer — so a host or a test drives it on a fake Clock stepped by hand, or
// with the real clock inside a testing/synctest bubble. Poll, Renew and Complete never
// read a clock: they take now (examples/maintenance calls them on a simulated timeline).
//
// # Observing
//
// Every Poll — Run's included, failed ones too — logs one Info line "maintenance: poll"
// to Config.Logger (winner, heavy, second_pass, deferred, posture, holder, held_for,
// waiters, longest_wait, chain_depth, error) and, when Config.Observer is set, hands it a
// PollReport: the PollResult (winner, the second pass, every deferral with its reason
// code and blocker, the Gauge) with the poll's error. When the gauge turns Degraded — a
// waiter has waited longer than DegradeAfter: the chain is not draining to idle — the
// report says so once (PollReport.TurnedDegraded) and a Warn line names the longest
// waiter, its wait, reason and blocker, and the lease holder; when it reads Healthy or
// Disabled again, an Info line "maintenance: recovered" (PollReport.Recovered). Because
// the gauge is computed from durable state, a stall that began before a restart is
// reported at the new scheduler's first poll. An Unknown gauge (the state could not be
// read) neither starts nor ends a stall. Poll reads no clock, so reports
// carry no durations; the Gauge's waits and HeldFor are computed from now. The rota/otel
// module exports the reports as metrics.
//
// # Performance
//
// Pick is O(candidates × (running + dependencies)) and allocates in proportion to its
// input (the explanation included). A poll makes one StateStore Load, one Lease Current,
// at most one Acquire and one fenced Save, whatever the number of tasks (plus a Release
// or a second Current on the failure paths); the registry is small (tens of tasks), so
// the costs that matter are those round trips, not the ranking. BenchmarkPick and
// BenchmarkPoll measure both.
//
// # Bounds
//
// With promotion, the enforced MaxHold and fleet yielding, no due heavy task waits longer
// than YieldAfter + (number of heavy tasks) × MaxHold + one poll interval, provided the
// host polls again as soon as a run ends (Run does) — data-safety tasks excepted: they
// win outright by design. Without promotion a short-cadence task that holds the lease long
// (summary: 10 min cadence, 45 min runs) re-wins every release and a 24 h task waits for
// days; the tests show both.
//
// # Durable state and fencing
//
// The StateStore keeps every task's TaskState; writes are fenced by the lease token (see
// StateStore). A heavy task's running flag counts only while the grant it runs under is
// the live one, so a crashed holder blocks nobody past one LeaseTTL. A running flag of an
// off-lease task counts for MaxHold + LeaseTTL. The package maintenancetest holds the
// conformance suites every Lease and StateStore adapter runs.
//
// # Choices where the design is silent
//
//   - A promoted waiter outranks a cadence-less task earlier in the registry (otherwise an
//     always-due cadence-less task could starve it); data-safety and bootstrap still win.
//   - PickInput.YieldAfter ≤ 0 disables promotion: Pick alone is then the plain staleness
//     picker. The Scheduler always passes its YieldAfter.
//   - LastRunAt is the start of the latest finished run, whatever its outcome, so a task
//     that runs longer than its cadence is due again as soon as it ends, and a failing task
//     does not stay the stalest forever.
//   - Lease.Acquire refuses the caller too while its own grant is live; only Renew extends a
//     hold, so MaxHold cannot be dodged by re-acquiring.
//   - Deferral reasons beyond the four the record names: ReasonOutranked (lost the pick),
//     ReasonDependency (a DependsOn task runs), ReasonDispatchLimit (second pass full).
//   - Fleet yielding looks only at waiters of tasks this scheduler does not know (its own
//     waiters are ranked by Pick), and ignores waiter records not refreshed within
//     YieldAfter, presumed abandoned by a scheduler that stopped.
//   - Tasks started in one poll count as running for each other's DependsOn in both
//     directions: a task does not start beside a task that depends on it.
//   - A gate is closed while its producer is due or running ("behind").
//   - Winner is the heavy winner, or the first off-lease task when no heavy one started;
//     Winner and AlsoDispatched together hold at most AlsoDispatchLimit off-lease tasks.
//   - An empty registry is valid and its gauge reads Disabled; Unknown is the posture
//     reported when the state cannot be read.
//   - Run takes its clock as Config.Clock (DESIGN.md names none for this package; the
//     shape is bridge.Clock's plus AfterFunc for the MaxHold timer). So a task's context
//     has no Deadline, which would be meaningless on a fake clock: at MaxHold it is
//     cancelled with a cause wrapping ErrHoldExceeded, and its Err is context.Canceled.
package maintenance
