package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/duework"
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
	waitLive(t, clk, 0, 2) // a's claim is timed, and watched for an overrun
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
		w.b.Retry = everyMinute // every run fails: it is retried at once, not backed off
		for _, s := range []string{"a", "b", "c"} {
			w.add(t, "u1", tenancy.PlanFree, s, "fast", start)
		}
		var mu sync.Mutex
		late := 0
		count := observerFunc(func(rep bridge.CycleReport) {
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

// TestRunDueItemNeverStartsALateItem: an item whose claim has ended, or ends within the
// margin at the now it is given, runs nothing: its claim is handed back with Unclaim, so
// the entry is due at once and otherwise unchanged, and the error wraps ErrClaimEnded.
func TestRunDueItemNeverStartsALateItem(t *testing.T) {
	for _, tc := range []struct {
		name string
		now  time.Duration // after the claim's start; the claim lasts ten minutes
	}{
		{"at the margin", 10*time.Minute - bridge.DefaultClaimMargin},
		{"at the claim's end", 10 * time.Minute},
		{"long after the claim", 3 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idx, pipe := newCountingIndex(), newStub()
			wl := tenancy.NewMemoryWatchlist()
			b := &bridge.Bridge{Index: idx, Watchlist: wl, Pipeline: pipe}
			watch(t, wl, "u1", "a", "hot")
			before := duework.Entry{UserID: "u1", WorkKey: "a", Tier: "hot", DueAt: t0, MissStreak: 2}
			schedule(t, idx.Memory, before)
			item := claim(t, idx, "u1", "a", t0)
			now := t0.Add(tc.now)
			res, err := b.RunDueItem(context.Background(), item, now)
			if res != nil || !errors.Is(err, bridge.ErrClaimEnded) || pipe.ncalls() != 0 {
				t.Fatalf("RunDueItem = %v, %v with %d runs; want nothing run and ErrClaimEnded", res, err, pipe.ncalls())
			}
			if got := get(t, idx.Memory, "u1", "a"); got != before {
				t.Fatalf("the late item changed its entry: %+v, want %+v", got, before)
			}
			if n, m := idx.n("Unclaim"), idx.n("Complete")+idx.n("CompleteMany")+idx.n("StartClaims"); n != 1 || m != 0 {
				t.Fatalf("%d Unclaims and %d other calls, want the claim handed back and nothing else", n, m)
			}
			// The entry is due at once: visible and claimable within the claim's old term.
			at := t0.Add(time.Minute)
			if due, _ := idx.DueBefore(context.Background(), at, 10); len(due) != 1 {
				t.Fatalf("after the hand-back %d entries are due at +1m, want a", len(due))
			}
			claim(t, idx, "u1", "a", at)
		})
	}
}

// TestRunDueItemEndsThePipelineBeforeTheClaim: the pipeline's context ends Until − margin
// − now after the call, on the real clock, with ErrClaimEnded as its cause.
func TestRunDueItemEndsThePipelineBeforeTheClaim(t *testing.T) {
	f := newFixture()
	f.dueEntry(t, "a", "hot", 0)
	item := claim(t, f.idx, "u1", "a", t0) // until t0+10m
	const left = 50 * time.Millisecond
	var deadline time.Time
	var cause error
	f.b.Pipeline = bridge.PipelineFunc(func(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
		deadline, _ = ctx.Deadline()
		<-ctx.Done()
		cause = context.Cause(ctx)
		return bridge.Result{}, ctx.Err()
	})
	called := time.Now()
	_, err := f.b.RunDueItem(context.Background(), item, item.Claim.Until.Add(-bridge.DefaultClaimMargin-left))
	ended := time.Since(called)
	if !errors.Is(cause, bridge.ErrClaimEnded) || !errors.Is(err, bridge.ErrClaimEnded) {
		t.Fatalf("the pipeline's context ended with %v and RunDueItem returned %v; want ErrClaimEnded", cause, err)
	}
	if d := deadline.Sub(called); d < left || d > left+ended-left {
		t.Errorf("the pipeline's deadline was %v after the call, want %v (the call took %v)", d, left, ended)
	}
	if ended < left {
		t.Errorf("the run ended %v after the call, before its %v", ended, left)
	}
	// Its retry counts from the time the run ended.
	if e := get(t, f.idx, "u1", "a"); e.DueAt.Before(item.Claim.Until.Add(-bridge.DefaultClaimMargin).Add(bridge.DefaultRetry.Base)) {
		t.Errorf("retry due at %v, before the run ended plus the retry delay", e.DueAt)
	}
}

// TestAStaleItemNeverOverlapsItsRedispatch is the queue's defect: an item that sat in a
// host's queue past its claim is delivered while the entry, dispatched again, runs
// elsewhere. It must not run, nor disturb the running claim.
func TestAStaleItemNeverOverlapsItsRedispatch(t *testing.T) {
	probe := newOverlapProbe(t)
	w := newWorld(t, worldConfig{pipe: probe, claimFor: time.Minute})
	w.add(t, "u1", tenancy.PlanFree, "a", "hot", t0)
	ctx := context.Background()
	first, err := w.d.Dispatch(ctx, t0)
	if err != nil || len(first.Items) != 1 {
		t.Fatalf("first dispatch: %v, %v", first.Items, err)
	}
	stale := first.Items[0] // sits in the queue
	again := t0.Add(time.Minute)
	second, err := w.d.Dispatch(ctx, again)
	if err != nil || len(second.Items) != 1 {
		t.Fatalf("the entry was not dispatched again once its claim ended: %v, %v", second.Items, err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() {
		_, err := w.b.RunDueItem(runCtx, second.Items[0], again)
		done <- err
	}()
	recv(t, probe.started, "the redispatched item to run")
	res, err := w.b.RunDueItem(ctx, stale, again.Add(time.Second))
	if res != nil || !errors.Is(err, bridge.ErrClaimEnded) {
		t.Fatalf("the stale item: %v, %v; want it refused with ErrClaimEnded", res, err)
	}
	stop() // the running item ends (its pipeline honours ctx) and records its retry
	if err := recv(t, done, "the running item"); !errors.Is(err, context.Canceled) {
		t.Fatalf("the running item: %v", err)
	}
	if probe.runs != 1 {
		t.Fatalf("%d runs, want the redispatched item's alone", probe.runs)
	}
	if e := get(t, w.idx, "u1", "a"); e.DueAt.Before(again.Add(bridge.DefaultRetry.Base)) {
		t.Fatalf("the running item's write was disturbed: %+v", e)
	}
}

// TestAPipelineRunningPastItsClaimIsNamed: a pipeline that ignores its context and still
// runs when its claim ends gets a Warn line naming the tenant and the source at once, and
// another with the overrun when it returns; the report carries the overrun.
func TestAPipelineRunningPastItsClaimIsNamed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := newGate() // ignores its context
		w := newWorld(t, worldConfig{pipe: gate, claimFor: time.Minute})
		w.add(t, "u1", tenancy.PlanFree, "a", "hot", t0)
		item := w.dispatchAll(t, t0, 1)[0]
		clk := fakeclock.New(t0)
		wk := w.worker(t, bridge.WorkerConfig{Clock: clk})
		reps := make(chan bridge.ItemReport, 1)
		go func() { reps <- wk.Do(context.Background(), item, t0) }()
		<-gate.started
		synctest.Wait()
		clk.Advance(time.Minute - time.Nanosecond)
		synctest.Wait()
		if logs := w.logs.String(); strings.Contains(logs, "past its claim") {
			t.Fatalf("a warning before the claim ended:\n%s", logs)
		}
		clk.Advance(time.Nanosecond)
		synctest.Wait()
		if logs := w.logs.String(); !strings.Contains(logs, `level=WARN msg="rota: pipeline still running past its claim" user_id=u1 work_key=a`) {
			t.Fatalf("no warning naming u1/a when its claim ended:\n%s", logs)
		}
		clk.Advance(7 * time.Second)
		close(gate.release)
		rep := <-reps
		if rep.Overrun != 7*time.Second {
			t.Fatalf("Overrun = %v, want 7s", rep.Overrun)
		}
		if logs := w.logs.String(); !strings.Contains(logs, `msg="rota: pipeline ran past its claim" user_id=u1 work_key=a`) || !strings.Contains(logs, "overrun=7s") {
			t.Fatalf("no warning with the overrun:\n%s", logs)
		}
	})
}
