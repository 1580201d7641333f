// Package rotaotel turns rota's cycle and poll reports into OpenTelemetry metrics.
//
// It is a nested module (github.com/rotaworks/rota/otel) so that the core keeps importing
// nothing but the standard library: the core defines three small observer interfaces —
// dispatch.Observer, bridge.Observer and maintenance.Observer — and [Metrics] implements
// all three on top of go.opentelemetry.io/otel/metric. The package is named rotaotel, not
// otel, so that it imports beside go.opentelemetry.io/otel without an alias:
//
//	import "github.com/rotaworks/rota/otel" // package rotaotel
//
// # Wiring
//
// Build one Metrics from the service's MeterProvider and set it wherever a report is made:
//
//	m, err := rotaotel.NewMetrics(provider) // e.g. otel.GetMeterProvider() of go.opentelemetry.io/otel
//	// With a Runner whose AlarmAfterErrors is not the default:
//	// rotaotel.NewMetrics(provider, rotaotel.WithAlarmAfterErrors(runnerCfg.AlarmAfterErrors))
//	defer m.Close()
//	d, err := dispatch.New(idx, dispatch.Config{ /* lanes… */ Observer: m})
//	r, err := bridge.NewRunner(b, d, bridge.RunnerConfig{Observer: m})
//	s, err := maintenance.NewScheduler(tasks, maintenance.Config{Observer: m})
//
// Each observer records only its own metrics (rota.dispatch.*, rota.bridge.*,
// rota.maintenance.*), so setting all three counts nothing twice. Leaving one out leaves
// its metrics out. Metrics is safe for concurrent use; recording a report costs a few
// instrument calls per lane, item outcome, task or deferral.
//
// # Metrics
//
// Names, units and attributes are stable: dashboards and alerts may rely on them. The
// instrumentation scope is [ScopeName]. Counters are cumulative; gauges hold the value of
// the latest report.
//
// From the Dispatcher (dispatch.Observer), one report per Dispatch:
//
//	rota.dispatch.cycles          counter {cycle}  outcome=ok|error   dispatch cycles
//	rota.dispatch.items           counter {item}   lane               items dispatched (claimed)
//	rota.dispatch.lost_claims     counter {item}   lane               selected entries another dispatcher claimed first
//	rota.dispatch.users_read      gauge   {user}   lane               users the lane's read returned in the last cycle
//	rota.dispatch.shed_users      gauge   {user}   lane               users read and not given all their due work in the last cycle
//	rota.dispatch.unrouted_users  gauge   {user}                      users whose lane could not be resolved in the last cycle
//	rota.dispatch.limited_users   gauge   {user}   lane               users read whose own limits held back visible work in the last cycle
//	rota.dispatch.wait            gauge   s        lane               how long the lane kept its longest-waiting ready user waiting
//	rota.dispatch.lateness        gauge   s        lane               how late the most overdue work of the users the lane read was
//
// The wait is the cycle's now − dispatch.LaneReport.WaitingSince, 0 when the lane served
// everyone ready. It is the figure to alert on for noisy neighbours: it stays within an
// interval or two however many tenants the lane holds, and grows only when the lane is too
// small for its load or a higher lane takes every slot. The lateness is the cycle's now −
// LaneReport.OldestDue, 0 when the users read had no visible work: it measures the work,
// not the turn, so it grows when a tenant's sources come due faster than the tenant is
// served — by its share or by its own limits (an in-flight cap, a rate) — while the wait
// stays low. limited_users counts the users held back by their own limits
// (LaneReport.Limited); they are neither shed nor waiting on their neighbours. users_read
// is at most what the lane could be given, never the number of tenants with due work. A
// failed cycle counts in rota.dispatch.cycles{outcome=error} and leaves the gauges as they
// were.
//
// From the Runner (bridge.Observer), one report per cycle, after its last item:
//
//	rota.bridge.cycles            counter   {cycle}  outcome=ok|error  Runner cycles (error: the dispatch failed)
//	rota.bridge.items             counter   {item}   lane, outcome     items ended: outcome is hit, miss, removed, error, lost_claim, released, late, duplicate or paused
//	rota.bridge.cycle.duration    histogram s                          dispatch to the last item's end, on the Runner's Clock
//	rota.bridge.dispatch.duration histogram s                          the cycle's dispatch
//	rota.bridge.alarms            counter   {alarm}  lane              noisy-neighbour alarms raised, once per episode
//	rota.bridge.late_alarms       counter   {alarm}  lane              late-work alarms raised, once per tenant and episode
//	rota.bridge.pauses            counter   {pause}  reason            runs whose pipeline pushed back (bridge.Pushback), pausing their tenant
//	rota.bridge.failing_sources   gauge     {source}                   sources this process saw fail AlarmAfterErrors times or more in a row
//	rota.bridge.overrun.duration  histogram s        lane              how long a pipeline ran past its item's claim, one per run that did
//
// released items were handed back unstarted at shutdown or because their tenant was
// paused; late items were handed back because their claim would have ended before a worker
// was free — a Runner with too few Workers for its batch and ClaimFor; duplicate items were
// copies not run because another had started (a queue's redelivery); paused items are the
// runs that pushed back, each also counted in rota.bridge.pauses by the Pushback's Reason,
// which the host chooses from a fixed set ("upstream-429", say; never a tenant ID).
//
// rota.bridge.failing_sources counts the sources whose last run this process's Runner
// reported left their ErrorStreak at or over the threshold — WithAlarmAfterErrors, set it
// to the Runner's RunnerConfig.AlarmAfterErrors; bridge.DefaultAlarmAfterErrors, 5, by
// default — the sources the Runner's "rota: source failing" lines name. A source leaves
// the count when a later report shows it succeed (a hit or a miss) or removed, or, when no
// report tells of it again, a whole retry interval (at least a minute) after its next run
// was due: by then a Runner on another replica ran it, or the host unscheduled it. Each
// process counts what its own Runner saw, so a fleet's total is about the sum over its
// replicas; a source that moved between them may count on two for up to one retry
// interval. Workers that run items outside a Runner (bridge.Worker through a queue) report
// no cycles, and their sources are not counted. The count's memory is one small record per
// failing source.
//
// rota.bridge.overrun.duration records, per run whose pipeline ignored its context and ran
// past its claim (bridge.ItemReport.Overrun), how far past: its count is the number of
// overruns, the figure to alert on, since such a run may overlap the entry's next run
// elsewhere. A noisy-neighbour alarm is raised when a lane's wait
// passes the Runner's AlarmAfter, and a late-work alarm when a tenant's work is later than
// AlarmAfter; the Runner's Warn lines name the lane's crowding users and the late tenants,
// and the metrics count them by lane only.
//
// From the maintenance Scheduler (maintenance.Observer), one report per poll:
//
//	rota.maintenance.polls        counter {poll}     outcome=ok|error  polls
//	rota.maintenance.dispatched   counter {run}      task, class       tasks started: class is heavy or off-lease
//	rota.maintenance.deferrals    counter {deferral} task, reason      due tasks that did not start, by reason code (gate, heavy-busy, lease-held, yield, outranked, dependency-running, dispatch-limit)
//	rota.maintenance.stalls       counter {stall}                      times the gauge turned Degraded
//	rota.maintenance.posture      gauge   1          posture           1 for the current posture (unknown, healthy, degraded, disabled), 0 for the others
//	rota.maintenance.waiters      gauge   {task}                       tasks in a deferral streak
//	rota.maintenance.waiter.age   gauge   s          task, reason      how long each waiting task has waited, at the latest poll
//	rota.maintenance.chain.depth  gauge   {task}                       longest chain of waiters each blocked by the next
//	rota.maintenance.lease.held   gauge   s                            how long the current holder has held the lease; 0 when free
//
// "Is the chain draining to idle?" is rota.maintenance.posture{posture=degraded} == 0, or
// max(rota.maintenance.waiter.age) below the scheduler's DegradeAfter. waiter.age is an
// observable gauge: a task that stops waiting stops being reported at the next
// collection. A poll whose state could not be read (posture unknown) moves only polls and
// posture; the other gauges keep the last known figures.
//
// # Cardinality
//
// No attribute ever holds a tenant ID, a work key or a lease holder's name: the values are
// lane names, item outcomes, task names, reason codes (a Pushback's Reason among them) and
// postures, all fixed by the host's configuration and code, so the number of series does
// not grow with tenants. Who is shed, limited, late, paused, failing or crowding a lane is
// in the reports (LaneReport.Overdue, the alarms, the items) and in the Runner's log lines,
// not in the metrics.
package rotaotel
