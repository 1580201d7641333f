package rotaotel_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/otel"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// newMetrics returns a Metrics on an SDK MeterProvider and the manual reader behind it.
func newMetrics(t *testing.T) (*rotaotel.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := rotaotel.NewMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	return m, reader
}

// point is one collected data point: its metric, unit, kind and attributes.
type point struct {
	name, unit, kind string
	attrs            attribute.Set
	value            float64 // sum or gauge value; a histogram's sum
	count            uint64  // a histogram's count
}

// key renders a point's identity: name{k=v,...}.
func (p point) key() string {
	var kv []string
	for _, a := range p.attrs.ToSlice() {
		kv = append(kv, string(a.Key)+"="+a.Value.Emit())
	}
	return p.name + "{" + strings.Join(kv, ",") + "}"
}

// collect reads every data point of the ScopeName scope through the manual reader.
func collect(t *testing.T, r *sdkmetric.ManualReader) []point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []point
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != rotaotel.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, rotaotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if !d.IsMonotonic || d.Temporality != metricdata.CumulativeTemporality {
					t.Errorf("%s: a counter should be a monotonic cumulative sum", m.Name)
				}
				for _, dp := range d.DataPoints {
					out = append(out, point{name: m.Name, unit: m.Unit, kind: "counter", attrs: dp.Attributes, value: float64(dp.Value)})
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					out = append(out, point{name: m.Name, unit: m.Unit, kind: "gauge", attrs: dp.Attributes, value: float64(dp.Value)})
				}
			case metricdata.Gauge[float64]:
				for _, dp := range d.DataPoints {
					out = append(out, point{name: m.Name, unit: m.Unit, kind: "gauge", attrs: dp.Attributes, value: dp.Value})
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					out = append(out, point{name: m.Name, unit: m.Unit, kind: "histogram", attrs: dp.Attributes, value: dp.Sum, count: dp.Count})
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

// values maps each point's key to its value ("…/count" for a histogram's count).
func values(ps []point) map[string]float64 {
	out := make(map[string]float64, len(ps))
	for _, p := range ps {
		out[p.key()] = p.value
		if p.kind == "histogram" {
			out[p.key()+"/count"] = float64(p.count)
		}
	}
	return out
}

// only keeps the entries of m whose key starts with prefix.
func only(m map[string]float64, prefix string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

func TestDispatchMetrics(t *testing.T) {
	m, reader := newMetrics(t)
	m.ObserveDispatch(dispatch.CycleInfo{Now: t0, Batch: dispatch.Batch{
		Items:       make([]dispatch.Item, 4),
		ShedUserIDs: []string{"tenant-a", "tenant-b"},
		Unrouted:    []dispatch.Unrouted{{UserID: "tenant-b", Err: dispatch.ErrUnknownLane}},
		Lanes: []dispatch.LaneReport{
			{Lane: "pro", Users: 2, Dispatched: 3, Shed: 1, LostClaims: 1, WaitingSince: t0.Add(-time.Minute), Limited: 1, OldestDue: t0.Add(-5 * time.Minute)},
			{Lane: "free", Users: 1, Dispatched: 1, OldestDue: t0.Add(-time.Second)},
		},
	}})
	m.ObserveDispatch(dispatch.CycleInfo{Now: t0.Add(time.Minute), Err: errors.New("index down")})
	m.ObserveDispatch(dispatch.CycleInfo{Now: t0.Add(2 * time.Minute), Batch: dispatch.Batch{
		Items: make([]dispatch.Item, 2),
		Lanes: []dispatch.LaneReport{
			{Lane: "pro", Users: 1, Dispatched: 2, Limited: 1, OldestDue: t0.Add(3 * time.Minute)}, // a dispatcher whose clock runs ahead
			{Lane: "free", Shed: 1, WaitingSince: t0.Add(-30 * time.Second), Limited: 2, OldestDue: t0.Add(-4 * time.Minute)},
		},
	}})
	m.ObserveDispatch(dispatch.CycleInfo{Now: t0.Add(3 * time.Minute), Err: errors.New("index down again")})

	want := map[string]float64{
		"rota.dispatch.cycles{outcome=ok}":     2,
		"rota.dispatch.cycles{outcome=error}":  2,
		"rota.dispatch.items{lane=pro}":        5,
		"rota.dispatch.items{lane=free}":       1,
		"rota.dispatch.lost_claims{lane=pro}":  1,
		"rota.dispatch.lost_claims{lane=free}": 0,
		// Gauges hold the last good cycle's figures; the failed one changed none.
		"rota.dispatch.users_read{lane=pro}":     1,
		"rota.dispatch.users_read{lane=free}":    0,
		"rota.dispatch.shed_users{lane=pro}":     0,
		"rota.dispatch.shed_users{lane=free}":    1,
		"rota.dispatch.unrouted_users{}":         0,
		"rota.dispatch.limited_users{lane=pro}":  1,
		"rota.dispatch.limited_users{lane=free}": 2,
		// The wait is now − WaitingSince, 0 when nobody waits.
		"rota.dispatch.wait{lane=pro}":  0,
		"rota.dispatch.wait{lane=free}": 150,
		// The lateness is now − OldestDue, never below 0.
		"rota.dispatch.lateness{lane=pro}":  0,
		"rota.dispatch.lateness{lane=free}": 360,
	}
	if diff := cmp.Diff(want, only(values(collect(t, reader)), "rota.dispatch.")); diff != "" {
		t.Errorf("dispatch metrics (-want +got):\n%s", diff)
	}
}

func TestBridgeMetrics(t *testing.T) {
	m, reader := newMetrics(t)
	item := func(lane dispatch.Lane, s bridge.ItemStatus) bridge.ItemReport {
		return bridge.ItemReport{Item: dispatch.Item{Lane: lane, Claim: duework.Claim{Entry: duework.Entry{UserID: "tenant-a", WorkKey: "k"}}}, Status: s}
	}
	paused := func(lane dispatch.Lane, reason string) bridge.ItemReport {
		it := item(lane, bridge.StatusPaused)
		it.Err = fmt.Errorf("bridge: tenant-a/k: %w", &bridge.Pushback{After: time.Minute, Reason: reason, Err: errors.New("429")})
		return it
	}
	overran := func(lane dispatch.Lane, d time.Duration) bridge.ItemReport {
		it := item(lane, bridge.StatusMiss)
		it.Overrun = d
		return it
	}
	m.ObserveCycle(bridge.CycleReport{
		Now:        t0,
		Dispatched: 6,
		Items: []bridge.ItemReport{item("pro", bridge.StatusHit), item("pro", bridge.StatusMiss), item("pro", bridge.StatusHit),
			item("free", bridge.StatusError), item("pro", bridge.StatusRemoved), item("free", bridge.StatusLostClaim),
			item("free", bridge.StatusLate), item("free", bridge.StatusLate), item("pro", bridge.StatusDuplicate),
			paused("pro", "upstream-429"), paused("pro", "upstream-429"), paused("free", "quota"), overran("free", 3*time.Second), overran("pro", time.Second)},
		Alarms: []bridge.WaitAlarm{
			{Lane: "free", Wait: 11 * time.Minute, Crowding: []bridge.UserItems{{UserID: "tenant-a", Items: 2}}},
		},
		DispatchDuration: 500 * time.Millisecond,
		Duration:         2 * time.Second,
	})
	m.ObserveCycle(bridge.CycleReport{Now: t0.Add(time.Minute), DispatchErr: errors.New("index down"),
		DispatchDuration: 100 * time.Millisecond, Duration: 100 * time.Millisecond,
		Items: []bridge.ItemReport{item("free", bridge.StatusReleased)}})
	m.ObserveCycle(bridge.CycleReport{Now: t0.Add(2 * time.Minute), Alarms: []bridge.WaitAlarm{{Lane: "free"}, {Lane: "pro"}},
		LateAlarms: []bridge.LateAlarm{{Lane: "free", UserID: "tenant-a", Late: 3 * time.Minute}, {Lane: "free", UserID: "tenant-b", Late: time.Minute}}})

	want := map[string]float64{
		"rota.bridge.cycles{outcome=ok}":                  2,
		"rota.bridge.cycles{outcome=error}":               1,
		"rota.bridge.items{lane=pro,outcome=hit}":         2,
		"rota.bridge.items{lane=pro,outcome=miss}":        2,
		"rota.bridge.items{lane=free,outcome=miss}":       1,
		"rota.bridge.items{lane=pro,outcome=removed}":     1,
		"rota.bridge.items{lane=free,outcome=error}":      1,
		"rota.bridge.items{lane=free,outcome=lost_claim}": 1,
		"rota.bridge.items{lane=free,outcome=released}":   1,
		"rota.bridge.items{lane=free,outcome=late}":       2,
		"rota.bridge.items{lane=pro,outcome=duplicate}":   1,
		"rota.bridge.items{lane=pro,outcome=paused}":      2,
		"rota.bridge.items{lane=free,outcome=paused}":     1,
		"rota.bridge.pauses{reason=upstream-429}":         2,
		"rota.bridge.pauses{reason=quota}":                1,
		"rota.bridge.overrun.duration{lane=free}":         3,
		"rota.bridge.overrun.duration{lane=free}/count":   1,
		"rota.bridge.overrun.duration{lane=pro}":          1,
		"rota.bridge.overrun.duration{lane=pro}/count":    1,
		"rota.bridge.failing_sources{}":                   0,
		"rota.bridge.alarms{lane=free}":                   2,
		"rota.bridge.alarms{lane=pro}":                    1,
		"rota.bridge.late_alarms{lane=free}":              2,
		"rota.bridge.cycle.duration{}":                    2.1,
		"rota.bridge.cycle.duration{}/count":              3,
		"rota.bridge.dispatch.duration{}":                 0.6,
		"rota.bridge.dispatch.duration{}/count":           3,
	}
	if diff := cmp.Diff(want, only(values(collect(t, reader)), "rota.bridge."), cmp.Comparer(func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 })); diff != "" {
		t.Errorf("bridge metrics (-want +got):\n%s", diff)
	}
}

func TestMaintenanceMetrics(t *testing.T) {
	m, reader := newMetrics(t)
	heavy := func(name string) maintenance.Candidate {
		return maintenance.Candidate{Task: maintenance.Task{Name: name, Class: maintenance.Heavy}}
	}
	off := func(name string) maintenance.Candidate {
		return maintenance.Candidate{Task: maintenance.Task{Name: name, Class: maintenance.OffLease}}
	}
	big := heavy("big")
	m.ObservePoll(maintenance.PollReport{Now: t0, Result: maintenance.PollResult{
		Winner:         &big,
		AlsoDispatched: []maintenance.Candidate{off("cheap")},
		Deferred: []maintenance.Deferral{
			{Task: "small", Reason: maintenance.ReasonOutranked, Blocker: "big", Since: t0.Add(-10 * time.Minute)},
			{Task: "cheap2", Reason: maintenance.ReasonDispatchLimit, Since: t0},
		},
		Gauge: maintenance.Gauge{At: t0, Posture: maintenance.PostureHealthy, Holder: "me", HolderTask: "big", ChainDepth: 1, Waiters: []maintenance.Waiter{
			{Task: "small", Since: t0.Add(-10 * time.Minute), Wait: 10 * time.Minute, Reason: maintenance.ReasonOutranked, Blocker: "big"},
			{Task: "cheap2", Since: t0, Reason: maintenance.ReasonDispatchLimit},
		}},
	}})
	first := values(collect(t, reader))
	wantAges := map[string]float64{
		"rota.maintenance.waiter.age{reason=outranked,task=small}":       600,
		"rota.maintenance.waiter.age{reason=dispatch-limit,task=cheap2}": 0,
	}
	if diff := cmp.Diff(wantAges, only(first, "rota.maintenance.waiter.age")); diff != "" {
		t.Errorf("waiter ages after the first poll (-want +got):\n%s", diff)
	}

	at := t0.Add(2 * time.Hour)
	m.ObservePoll(maintenance.PollReport{Now: at, TurnedDegraded: true, Result: maintenance.PollResult{
		Deferred: []maintenance.Deferral{{Task: "small", Reason: maintenance.ReasonOutranked, Blocker: "big", Since: t0.Add(-10 * time.Minute)}},
		Gauge: maintenance.Gauge{At: at, Posture: maintenance.PostureDegraded, Holder: "me", HolderTask: "big", HeldFor: 30 * time.Minute, ChainDepth: 1,
			Waiters: []maintenance.Waiter{{Task: "small", Since: t0.Add(-10 * time.Minute), Wait: 130 * time.Minute, Reason: maintenance.ReasonOutranked, Blocker: "big"}}},
	}})
	// The store fails: the gauge is Unknown, and only the poll count and the posture move.
	m.ObservePoll(maintenance.PollReport{Now: at.Add(time.Minute), Err: errors.New("store down"),
		Result: maintenance.PollResult{Gauge: maintenance.Gauge{At: at.Add(time.Minute)}}})

	want := map[string]float64{
		"rota.maintenance.polls{outcome=ok}":                            2,
		"rota.maintenance.polls{outcome=error}":                         1,
		"rota.maintenance.dispatched{class=heavy,task=big}":             1,
		"rota.maintenance.dispatched{class=off-lease,task=cheap}":       1,
		"rota.maintenance.deferrals{reason=outranked,task=small}":       2,
		"rota.maintenance.deferrals{reason=dispatch-limit,task=cheap2}": 1,
		"rota.maintenance.stalls{}":                                     1,
		"rota.maintenance.posture{posture=unknown}":                     1,
		"rota.maintenance.posture{posture=healthy}":                     0,
		"rota.maintenance.posture{posture=degraded}":                    0,
		"rota.maintenance.posture{posture=disabled}":                    0,
		"rota.maintenance.waiters{}":                                    1,
		"rota.maintenance.chain.depth{}":                                1,
		"rota.maintenance.lease.held{}":                                 1800,
		"rota.maintenance.waiter.age{reason=outranked,task=small}":      7800, // cheap2 stopped waiting: gone
	}
	if diff := cmp.Diff(want, only(values(collect(t, reader)), "rota.maintenance.")); diff != "" {
		t.Errorf("maintenance metrics (-want +got):\n%s", diff)
	}
}

// TestUnitsAndKinds pins every metric's name, kind and unit: they are the stable contract
// dashboards are written against.
func TestUnitsAndKinds(t *testing.T) {
	m, reader := newMetrics(t)
	big := maintenance.Candidate{Task: maintenance.Task{Name: "big"}}
	m.ObserveDispatch(dispatch.CycleInfo{Batch: dispatch.Batch{Lanes: []dispatch.LaneReport{{Lane: "free"}}}})
	m.ObserveCycle(bridge.CycleReport{Items: []bridge.ItemReport{{Status: bridge.StatusHit, Overrun: time.Second},
		{Status: bridge.StatusPaused, Err: &bridge.Pushback{Reason: "r"}}}, Alarms: []bridge.WaitAlarm{{Lane: "free"}},
		LateAlarms: []bridge.LateAlarm{{Lane: "free"}}})
	m.ObservePoll(maintenance.PollReport{TurnedDegraded: true, Result: maintenance.PollResult{Winner: &big,
		Deferred: []maintenance.Deferral{{Task: "x"}},
		Gauge:    maintenance.Gauge{At: t0, Posture: maintenance.PostureDegraded, Waiters: []maintenance.Waiter{{Task: "x"}}}}})
	got := map[string]string{}
	for _, p := range collect(t, reader) {
		got[p.name] = p.kind + " " + p.unit
	}
	want := map[string]string{
		rotaotel.DispatchCycles:         "counter {cycle}",
		rotaotel.DispatchItems:          "counter {item}",
		rotaotel.DispatchLostClaims:     "counter {item}",
		rotaotel.DispatchUsersRead:      "gauge {user}",
		rotaotel.DispatchShedUsers:      "gauge {user}",
		rotaotel.DispatchUnroutedUsers:  "gauge {user}",
		rotaotel.DispatchWait:           "gauge s",
		rotaotel.DispatchLateness:       "gauge s",
		rotaotel.DispatchLimitedUsers:   "gauge {user}",
		rotaotel.BridgeCycles:           "counter {cycle}",
		rotaotel.BridgeItems:            "counter {item}",
		rotaotel.BridgeCycleDuration:    "histogram s",
		rotaotel.BridgeDispatchDuration: "histogram s",
		rotaotel.BridgeAlarms:           "counter {alarm}",
		rotaotel.BridgeLateAlarms:       "counter {alarm}",
		rotaotel.BridgePauses:           "counter {pause}",
		rotaotel.BridgeFailingSources:   "gauge {source}",
		rotaotel.BridgeOverrunDuration:  "histogram s",
		rotaotel.MaintenancePolls:       "counter {poll}",
		rotaotel.MaintenanceDispatched:  "counter {run}",
		rotaotel.MaintenanceDeferrals:   "counter {deferral}",
		rotaotel.MaintenanceStalls:      "counter {stall}",
		rotaotel.MaintenancePosture:     "gauge 1",
		rotaotel.MaintenanceWaiters:     "gauge {task}",
		rotaotel.MaintenanceWaiterAge:   "gauge s",
		rotaotel.MaintenanceChainDepth:  "gauge {task}",
		rotaotel.MaintenanceLeaseHeld:   "gauge s",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}

// TestNoTenantIDInAttributes wires the Metrics into a real Dispatcher, Runner and
// Scheduler, runs cycles in which tenants are served, shed, unrouted, named by the
// noisy-neighbour alarm, paused by a pushback and named by a failing source, and checks that no attribute anywhere holds a tenant ID: only
// the documented keys, with lane names, outcomes, task names and reason codes as values.
func TestNoTenantIDInAttributes(t *testing.T) {
	m, reader := newMetrics(t)
	ctx := context.Background()
	tenants := runRota(t, m, 4)

	s, err := maintenance.NewScheduler([]maintenance.Task{
		{Name: "vacuum", Cadence: time.Hour, Run: func(context.Context) error { return nil }},
		{Name: "reindex", Cadence: time.Hour, Run: func(context.Context) error { return nil }},
		{Name: "export", Class: maintenance.OffLease, Cadence: time.Hour, Run: func(context.Context) error { return nil }},
	}, maintenance.Config{Observer: m, DegradeAfter: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.Poll(ctx, t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}

	allowed := map[attribute.Key]bool{rotaotel.AttrLane: true, rotaotel.AttrOutcome: true, rotaotel.AttrTask: true,
		rotaotel.AttrClass: true, rotaotel.AttrReason: true, rotaotel.AttrPosture: true}
	points := collect(t, reader)
	seen := map[string]bool{}
	for _, p := range points {
		seen[p.name] = true
		for _, a := range p.attrs.ToSlice() {
			if !allowed[a.Key] {
				t.Errorf("%s: undocumented attribute %s", p.key(), a.Key)
			}
			if slices.Contains(tenants, a.Value.Emit()) {
				t.Errorf("%s: a tenant ID as an attribute value", p.key())
			}
		}
	}
	for _, name := range []string{rotaotel.DispatchItems, rotaotel.DispatchShedUsers, rotaotel.DispatchWait, rotaotel.BridgeItems, rotaotel.BridgeAlarms,
		rotaotel.BridgePauses, rotaotel.BridgeFailingSources,
		rotaotel.MaintenanceDispatched, rotaotel.MaintenanceDeferrals, rotaotel.MaintenanceWaiterAge} {
		if !seen[name] {
			t.Errorf("the scenario recorded no %s", name)
		}
	}
	// The lateness, the limited users and the late-work alarms name lanes only, though
	// the reports behind them name the late and limited tenants.
	v := values(points)
	for _, k := range []string{"rota.dispatch.lateness{lane=pro}", "rota.dispatch.limited_users{lane=pro}", "rota.bridge.late_alarms{lane=free}",
		"rota.bridge.items{lane=pro,outcome=paused}", "rota.bridge.pauses{reason=upstream-429}", "rota.bridge.failing_sources{}"} {
		if v[k] <= 0 {
			t.Errorf("%s = %v, want it above 0 in this scenario", k, v[k])
		}
	}
	if v["rota.dispatch.cycles{outcome=ok}"] != 4 || v["rota.bridge.cycles{outcome=ok}"] != 4 || v["rota.maintenance.polls{outcome=ok}"] != 3 {
		t.Errorf("cycle and poll counts: %v", only(v, "rota.dispatch.cycles"))
	}
}

// runRota runs cycles of a whole in-memory deployment observed by m and returns the tenant
// IDs it used: a noisy pro tenant (paused by a pushback in the last cycle), quiet free
// tenants (one always left out, one whose source fails) and an unrouted one.
func runRota(t *testing.T, m *rotaotel.Metrics, cycles int) []string {
	t.Helper()
	ctx := context.Background()
	f := newFixture(t, m)
	for i := range cycles {
		rep, _ := f.runner.Cycle(ctx, t0.Add(time.Duration(i)*time.Minute)) // quiet-3's source fails on purpose
		if rep.DispatchErr != nil || len(rep.FlushErrs) > 0 {
			t.Fatal(rep.DispatchErr, rep.FlushErrs)
		}
		if i == 1 && len(rep.Alarms) == 0 {
			t.Fatalf("cycle %d raised no alarm: %+v", i+1, rep)
		}
	}
	return f.tenants
}

// run is one written item of a Runner's report: user's source ran with status, its
// ErrorStreak going from prev to next, its run ending at end and its next due at due.
func run(user string, s bridge.ItemStatus, prev, next int, end, due time.Time) bridge.ItemReport {
	e := duework.Entry{UserID: user, WorkKey: "feed", Tier: "hot", ErrorStreak: prev}
	n := e
	n.ErrorStreak, n.LastRunAt, n.DueAt = next, end, due
	if s == bridge.StatusRemoved {
		n = duework.Entry{}
	}
	return bridge.ItemReport{Item: dispatch.Item{Lane: "free", Claim: duework.Claim{Entry: e}}, Status: s, Next: n, Written: true}
}

// rota.bridge.failing_sources counts the sources whose last run this process saw left
// their ErrorStreak at or over the threshold, until a success or removal drops them or
// their next run is a whole retry interval overdue.
func TestFailingSources(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := rotaotel.NewMetrics(mp, rotaotel.WithAlarmAfterErrors(3))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	unwritten := run("c", bridge.StatusError, 8, 9, at(1), at(60))
	unwritten.Written = false
	steps := []struct {
		what  string
		now   time.Time
		items []bridge.ItemReport
		want  float64
	}{
		{"a below the threshold", at(0), []bridge.ItemReport{run("a", bridge.StatusError, 1, 2, at(0), at(1))}, 0},
		{"a at it, b over it, c not written", at(1), []bridge.ItemReport{run("a", bridge.StatusError, 2, 3, at(1), at(5)),
			run("b", bridge.StatusError, 6, 7, at(1), at(120)), unwritten}, 2},
		{"a pushed back: kept, its next run moved", at(6), []bridge.ItemReport{run("a", bridge.StatusPaused, 3, 3, at(6), at(30))}, 2},
		{"a's first next run long past, its new one not", at(20), nil, 2},
		{"a succeeded in an earlier cycle, told late", at(5), []bridge.ItemReport{run("a", bridge.StatusHit, 3, 0, at(5), at(10))}, 2},
		{"b succeeded", at(30), []bridge.ItemReport{run("b", bridge.StatusMiss, 7, 0, at(30), at(35))}, 1},
		{"a a whole interval overdue: forgotten", at(55), nil, 0},
		{"d failing", at(60), []bridge.ItemReport{run("d", bridge.StatusError, 4, 5, at(60), at(70))}, 1},
		{"d removed", at(61), []bridge.ItemReport{run("d", bridge.StatusRemoved, 5, 0, at(61), time.Time{})}, 0},
		{"e pushed back, not known failing", at(62), []bridge.ItemReport{run("e", bridge.StatusPaused, 9, 9, at(62), at(70))}, 0},
	}
	for _, s := range steps {
		m.ObserveCycle(bridge.CycleReport{Now: s.now, Items: s.items})
		if got := values(collect(t, reader))["rota.bridge.failing_sources{}"]; got != s.want {
			t.Errorf("%s: failing_sources %v, want %v", s.what, got, s.want)
		}
	}

	// By default the threshold is bridge.DefaultAlarmAfterErrors; negative leaves the
	// gauge out.
	for _, tc := range []struct {
		opts []rotaotel.Option
		want map[string]float64
	}{
		{nil, map[string]float64{"rota.bridge.failing_sources{}": 1}},
		{[]rotaotel.Option{rotaotel.WithAlarmAfterErrors(-1)}, map[string]float64{}},
	} {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		m, err := rotaotel.NewMetrics(mp, tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		m.ObserveCycle(bridge.CycleReport{Now: t0, Items: []bridge.ItemReport{
			run("a", bridge.StatusError, bridge.DefaultAlarmAfterErrors-1, bridge.DefaultAlarmAfterErrors, t0, at(10)),
			run("b", bridge.StatusError, bridge.DefaultAlarmAfterErrors-2, bridge.DefaultAlarmAfterErrors-1, t0, at(10))}})
		if diff := cmp.Diff(tc.want, only(values(collect(t, reader)), "rota.bridge.failing_sources")); diff != "" {
			t.Errorf("with %d options (-want +got):\n%s", len(tc.opts), diff)
		}
		_ = m.Close()
		_ = mp.Shutdown(context.Background())
	}
}
