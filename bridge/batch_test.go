package bridge_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/internal/fakeclock"
	"github.com/rotaworks/rota/tenancy"
)

// TestRunnerCompletesInBatchesOfFlushItems: seven items of a second each on one worker
// with FlushItems 3 (and a FlushInterval longer than the cycle) are written in
// CompleteMany calls of 3, 3 and, when the cycle's last item ends, 1 — never one Complete
// each.
func TestRunnerCompletesInBatchesOfFlushItems(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		idx := newCountingIndex()
		w := newWorld(t, worldConfig{idx: idx, pipe: bridge.PipelineFunc(func(context.Context, tenancy.Context, tenancy.WatchlistEntry) (bridge.Result, error) {
			time.Sleep(time.Second) // virtual time: each write ends before the next item does
			return hit, nil
		})})
		for i := range 7 {
			w.add(t, "u1", tenancy.PlanFree, fmt.Sprintf("s%d", i), "hot", t0)
		}
		r := w.runner(t, bridge.RunnerConfig{Workers: 1, FlushItems: 3, FlushInterval: 30 * time.Second, ClaimMargin: time.Minute})
		rep, err := r.Cycle(context.Background(), t0)
		if err != nil || rep.Hits != 7 {
			t.Fatalf("Cycle = %d hits, %v; want 7", rep.Hits, err)
		}
		if diff := cmp.Diff([]int{3, 3, 1}, idx.batchSizes()); diff != "" {
			t.Errorf("CompleteMany sizes (-want +got):\n%s", diff)
		}
		if n := idx.n("Complete"); n != 0 {
			t.Errorf("%d single Completes, want none", n)
		}
		for i := range 7 {
			if e := get(t, idx.Memory, "u1", fmt.Sprintf("s%d", i)); !e.DueAt.Equal(t0.Add(cadence.TierHot.Base)) {
				t.Errorf("s%d not completed: %+v", i, e)
			}
		}
	})
}

// TestRunnerWritesOneBatchAtATime: while a cycle's CompleteMany is in flight, its next
// completions wait, and then go in one call — all of them, more than FlushItems — so
// that a cycle's writes never contend with each other.
func TestRunnerWritesOneBatchAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		idx := newCountingIndex()
		idx.completed = make(chan int) // each CompleteMany waits until the test takes its size
		pipe := newStub()
		w := newWorld(t, worldConfig{idx: idx, pipe: pipe})
		for i := range 7 {
			k := fmt.Sprintf("s%d", i)
			w.add(t, "u1", tenancy.PlanFree, k, "hot", t0)
			pipe.results[k] = hit
		}
		r := w.runner(t, bridge.RunnerConfig{Workers: 1, FlushItems: 3})
		done := make(chan bridge.CycleReport)
		go func() {
			rep, _ := r.Cycle(context.Background(), t0)
			done <- rep
		}()
		synctest.Wait() // every item has run; the first write is in flight
		if got := idx.batchSizes(); !slices.Equal(got, []int{3}) || pipe.ncalls() != 7 {
			t.Fatalf("with all 7 items run: CompleteMany sizes %v, want one call of 3 in flight", got)
		}
		if n := <-idx.completed; n != 3 {
			t.Fatalf("first write of %d, want 3", n)
		}
		if n := <-idx.completed; n != 4 {
			t.Fatalf("second write of %d, want the 4 that waited for the first", n)
		}
		if rep := <-done; rep.Hits != 7 || len(idx.batchSizes()) != 2 {
			t.Fatalf("cycle: %v after CompleteMany sizes %v, want 7 hits in two calls", itemLines(rep), idx.batchSizes())
		}
	})
}

// TestRunnerFlushesAfterFlushInterval: a completion waits for its batch at most
// FlushInterval on the Runner's clock, even while other items of its cycle still run.
func TestRunnerFlushesAfterFlushInterval(t *testing.T) {
	idx := newCountingIndex()
	idx.completed = make(chan int, 10)
	gate := newGate()
	quick := bridge.PipelineFunc(func(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
		if e.Slug == "quick" {
			return hit, nil
		}
		return gate.Run(ctx, tc, e)
	})
	w := newWorld(t, worldConfig{idx: idx, pipe: quick})
	w.add(t, "u1", tenancy.PlanFree, "quick", "hot", t0)
	w.add(t, "u1", tenancy.PlanFree, "slow", "hot", t0)
	clk := armingClock{Clock: fakeclock.New(t0), armed: make(chan time.Duration, 16)}
	r := w.runner(t, bridge.RunnerConfig{Workers: 2, FlushInterval: time.Second, Clock: clk})
	done := make(chan bridge.CycleReport)
	go func() {
		rep, _ := r.Cycle(context.Background(), t0)
		done <- rep
	}()
	recv(t, gate.started, "the slow item to start")
	// The quick item's completion waits for its batch: a timer of FlushInterval is armed
	// (the others armed so far end the items' contexts at their claims' end).
	for recv(t, clk.armed, "the flush timer") != time.Second {
	}
	select {
	case n := <-idx.completed:
		t.Fatalf("a batch of %d was written before FlushInterval passed", n)
	default:
	}
	clk.Advance(time.Second)
	if n := recv(t, idx.completed, "the timed flush"); n != 1 {
		t.Fatalf("timed flush wrote %d, want the quick item alone", n)
	}
	close(gate.release)
	if n := recv(t, idx.completed, "the last flush"); n != 1 {
		t.Fatalf("last flush wrote %d, want the slow item", n)
	}
	if rep := recv(t, done, "the cycle"); rep.Hits != 2 {
		t.Fatalf("cycle: %+v", rep)
	}
}

// armingClock is the fake clock telling the delay of every AfterFunc it arms, for a test
// that must know a particular timer is pending before it advances the clock.
type armingClock struct {
	*fakeclock.Clock
	armed chan time.Duration
}

func (c armingClock) AfterFunc(d time.Duration, f func()) func() bool {
	stop := c.Clock.AfterFunc(d, f)
	c.armed <- d
	return stop
}
