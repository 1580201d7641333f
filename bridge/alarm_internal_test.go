package bridge

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// scriptedDispatcher hands out one scripted batch (or error) per call.
type scriptedDispatcher struct {
	batches []dispatch.Batch
	errs    []error
	n       int
}

func (s *scriptedDispatcher) Config() dispatch.Config {
	return dispatch.Config{ClaimFor: time.Hour, MaxClockSkew: dispatch.DefaultMaxClockSkew}
}

func (s *scriptedDispatcher) Dispatch(ctx context.Context, now time.Time) (dispatch.Batch, error) {
	i := s.n
	s.n++
	return s.batches[i], s.errs[i]
}

// items returns one item per user of users in lane, never claimed: the Runner finds them
// lost and writes nothing.
func items(lane dispatch.Lane, users ...string) []dispatch.Item {
	out := make([]dispatch.Item, len(users))
	for i, u := range users {
		e := duework.Entry{UserID: u, WorkKey: fmt.Sprintf("k%d", i), Tier: "hot", DueAt: t0}
		out[i] = dispatch.Item{Claim: duework.Claim{Entry: e, Token: 1, Until: t0.Add(time.Hour)}, Lane: lane}
	}
	return out
}

// waits returns the lane reports of pro and free waiting since the given instants.
func waits(pro, free time.Time) []dispatch.LaneReport {
	return []dispatch.LaneReport{{Lane: "pro", WaitingSince: pro}, {Lane: "free", WaitingSince: free}}
}

type alarmCycle struct {
	now       time.Time
	batch     dispatch.Batch
	err       error
	alarms    []WaitAlarm
	recovered []dispatch.Lane
}

// alarmScript is a run of cycles one minute apart with AlarmAfter 2m: each lane raises
// its alarm once per episode, past the threshold and not at it, ends it when the wait is
// back within it, and a failed dispatch changes nothing.
func alarmScript() []alarmCycle {
	min := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
	var none time.Time
	freeItems := items("free", "u1", "u1", "u2", "u3", "u4")
	return []alarmCycle{
		{now: min(0), batch: dispatch.Batch{Lanes: waits(none, min(-1))}},
		{now: min(1), batch: dispatch.Batch{Lanes: waits(none, min(-1))}}, // waited 2m: at the threshold, not past it
		{now: min(2), batch: dispatch.Batch{Items: freeItems, Lanes: waits(none, min(-1))},
			alarms: []WaitAlarm{{Lane: "free", Wait: 3 * time.Minute, Crowding: []UserItems{{"u1", 2}, {"u2", 1}, {"u3", 1}}}}},
		{now: min(3), err: fmt.Errorf("index down")},
		{now: min(4), batch: dispatch.Batch{Items: items("pro", "p1"), Lanes: waits(min(0), min(-1))},
			alarms: []WaitAlarm{{Lane: "pro", Wait: 4 * time.Minute, Crowding: []UserItems{{"p1", 1}}}}},
		{now: min(5), batch: dispatch.Batch{Lanes: waits(min(0), none)}, recovered: []dispatch.Lane{"free"}},
		{now: min(6), batch: dispatch.Batch{Lanes: waits(min(6), none)}, recovered: []dispatch.Lane{"pro"}},
		{now: min(9), batch: dispatch.Batch{Lanes: waits(none, min(6))},
			alarms: []WaitAlarm{{Lane: "free", Wait: 3 * time.Minute, Crowding: []UserItems{}}}},
	}
}

func runScript(t *testing.T, script []alarmCycle, cfg RunnerConfig) ([]CycleReport, string) {
	t.Helper()
	d := &scriptedDispatcher{}
	for _, c := range script {
		d.batches, d.errs = append(d.batches, c.batch), append(d.errs, c.err)
	}
	var logs bytes.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	b := &Bridge{Index: duework.NewMemory(), Watchlist: tenancy.NewMemoryWatchlist(),
		Pipeline: PipelineFunc(func(context.Context, tenancy.Context, tenancy.WatchlistEntry) (Result, error) {
			t.Error("a never-claimed item ran")
			return Result{}, nil
		})}
	r, err := newRunner(b, d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var reps []CycleReport
	for _, c := range script {
		rep, _ := r.Cycle(context.Background(), c.now)
		reps = append(reps, rep)
	}
	return reps, logs.String()
}

func TestWaitAlarmEpisodes(t *testing.T) {
	script := alarmScript()
	reps, logs := runScript(t, script, RunnerConfig{AlarmAfter: 2 * time.Minute})
	for i, c := range script {
		if diff := cmp.Diff(c.alarms, reps[i].Alarms, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("cycle at +%v: alarms (-want +got):\n%s", c.now.Sub(t0), diff)
		}
		if diff := cmp.Diff(c.recovered, reps[i].Recovered, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("cycle at +%v: recovered (-want +got):\n%s", c.now.Sub(t0), diff)
		}
	}
	for _, line := range []string{
		`level=WARN msg="rota: noisy neighbour" lane=free wait=3m0s crowding="[u1:2 u2:1 u3:1]"`,
		`level=WARN msg="rota: noisy neighbour" lane=pro wait=4m0s crowding=[p1:1]`,
		`level=INFO msg="rota: noisy neighbour recovered" lane=free`,
		`level=INFO msg="rota: noisy neighbour recovered" lane=pro`,
		`level=WARN msg="rota: noisy neighbour" lane=free wait=3m0s crowding=[]`,
	} {
		if !strings.Contains(logs, line) {
			t.Errorf("logs lack %s:\n%s", line, logs)
		}
	}
	if n := strings.Count(logs, `msg="rota: noisy neighbour"`); n != 3 {
		t.Errorf("%d alarm lines, want 3 (one per episode):\n%s", n, logs)
	}
}

func TestWaitAlarmThreshold(t *testing.T) {
	raised := func(cfg RunnerConfig) []dispatch.Lane {
		reps, _ := runScript(t, alarmScript(), cfg)
		var out []dispatch.Lane
		for _, rep := range reps {
			for _, a := range rep.Alarms {
				out = append(out, a.Lane)
			}
		}
		return out
	}
	// Zero: defaultAlarmIntervals × Interval. With an Interval of 12s that is 2m, as above.
	if got := raised(RunnerConfig{Interval: 12 * time.Second}); !cmp.Equal(got, []dispatch.Lane{"free", "pro", "free"}) {
		t.Errorf("AlarmAfter zero with a 12s Interval raised %v, want the 2m script's alarms", got)
	}
	// With the default Interval (1m) the threshold is 10m: nothing in the script waits so long.
	if got := raised(RunnerConfig{}); got != nil {
		t.Errorf("default threshold raised %v, want none", got)
	}
	if got := raised(RunnerConfig{AlarmAfter: -1, Interval: 12 * time.Second}); got != nil {
		t.Errorf("a negative AlarmAfter still raised %v", got)
	}
}

func TestCrowdingNamesAtMostmaxCrowding(t *testing.T) {
	its := append(items("free", "a", "b", "b", "c", "c", "c", "d", "d", "d", "e"), items("pro", "z", "z", "z", "z")...)
	want := []UserItems{{"c", 3}, {"d", 3}, {"b", 2}}
	if diff := cmp.Diff(want, crowding(its, "free")); diff != "" {
		t.Errorf("crowding: the top maxCrowding of the lane by items, ties by UserID (-want +got):\n%s", diff)
	}
}
