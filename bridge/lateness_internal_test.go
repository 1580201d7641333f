package bridge

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/fakeclock"
	"github.com/rotaworks/rota/tenancy"
)

// scriptedRunner returns a Runner over idx whose dispatcher hands out batches in turn,
// and the buffer its logs go to.
func scriptedRunner(t *testing.T, idx duework.Index, batches []dispatch.Batch, cfg RunnerConfig) (*Runner, *bytes.Buffer) {
	t.Helper()
	d := &scriptedDispatcher{batches: batches, errs: make([]error, len(batches))}
	var logs bytes.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	b := &Bridge{Index: idx, Watchlist: tenancy.NewMemoryWatchlist(),
		Pipeline: PipelineFunc(func(context.Context, tenancy.Context, tenancy.WatchlistEntry) (Result, error) { return Result{}, nil })}
	r, err := newRunner(b, d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r, &logs
}

// overdue is a lane report whose read found users' oldest visible work due at the given
// instants, oldest first.
func overdue(lane dispatch.Lane, users ...any) dispatch.LaneReport {
	l := dispatch.LaneReport{Lane: lane}
	for i := 0; i < len(users); i += 2 {
		o := dispatch.Overdue{UserID: users[i].(string), DueAt: users[i+1].(time.Time)}
		l.Overdue = append(l.Overdue, o)
		if l.OldestDue.IsZero() || o.DueAt.Before(l.OldestDue) {
			l.OldestDue = o.DueAt
		}
	}
	return l
}

// TestLateAlarmEpisodes: with AlarmAfter 2m, a tenant whose oldest visible work is later
// than that is named once per episode, in one Warn line per lane; its episode ends when
// its work, or its lane's oldest, is within the threshold again. Each cycle's Info line
// carries each lane's lateness.
func TestLateAlarmEpisodes(t *testing.T) {
	at := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
	type step struct {
		lanes     []dispatch.LaneReport
		alarms    []LateAlarm
		recovered []string
	}
	script := []step{
		{lanes: []dispatch.LaneReport{overdue("pro", "p1", at(-2)), overdue("free", "f1", at(-1))}}, // at the threshold: not late
		{lanes: []dispatch.LaneReport{overdue("pro", "p1", at(-2), "p2", at(0)), overdue("free", "f1", at(-3), "f2", at(-3))}, // +1m
			alarms: []LateAlarm{{"pro", "p1", 3 * time.Minute}, {"free", "f1", 4 * time.Minute}, {"free", "f2", 4 * time.Minute}}},
		{lanes: []dispatch.LaneReport{overdue("pro", "p1", at(-2), "p2", at(-2)), overdue("free", "f2", at(-3))}, // +2m: p2 joins; f1 not read
			alarms: []LateAlarm{{"pro", "p2", 4 * time.Minute}}},
		{lanes: []dispatch.LaneReport{overdue("pro", "p1", at(2)), overdue("free", "f2", at(-3))}, // +3m: p1 ran, and its lane's oldest is within the threshold; f1 and f2 still late
			recovered: []string{"p1", "p2"}},
		{lanes: []dispatch.LaneReport{overdue("pro"), overdue("free", "f3", at(3))}, // +4m: free caught up
			recovered: []string{"f1", "f2"}},
		{lanes: []dispatch.LaneReport{overdue("pro", "p1", at(0))}, // +5m: p1 late again, a new episode
			alarms: []LateAlarm{{"pro", "p1", 5 * time.Minute}}},
	}
	var batches []dispatch.Batch
	for _, s := range script {
		batches = append(batches, dispatch.Batch{Lanes: s.lanes, Items: items(s.lanes[0].Lane, "x")})
	}
	r, logs := scriptedRunner(t, duework.NewMemory(), batches, RunnerConfig{AlarmAfter: 2 * time.Minute})
	for i, s := range script {
		rep, _ := r.Cycle(context.Background(), at(i))
		if diff := cmp.Diff(s.alarms, rep.LateAlarms, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("cycle %d: alarms (-want +got):\n%s", i, diff)
		}
		if diff := cmp.Diff(s.recovered, rep.LateRecovered, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("cycle %d: recovered (-want +got):\n%s", i, diff)
		}
	}
	for _, line := range []string{
		`level=WARN msg="rota: work late" lane=pro alarm_after=2m0s tenants=[p1:3m0s]`,
		`level=WARN msg="rota: work late" lane=free alarm_after=2m0s tenants="[f1:4m0s f2:4m0s]"`,
		`level=INFO msg="rota: work late recovered" tenants="[p1 p2]"`,
		`lateness.pro=3m0s lateness.free=4m0s`,
		`lateness.pro=0s lateness.free=1m0s`,
	} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("logs lack %s:\n%s", line, logs)
		}
	}
	if n := strings.Count(logs.String(), `msg="rota: work late"`); n != 4 {
		t.Errorf("%d lateness alarm lines, want 4:\n%s", n, logs)
	}
	// A negative AlarmAfter turns it off.
	r, _ = scriptedRunner(t, duework.NewMemory(), batches, RunnerConfig{AlarmAfter: -1})
	for i := range script {
		if rep, _ := r.Cycle(context.Background(), at(i)); len(rep.LateAlarms) != 0 {
			t.Fatalf("cycle %d raised %v with the alarms off", i, rep.LateAlarms)
		}
	}
}

// TestStarvationIsReportedOnceWithItsLikelyCause: a Runner whose claims all lose, or
// whose probe finds due work served by another dispatcher at a later now, reports it once
// after starvedCycles cycles, and again only after it dispatched.
func TestStarvationIsReportedOnceWithItsLikelyCause(t *testing.T) {
	lost := dispatch.Batch{Lanes: []dispatch.LaneReport{{Lane: "free", LostClaims: 3}}}
	empty := dispatch.Batch{Lanes: []dispatch.LaneReport{{Lane: "free"}}}
	fed := dispatch.Batch{Items: items("free", "x"), Lanes: []dispatch.LaneReport{{Lane: "free", Dispatched: 1}}}

	// Due work at t0 whose user another dispatcher, its clock an hour ahead, served.
	idx := duework.NewMemory()
	tc, _ := tenancy.NewContext("u1")
	ctx := context.Background()
	e := duework.Entry{UserID: "u1", WorkKey: "a", DueAt: t0}
	if err := idx.Schedule(ctx, tc, e); err != nil {
		t.Fatal(err)
	}
	ahead := t0.Add(time.Hour)
	cs, err := idx.Claim(ctx, []duework.Key{e.Key()}, ahead, ahead.Add(time.Minute))
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim: %v, %v", cs, err)
	}
	if errs, err := idx.Unclaim(ctx, []duework.Unclaim{{Tenant: tc, Claim: cs[0]}}); err != nil || errs[0] != nil {
		t.Fatalf("unclaim: %v, %v", errs, err)
	}

	batches := []dispatch.Batch{lost, lost, lost, lost, fed, empty, empty, fed, empty}
	r, logs := scriptedRunner(t, idx, batches, RunnerConfig{})
	var starved []*Starvation
	var ended []int
	for i := range batches {
		rep, err := r.Cycle(ctx, t0.Add(time.Duration(i)*time.Second))
		if err != nil && rep.ProbeErr != nil {
			t.Fatalf("cycle %d: %v", i, rep.ProbeErr)
		}
		if rep.Starved != nil {
			starved = append(starved, rep.Starved)
			ended = append(ended, -1)
		}
		if rep.StarvationEnded {
			ended = append(ended, i)
		}
	}
	want := []*Starvation{{Cycles: 3, Reason: starvedLost}}
	if diff := cmp.Diff(want, starved); diff != "" || !cmp.Equal(ended, []int{-1, 4}) {
		t.Errorf("starvations (-want +got):\n%s\nended at %v, want after cycle 2 and in cycle 4", diff, ended)
	}
	for _, line := range []string{
		`level=WARN msg="rota: dispatching nothing" cycles=3 reason="every claim lost to another dispatcher" likely_cause="clock skew: this replica's clock lags another dispatcher's by more than dispatch.Config.MaxClockSkew"`,
		`level=INFO msg="rota: dispatching again"`,
	} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("logs lack %s:\n%s", line, logs)
		}
	}
	if n := strings.Count(logs.String(), "dispatching nothing"); n != 1 {
		t.Errorf("%d starvation lines, want 1", n)
	}

	// Empty dispatches while the probe finds due work served at a later time than this
	// Runner's clock reads: another dispatcher's clock runs an hour ahead.
	batches = []dispatch.Batch{empty, empty, empty}
	r, _ = scriptedRunner(t, idx, batches, RunnerConfig{Clock: fakeclock.New(t0.Add(2 * time.Second))})
	var last CycleReport
	for i := range batches {
		last, _ = r.Cycle(ctx, t0.Add(time.Duration(i)*time.Second))
	}
	if last.Starved == nil || last.Starved.Reason != starvedServed {
		t.Errorf("after three empty cycles with the probe finding a user served an hour ahead: %+v", last.Starved)
	}
	// In step: served after the cycles' now but before this Runner's clock reads, as by a
	// replica whose cycle began a moment later, is no starvation.
	r, _ = scriptedRunner(t, idx, batches, RunnerConfig{Clock: fakeclock.New(t0.Add(2 * time.Hour))})
	for i := range batches {
		if rep, _ := r.Cycle(ctx, t0.Add(time.Duration(i)*time.Second)); rep.Starved != nil || rep.ProbeErr != nil {
			t.Fatalf("cycle %d with a user served in step with this clock: %+v, %v", i, rep.Starved, rep.ProbeErr)
		}
	}
	// Nothing due at all is no starvation.
	r, _ = scriptedRunner(t, duework.NewMemory(), batches, RunnerConfig{})
	for i := range batches {
		if rep, _ := r.Cycle(ctx, t0.Add(time.Duration(i)*time.Second)); rep.Starved != nil || rep.ProbeErr != nil {
			t.Fatalf("cycle %d with nothing due: %+v, %v", i, rep.Starved, rep.ProbeErr)
		}
	}
}
