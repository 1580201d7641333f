package bridge_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/fakeclock"
	"github.com/rotaworks/rota/tenancy"
)

// stopping is a Runner's Run on a fake clock with one worker and three items a, b and c
// due at t0, started and waiting until a runs.
type stopping struct {
	w      *world
	idx    *countingIndex
	clk    *fakeclock.Clock
	gate   *gatePipeline
	cancel context.CancelFunc
	done   chan error
}

func startStopping(t *testing.T, honour bool, idx duework.Index) *stopping {
	t.Helper()
	s := &stopping{clk: fakeclock.New(t0), gate: newGate(), done: make(chan error, 1)}
	s.gate.honour = honour
	if idx == nil {
		s.idx = newCountingIndex()
		s.idx.completed = make(chan int, 10)
		s.idx.unclaimed = make(chan int, 10)
		idx = s.idx
	}
	s.w = newWorld(t, worldConfig{idx: idx, pipe: s.gate})
	for _, k := range []string{"a", "b", "c"} {
		s.w.add(t, "u1", tenancy.PlanFree, k, "hot", t0)
	}
	r := s.w.runner(t, bridge.RunnerConfig{Workers: 1, Clock: s.clk, ShutdownTimeout: 30 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() { s.done <- r.Run(ctx) }()
	return s
}

// due returns the keys of u1's entries visible at t0: unclaimed and due.
func (s *stopping) due(t *testing.T) string {
	t.Helper()
	es, err := s.w.idx.DueBefore(context.Background(), t0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range es {
		keys = append(keys, e.WorkKey)
	}
	return strings.Join(keys, ",")
}

// TestRunStopsCleanly: when Run's ctx ends, the items waiting for a worker are handed back
// at once in one Unclaim, the running item finishes and is recorded, Run returns nil and
// logs nothing above Info.
func TestRunStopsCleanly(t *testing.T) {
	s := startStopping(t, false, nil)
	recv(t, s.gate.started, "a to start")
	s.cancel()
	if n := recv(t, s.idx.unclaimed, "the release"); n != 2 {
		t.Fatalf("released %d items in the first Unclaim, want b and c together", n)
	}
	if got := s.due(t); got != "b,c" {
		t.Fatalf("due after the release: %s, want b and c unclaimed", got)
	}
	close(s.gate.release)
	if err := recv(t, s.done, "Run to return"); err != nil {
		t.Fatalf("Run = %v, want nil after a clean stop", err)
	}
	if e := get(t, s.w.idx, "u1", "a"); e.LastRunAt.IsZero() {
		t.Fatalf("the running item was not recorded: %+v", e)
	}
	logs := s.w.logs.String()
	if strings.Contains(logs, "level=WARN") || strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "released=2") ||
		!strings.Contains(logs, `level=INFO msg="rota: runner stopped"`) {
		t.Fatalf("a clean stop logs only Info lines, the release counted:\n%s", logs)
	}
	if tk, tm := s.clk.Live(); tk != 0 || tm != 0 {
		t.Fatalf("Run left %d tickers and %d timers behind", tk, tm)
	}
}

// TestRunShutdownTimeoutCancelsItems: an item still running ShutdownTimeout after Run's
// ctx ended is cancelled with ErrShutdownTimeout as its cause, its retry is written, and
// Run says the stop was cut short.
func TestRunShutdownTimeoutCancelsItems(t *testing.T) {
	s := startStopping(t, true, nil)
	recv(t, s.gate.started, "a to start")
	s.cancel()
	recv(t, s.idx.unclaimed, "the release")
	waitLive(t, s.clk, 0, 4) // a's claim, its overrun watch and the two stages of the stop
	s.clk.Advance(30*time.Second - time.Nanosecond)
	select {
	case err := <-s.done:
		t.Fatalf("Run returned %v before ShutdownTimeout", err)
	case n := <-s.idx.completed:
		t.Fatalf("%d items written before ShutdownTimeout", n)
	default:
	}
	s.clk.Advance(time.Nanosecond)
	err := recv(t, s.done, "Run to return")
	if !errors.Is(err, bridge.ErrShutdownTimeout) {
		t.Fatalf("Run = %v, want ErrShutdownTimeout", err)
	}
	if e := get(t, s.w.idx, "u1", "a"); !e.DueAt.Equal(t0.Add(bridge.DefaultRetry.Base)) {
		t.Fatalf("the cancelled item's retry was not written: %+v", e)
	}
	if logs := s.w.logs.String(); !strings.Contains(logs, "shutdown timeout") || !strings.Contains(logs, `level=WARN msg="rota: runner stopped"`) {
		t.Fatalf("logs:\n%s", logs)
	}
}

// claimGate holds the dispatch inside Index.Claim until released, honouring ctx as a
// database would.
type claimGate struct {
	duework.Index
	entered chan struct{}
	release chan struct{}
	ctxErr  chan error
}

func (g *claimGate) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
	}
	g.ctxErr <- ctx.Err()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return g.Index.Claim(ctx, keys, now, until)
}

// TestRunFinishesAStartedDispatch: Run's ctx ends inside Index.Claim; the claim still
// completes on a context of its own, the claimed items are handed back unstarted, nothing
// stays claimed, and the stop is clean.
func TestRunFinishesAStartedDispatch(t *testing.T) {
	g := &claimGate{Index: newIndex(), entered: make(chan struct{}, 1), release: make(chan struct{}), ctxErr: make(chan error, 1)}
	s := startStopping(t, false, g)
	recv(t, g.entered, "the dispatch to claim")
	s.cancel()
	close(g.release)
	if err := recv(t, g.ctxErr, "the claim"); err != nil {
		t.Fatalf("the claim ran under an ended context: %v", err)
	}
	if err := recv(t, s.done, "Run to return"); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if got := s.due(t); got != "a,b,c" {
		t.Fatalf("due after the stop: %s, want every entry unclaimed", got)
	}
	if logs := s.w.logs.String(); strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "dispatched=3") || !strings.Contains(logs, "released=3") {
		t.Fatalf("logs:\n%s", logs)
	}
}

// TestRunBoundsAHungDispatch: a dispatch that hangs after Run's ctx ended is cut off at
// ShutdownTimeout.
func TestRunBoundsAHungDispatch(t *testing.T) {
	g := &claimGate{Index: newIndex(), entered: make(chan struct{}, 1), release: make(chan struct{}), ctxErr: make(chan error, 1)}
	s := startStopping(t, false, g)
	recv(t, g.entered, "the dispatch to claim")
	s.cancel()
	// The loop is still inside the dispatch, its ticker running; the two stages of the
	// stop are timed.
	waitLive(t, s.clk, 1, 2)
	s.clk.Advance(30 * time.Second)
	if err := recv(t, g.ctxErr, "the claim"); !errors.Is(err, context.Canceled) {
		t.Fatalf("the hung claim's context: %v, want cancelled", err)
	}
	if err := recv(t, s.done, "Run to return"); !errors.Is(err, bridge.ErrShutdownTimeout) {
		t.Fatalf("Run = %v, want ErrShutdownTimeout", err)
	}
}

// TestCycleStopsLikeRun: a Cycle whose ctx ends hands back the items not started and lets
// the running one finish within ShutdownTimeout.
func TestCycleStopsLikeRun(t *testing.T) {
	gate := newGate()
	gate.honour = true
	w := newWorld(t, worldConfig{pipe: gate})
	for _, s := range []string{"a", "b"} {
		w.add(t, "u1", tenancy.PlanFree, s, "hot", t0)
	}
	clk := fakeclock.New(t0)
	r := w.runner(t, bridge.RunnerConfig{Workers: 1, Clock: clk})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bridge.CycleReport)
	go func() {
		rep, _ := r.Cycle(ctx, t0)
		done <- rep
	}()
	recv(t, gate.started, "a to start")
	cancel()
	waitLive(t, clk, 0, 4) // a's claim, its overrun watch and the two stages of the stop are timed
	clk.Advance(bridge.DefaultShutdownTimeout)
	rep := recv(t, done, "the cycle")
	if rep.Released != 1 || rep.Errors != 1 || !errors.Is(rep.Err(), bridge.ErrShutdownTimeout) {
		t.Fatalf("Cycle = %v, %v; want b released and a cut off by the shutdown timeout", itemLines(rep), rep.Err())
	}
	if e := get(t, w.idx, "u1", "a"); !e.DueAt.Equal(t0.Add(bridge.DefaultRetry.Base)) {
		t.Errorf("a after the shutdown timeout: %+v", e)
	}
	if e := get(t, w.idx, "u1", "b"); !e.DueAt.Equal(t0) {
		t.Errorf("b after release: %+v", e)
	}
}
