package rotaotel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/maintenance"
)

// ScopeName is the instrumentation scope of every instrument: the name Metrics passes to
// MeterProvider.Meter.
const ScopeName = "github.com/rotaworks/rota/otel"

// The metric names, stable across releases: dashboards and alerts are written against
// them. See the package documentation for what each one means and its attributes.
const (
	DispatchCycles        = "rota.dispatch.cycles"
	DispatchItems         = "rota.dispatch.items"
	DispatchLostClaims    = "rota.dispatch.lost_claims"
	DispatchUsersRead     = "rota.dispatch.users_read"
	DispatchShedUsers     = "rota.dispatch.shed_users"
	DispatchUnroutedUsers = "rota.dispatch.unrouted_users"
	DispatchWait          = "rota.dispatch.wait"
	DispatchLateness      = "rota.dispatch.lateness"
	DispatchLimitedUsers  = "rota.dispatch.limited_users"

	BridgeCycles           = "rota.bridge.cycles"
	BridgeItems            = "rota.bridge.items"
	BridgeCycleDuration    = "rota.bridge.cycle.duration"
	BridgeDispatchDuration = "rota.bridge.dispatch.duration"
	BridgeAlarms           = "rota.bridge.alarms"
	BridgeLateAlarms       = "rota.bridge.late_alarms"
	BridgePauses           = "rota.bridge.pauses"
	BridgeFailingSources   = "rota.bridge.failing_sources"
	BridgeOverrunDuration  = "rota.bridge.overrun.duration"

	MaintenancePolls      = "rota.maintenance.polls"
	MaintenanceDispatched = "rota.maintenance.dispatched"
	MaintenanceDeferrals  = "rota.maintenance.deferrals"
	MaintenanceStalls     = "rota.maintenance.stalls"
	MaintenancePosture    = "rota.maintenance.posture"
	MaintenanceWaiters    = "rota.maintenance.waiters"
	MaintenanceWaiterAge  = "rota.maintenance.waiter.age"
	MaintenanceChainDepth = "rota.maintenance.chain.depth"
	MaintenanceLeaseHeld  = "rota.maintenance.lease.held"
)

// The attribute keys. None of them ever carries a tenant ID: the values are lane names,
// outcomes, task names and reason codes, all bounded by the host's configuration.
const (
	AttrLane    = attribute.Key("lane")
	AttrOutcome = attribute.Key("outcome")
	AttrTask    = attribute.Key("task")
	AttrClass   = attribute.Key("class")
	AttrReason  = attribute.Key("reason")
	AttrPosture = attribute.Key("posture")
)

// Outcome values of the outcome attribute on the cycle and poll counters.
const (
	OutcomeOK    = "ok"
	OutcomeError = "error"
)

// Metrics turns rota's cycle and poll reports into OpenTelemetry metrics. It is a
// dispatch.Observer, a bridge.Observer and a maintenance.Observer at once: set it as
// dispatch.Config.Observer, bridge.RunnerConfig.Observer and maintenance.Config.Observer
// (any of them; each reports its own metrics, so nothing is counted twice). It is safe for
// concurrent use. Build it with NewMetrics.
type Metrics struct {
	dispatchCycles, dispatchItems, dispatchLost      metric.Int64Counter
	dispatchRead, dispatchShed, dispatchUnrouted     metric.Int64Gauge
	dispatchLimited                                  metric.Int64Gauge
	dispatchWait, dispatchLateness                   metric.Float64Gauge
	bridgeCycles, bridgeItems, bridgeAlarms          metric.Int64Counter
	bridgeLateAlarms, bridgePauses                   metric.Int64Counter
	bridgeFailing                                    metric.Int64Gauge
	bridgeCycleDuration, bridgeDispatchDuration      metric.Float64Histogram
	bridgeOverrun                                    metric.Float64Histogram
	failing                                          failingSources
	pollCount, pollDispatched, pollDeferrals, stalls metric.Int64Counter
	posture, waiters, chainDepth                     metric.Int64Gauge
	leaseHeld                                        metric.Float64Gauge
	waiterAge                                        metric.Float64ObservableGauge
	registration                                     metric.Registration
	mu                                               sync.Mutex
	lastWaiters                                      []maintenance.Waiter // of the latest known gauge
	lastWaitersAt                                    int64                // its instant, Unix nanoseconds
	haveWaiters                                      bool
}

var (
	_ dispatch.Observer    = (*Metrics)(nil)
	_ bridge.Observer      = (*Metrics)(nil)
	_ maintenance.Observer = (*Metrics)(nil)
)

// Option configures NewMetrics.
type Option func(*Metrics)

// WithAlarmAfterErrors sets the ErrorStreak at which rota.bridge.failing_sources counts a
// source: set it to the Runner's RunnerConfig.AlarmAfterErrors. Zero means
// bridge.DefaultAlarmAfterErrors, the default; a negative n leaves the gauge out.
func WithAlarmAfterErrors(n int) Option {
	return func(m *Metrics) { m.failing.after = n }
}

// NewMetrics creates every instrument on a Meter of mp named ScopeName, or returns the
// errors of those it could not create, joined. Call Close to unregister the waiter-age
// callback when the Metrics is no longer used.
func NewMetrics(mp metric.MeterProvider, opts ...Option) (*Metrics, error) {
	if mp == nil {
		return nil, errors.New("rotaotel: NewMetrics: nil MeterProvider")
	}
	meter := mp.Meter(ScopeName)
	m := &Metrics{}
	for _, o := range opts {
		o(m)
	}
	if m.failing.after == 0 {
		m.failing.after = bridge.DefaultAlarmAfterErrors
	}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	gauge := func(name, unit, desc string) metric.Int64Gauge {
		g, err := meter.Int64Gauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	fgauge := func(name, unit, desc string) metric.Float64Gauge {
		g, err := meter.Float64Gauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	seconds := func(name, desc string) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc))
		errs = append(errs, err)
		return h
	}

	m.dispatchCycles = counter(DispatchCycles, "{cycle}", "Dispatch cycles, by outcome (ok, error).")
	m.dispatchItems = counter(DispatchItems, "{item}", "Items dispatched (claimed), by lane.")
	m.dispatchLost = counter(DispatchLostClaims, "{item}", "Selected entries another dispatcher claimed first, by lane.")
	m.dispatchRead = gauge(DispatchUsersRead, "{user}", "Users the lane's read returned in the last dispatch cycle, by lane.")
	m.dispatchShed = gauge(DispatchShedUsers, "{user}", "Users read who did not get all their due work in the last dispatch cycle, by lane.")
	m.dispatchUnrouted = gauge(DispatchUnroutedUsers, "{user}", "Users whose lane could not be resolved in the last dispatch cycle.")
	m.dispatchWait = fgauge(DispatchWait, "s", "How long the lane kept its longest-waiting ready user waiting at the last dispatch cycle, by lane; 0 when nobody waited.")
	m.dispatchLateness = fgauge(DispatchLateness, "s", "How late the most overdue visible work of the users the lane read was at the last dispatch cycle (now − the oldest DueAt), by lane; 0 when there was none.")
	m.dispatchLimited = gauge(DispatchLimitedUsers, "{user}", "Users read whose own limits (in-flight cap or rate) held back visible work in the last dispatch cycle, by lane.")

	m.bridgeCycles = counter(BridgeCycles, "{cycle}", "Runner cycles, by outcome (ok, error: the dispatch failed).")
	m.bridgeItems = counter(BridgeItems, "{item}", "Dispatched items the Runner ended, by lane and outcome (hit, miss, removed, error, lost_claim, released, late, duplicate, paused).")
	m.bridgeAlarms = counter(BridgeAlarms, "{alarm}", "Noisy-neighbour alarms raised: a lane kept a user waiting past the Runner's AlarmAfter, once per episode, by lane.")
	m.bridgeLateAlarms = counter(BridgeLateAlarms, "{alarm}", "Late-work alarms raised: a tenant's work was later than the Runner's AlarmAfter, once per tenant and episode, by lane.")
	m.bridgeCycleDuration = seconds(BridgeCycleDuration, "Runner cycle duration, dispatch to the last item's end.")
	m.bridgeDispatchDuration = seconds(BridgeDispatchDuration, "Duration of the dispatch of a Runner cycle.")
	m.bridgePauses = counter(BridgePauses, "{pause}", "Runs whose pipeline pushed back (bridge.Pushback), pausing their tenant, by the Pushback's reason.")
	m.bridgeFailing = gauge(BridgeFailingSources, "{source}", "Sources whose last run this process saw left their error streak at or over the alarm threshold.")
	m.bridgeOverrun = seconds(BridgeOverrunDuration, "How long a pipeline ran past its item's claim, one per run that overran, by lane.")

	m.pollCount = counter(MaintenancePolls, "{poll}", "Maintenance polls, by outcome (ok, error).")
	m.pollDispatched = counter(MaintenanceDispatched, "{run}", "Maintenance tasks dispatched, by task and class (heavy, off-lease).")
	m.pollDeferrals = counter(MaintenanceDeferrals, "{deferral}", "Due maintenance tasks that did not start at a poll, by task and reason.")
	m.stalls = counter(MaintenanceStalls, "{stall}", "Times the maintenance gauge turned Degraded.")
	m.posture = gauge(MaintenancePosture, "1", "1 for the maintenance gauge's current posture, 0 for the others, by posture.")
	m.waiters = gauge(MaintenanceWaiters, "{task}", "Maintenance tasks in a deferral streak.")
	m.chainDepth = gauge(MaintenanceChainDepth, "{task}", "Longest chain of maintenance waiters each blocked by the next.")
	m.leaseHeld = fgauge(MaintenanceLeaseHeld, "s", "How long the current holder has held the heavy-maintenance lease; 0 when it is free.")
	var err error
	m.waiterAge, err = meter.Float64ObservableGauge(MaintenanceWaiterAge, metric.WithUnit("s"),
		metric.WithDescription("How long each waiting maintenance task has waited, at the latest poll, by task and reason."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("rotaotel: NewMetrics: %w", err)
	}
	m.registration, err = meter.RegisterCallback(m.observeWaiters, m.waiterAge)
	if err != nil {
		return nil, fmt.Errorf("rotaotel: NewMetrics: register %s: %w", MaintenanceWaiterAge, err)
	}
	return m, nil
}

// Close unregisters the waiter-age callback. The other instruments need no cleanup.
func (m *Metrics) Close() error { return m.registration.Unregister() }

func lane(l dispatch.Lane) metric.MeasurementOption {
	return metric.WithAttributes(AttrLane.String(string(l)))
}

func outcome(failed bool) metric.MeasurementOption {
	if failed {
		return metric.WithAttributes(AttrOutcome.String(OutcomeError))
	}
	return metric.WithAttributes(AttrOutcome.String(OutcomeOK))
}

// ObserveDispatch records one dispatch cycle: rota.dispatch.cycles; and, for a cycle that
// did not fail, per lane rota.dispatch.items and rota.dispatch.lost_claims (added),
// rota.dispatch.users_read, rota.dispatch.shed_users, rota.dispatch.limited_users,
// rota.dispatch.wait and rota.dispatch.lateness (set), and rota.dispatch.unrouted_users
// (set). A failed cycle leaves the gauges as they were.
func (m *Metrics) ObserveDispatch(info dispatch.CycleInfo) {
	ctx := context.Background()
	m.dispatchCycles.Add(ctx, 1, outcome(info.Err != nil))
	if info.Err != nil {
		return
	}
	for _, l := range info.Batch.Lanes {
		opt := lane(l.Lane)
		m.dispatchItems.Add(ctx, int64(l.Dispatched), opt)
		m.dispatchLost.Add(ctx, int64(l.LostClaims), opt)
		m.dispatchRead.Record(ctx, int64(l.Users), opt)
		m.dispatchShed.Record(ctx, int64(l.Shed), opt)
		m.dispatchLimited.Record(ctx, int64(l.Limited), opt)
		m.dispatchWait.Record(ctx, since(info.Now, l.WaitingSince).Seconds(), opt)
		m.dispatchLateness.Record(ctx, since(info.Now, l.OldestDue).Seconds(), opt)
	}
	m.dispatchUnrouted.Record(ctx, int64(len(info.Batch.Unrouted)))
}

// since is now − t, or 0 when t is zero (nobody waited, no work was late) or after now
// (the clocks of two dispatchers disagree). Of WaitingSince it is the lane's wait, of
// OldestDue the lateness of its most overdue work.
func since(now, t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return max(now.Sub(t), 0)
}

// ObserveCycle records one Runner cycle: rota.bridge.cycles, rota.bridge.items per lane
// and outcome, both durations, rota.bridge.alarms and rota.bridge.late_alarms per lane,
// rota.bridge.pauses per reason, rota.bridge.overrun.duration per lane and
// rota.bridge.failing_sources. It records nothing of the dispatch itself, lateness
// included: that is ObserveDispatch's, from the Dispatcher's own Observer.
func (m *Metrics) ObserveCycle(rep bridge.CycleReport) {
	ctx := context.Background()
	m.bridgeCycles.Add(ctx, 1, outcome(rep.DispatchErr != nil))
	type key struct {
		lane   dispatch.Lane
		status bridge.ItemStatus
	}
	counts := make(map[key]int64)
	for _, it := range rep.Items {
		counts[key{it.Item.Lane, it.Status}]++
	}
	for k, n := range counts {
		m.bridgeItems.Add(ctx, n, metric.WithAttributes(AttrLane.String(string(k.lane)), AttrOutcome.String(k.status.String())))
	}
	m.bridgeCycleDuration.Record(ctx, rep.Duration.Seconds())
	m.bridgeDispatchDuration.Record(ctx, rep.DispatchDuration.Seconds())
	for _, a := range rep.Alarms {
		m.bridgeAlarms.Add(ctx, 1, lane(a.Lane))
	}
	for _, a := range rep.LateAlarms {
		m.bridgeLateAlarms.Add(ctx, 1, lane(a.Lane))
	}
	for _, it := range rep.Items {
		if it.Overrun > 0 {
			m.bridgeOverrun.Record(ctx, it.Overrun.Seconds(), lane(it.Item.Lane))
		}
		var pb *bridge.Pushback
		if it.Status == bridge.StatusPaused && errors.As(it.Err, &pb) {
			m.bridgePauses.Add(ctx, 1, metric.WithAttributes(AttrReason.String(pb.Reason)))
		}
	}
	if n, ok := m.failing.update(rep); ok {
		m.bridgeFailing.Record(ctx, int64(n))
	}
}

var postures = [...]maintenance.Posture{maintenance.PostureUnknown, maintenance.PostureHealthy, maintenance.PostureDegraded, maintenance.PostureDisabled}

// ObservePoll records one maintenance poll: rota.maintenance.polls,
// rota.maintenance.dispatched per task and class, rota.maintenance.deferrals per task and
// reason, rota.maintenance.stalls when the gauge turned Degraded, and
// rota.maintenance.posture. When the gauge's posture is known it also sets
// rota.maintenance.waiters, rota.maintenance.chain.depth, rota.maintenance.lease.held and
// the waiter ages that rota.maintenance.waiter.age reports at the next collection; an
// Unknown gauge (the state could not be read) leaves them as they were.
func (m *Metrics) ObservePoll(rep maintenance.PollReport) {
	ctx := context.Background()
	m.pollCount.Add(ctx, 1, outcome(rep.Err != nil))
	for _, c := range rep.Result.Dispatched() {
		m.pollDispatched.Add(ctx, 1, metric.WithAttributes(AttrTask.String(c.Task.Name), AttrClass.String(c.Task.Class.String())))
	}
	for _, d := range rep.Result.Deferred {
		m.pollDeferrals.Add(ctx, 1, metric.WithAttributes(AttrTask.String(d.Task), AttrReason.String(string(d.Reason))))
	}
	if rep.TurnedDegraded {
		m.stalls.Add(ctx, 1)
	}
	g := rep.Result.Gauge
	for _, p := range postures {
		v := int64(0)
		if p == g.Posture {
			v = 1
		}
		m.posture.Record(ctx, v, metric.WithAttributes(AttrPosture.String(p.String())))
	}
	if g.Posture == maintenance.PostureUnknown {
		return
	}
	m.waiters.Record(ctx, int64(len(g.Waiters)))
	m.chainDepth.Record(ctx, int64(g.ChainDepth))
	m.leaseHeld.Record(ctx, g.HeldFor.Seconds())
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.haveWaiters && g.At.UnixNano() < m.lastWaitersAt {
		return // an older poll finishing late
	}
	m.lastWaiters = append(m.lastWaiters[:0], g.Waiters...)
	m.lastWaitersAt, m.haveWaiters = g.At.UnixNano(), true
}

// observeWaiters reports the latest known gauge's waiters: a task that stopped waiting
// simply stops being reported.
func (m *Metrics) observeWaiters(_ context.Context, o metric.Observer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.lastWaiters {
		o.ObserveFloat64(m.waiterAge, w.Wait.Seconds(), metric.WithAttributes(AttrTask.String(w.Task), AttrReason.String(string(w.Reason))))
	}
	return nil
}
