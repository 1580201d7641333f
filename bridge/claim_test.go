package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/internal/fakeclock"
	"github.com/rotaworks/rota/tenancy"
)

// overlapProbe is a pipeline slower than any claim: each run lasts until its context
// ends (or, with lasts set, until that much virtual time has passed). It fails the test
// when two runs of one entry overlap, and reports each start and each end's cause.
type overlapProbe struct {
	t       *testing.T
	lasts   time.Duration
	mu      sync.Mutex
	active  map[string]bool
	runs    int
	started chan string
	causes  chan error
}

func newOverlapProbe(t *testing.T) *overlapProbe {
	return &overlapProbe{t: t, active: map[string]bool{}, started: make(chan string, 1000), causes: make(chan error, 1000)}
}

func (p *overlapProbe) Run(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
	key := tc.UserID() + "/" + e.Slug
	p.mu.Lock()
	if p.active[key] {
		p.t.Errorf("%s runs twice at once", key)
	}
	p.active[key] = true
	p.runs++
	p.mu.Unlock()
	p.started <- e.Slug
	var done <-chan time.Time
	if p.lasts > 0 {
		done = time.After(p.lasts)
	}
	select {
	case <-ctx.Done():
	case <-done:
	}
	p.mu.Lock()
	delete(p.active, key)
	p.mu.Unlock()
	p.causes <- context.Cause(ctx)
	return hit, ctx.Err()
}

// TestItemsEndWithTheirClaims: one worker, three items, a pipeline slower than ClaimFor.
// The first item's context ends at its claim's end less the margin, on the Runner's
// clock; the two others, whose claims would end before the worker is free, are handed
// back unstarted. A second Runner then dispatches all three without any run overlapping
// one of the first Runner's.
func TestItemsEndWithTheirClaims(t *testing.T) {
	probe := newOverlapProbe(t)
	w := newWorld(t, worldConfig{pipe: probe, claimFor: time.Minute})
	for _, s := range []string{"a", "b", "c"} {
		w.add(t, "u1", tenancy.PlanFree, s, "hot", t0)
	}
	clk := fakeclock.New(t0)
	first := w.runner(t, bridge.RunnerConfig{Workers: 1, Clock: clk})
	done := make(chan bridge.CycleReport)
	go func() {
		rep, _ := first.Cycle(context.Background(), t0)
		done <- rep
	}()
	recv(t, probe.started, "a to start")
	end := t0.Add(time.Minute - bridge.DefaultClaimMargin)
	waitLive(t, clk, 0, 1) // a's claim is timed
	clk.Advance(end.Sub(t0) - time.Nanosecond)
	select {
	case <-probe.causes:
		t.Fatal("a's context ended before its claim's end less the margin")
	default:
	}
	clk.Advance(time.Nanosecond)
	if cause := recv(t, probe.causes, "a's context to end"); !errors.Is(cause, bridge.ErrClaimEnded) {
		t.Fatalf("a's context ended with %v, want ErrClaimEnded", cause)
	}
	rep := recv(t, done, "the first cycle")
	got := fmt.Sprint(itemLines(rep), rep.Late)
	if want := "[free:u1/a=error free:u1/b=late free:u1/c=late] 2"; got != want {
		t.Fatalf("first cycle: %s, want %s", got, want)
	}
	if !errors.Is(rep.Items[0].Err, bridge.ErrClaimEnded) {
		t.Errorf("a's error %v does not say its claim ended", rep.Items[0].Err)
	}
	for _, s := range []string{"b", "c"} {
		if e := get(t, w.idx, "u1", s); !e.DueAt.Equal(t0) || e.MissStreak != 0 {
			t.Errorf("%s handed back changed: %+v", s, e)
		}
	}

	// A second Runner on the same index finds b and c due at once, and a after its retry.
	clk.Advance(time.Minute)
	second := w.runner(t, bridge.RunnerConfig{Workers: 3, Clock: clk})
	go func() {
		rep, _ := second.Cycle(context.Background(), clk.Now())
		done <- rep
	}()
	for range 3 {
		recv(t, probe.started, "the second Runner's items")
	}
	clk.Advance(time.Minute)
	rep = recv(t, done, "the second cycle")
	if rep.Dispatched != 3 || rep.Errors != 3 {
		t.Fatalf("second cycle: %v, want a, b and c run and cut at their claims' end", itemLines(rep))
	}
}

// TestSlowPipelineNeverRunsTwiceAtOnce runs two Runners on one index for ten virtual
// minutes with a pipeline that takes longer than ClaimFor: no entry ever runs twice at
// once, and the first Runner's single worker hands back the items it cannot start in
// time.
func TestSlowPipelineNeverRunsTwiceAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		probe := newOverlapProbe(t)
		probe.lasts = 90 * time.Second
		w := newWorld(t, worldConfig{pipe: probe, claimFor: time.Minute})
		for _, s := range []string{"a", "b", "c"} {
			w.add(t, "u1", tenancy.PlanFree, s, "fast", start)
		}
		var mu sync.Mutex
		late := 0
		count := bridge.ObserverFunc(func(rep bridge.CycleReport) {
			mu.Lock()
			late += rep.Late
			mu.Unlock()
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		for _, cfg := range []bridge.RunnerConfig{
			{Workers: 1, Interval: 20 * time.Second, Observer: count, ShutdownTimeout: time.Minute},
			{Workers: 3, Interval: 25 * time.Second, ShutdownTimeout: time.Minute},
		} {
			r := w.runner(t, cfg)
			wg.Go(func() {
				if err := r.Run(ctx); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for len(probe.causes) > 0 {
			if cause := <-probe.causes; cause != nil && !errors.Is(cause, bridge.ErrClaimEnded) {
				t.Errorf("a run ended with %v", cause)
			}
		}
		if probe.runs < 10 || late == 0 {
			t.Fatalf("%d runs, %d late items: the scenario did not load the Runners", probe.runs, late)
		}
	})
}
