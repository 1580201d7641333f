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
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/internal/fakeclock"
	"github.com/rotaworks/rota/tenancy"
)

// upstream429 is a pipeline whose run of ana's source "a" waits for release and then
// returns a Pushback; every other run is a quick hit, recorded.
type upstream429 struct {
	started chan struct{}
	release chan struct{}
	push    error
	mu      sync.Mutex
	ran     []string
}

func (p *upstream429) Run(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
	p.mu.Lock()
	p.ran = append(p.ran, tc.UserID()+"/"+e.Slug)
	p.mu.Unlock()
	if tc.UserID() == "ana" && e.Slug == "a" {
		p.started <- struct{}{}
		<-p.release
		return bridge.Result{}, p.push
	}
	return hit, nil
}

func (p *upstream429) runs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.ran, " ")
}

// TestAPushbackPausesTheWholeTenant: a run that returns a Pushback pauses its tenant in
// the index until the run's end plus After, completes its entry due then with its streaks
// unchanged, hands back the tenant's items waiting for a worker unstarted, and leaves the
// other tenants alone; no dispatcher claims the tenant's entries before the pause ends.
func TestAPushbackPausesTheWholeTenant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pipe := &upstream429{started: make(chan struct{}, 1), release: make(chan struct{}),
			push: fmt.Errorf("fetch: %w", &bridge.Pushback{After: 10 * time.Minute, Reason: "upstream-429", Err: errBoom})}
		w := newWorld(t, worldConfig{pipe: pipe})
		for _, s := range []string{"a", "b", "c"} {
			w.add(t, "ana", tenancy.PlanFree, s, "hot", t0)
		}
		w.add(t, "bob", tenancy.PlanFree, "x", "hot", t0)
		before := get(t, w.idx, "ana", "a")
		before.MissStreak, before.ErrorStreak = 2, 1
		schedule(t, w.idx, before)
		items := w.dispatchAll(t, t0, 4)
		byKey := map[string]dispatch.Item{}
		for _, it := range items {
			byKey[it.Claim.Entry.UserID+"/"+it.Claim.Entry.WorkKey] = it
		}
		clk := fakeclock.New(t0)
		wk := w.worker(t, bridge.WorkerConfig{Workers: 1, Clock: clk})
		reps := map[string]chan bridge.ItemReport{}
		do := func(key string) {
			ch, it := make(chan bridge.ItemReport, 1), byKey[key]
			reps[key] = ch
			go func() { ch <- wk.Do(context.Background(), it, t0) }()
		}
		do("ana/a")
		<-pipe.started
		for _, k := range []string{"ana/b", "ana/c", "bob/x"} {
			do(k)
		}
		synctest.Wait() // b, c and x wait for the only worker
		close(pipe.release)
		until := t0.Add(10 * time.Minute)

		rep := <-reps["ana/a"]
		var pb *bridge.Pushback
		if rep.Status != bridge.StatusPaused || !rep.Written || !errors.As(rep.Err, &pb) || pb.Reason != "upstream-429" {
			t.Fatalf("a: %+v, want paused and written, its error the Pushback", rep)
		}
		want := before
		want.DueAt, want.LastRunAt = until, t0
		if got := get(t, w.idx, "ana", "a"); got != want {
			t.Fatalf("a after the pushback: %+v, want %+v (due at the pause's end, streaks unchanged)", got, want)
		}
		for _, k := range []string{"ana/b", "ana/c"} {
			rep := <-reps[k]
			if rep.Status != bridge.StatusReleased || !rep.Written {
				t.Fatalf("%s: %+v, want handed back unstarted", k, rep)
			}
		}
		if rep := <-reps["bob/x"]; rep.Status != bridge.StatusHit {
			t.Fatalf("bob's x: %+v, want a hit: the pause is ana's alone", rep)
		}
		if got := pipe.runs(); got != "ana/a bob/x" {
			t.Fatalf("runs %q, want ana's a and bob's x alone", got)
		}
		st, err := w.idx.User(context.Background(), "ana", t0)
		if err != nil || !st.PausedUntil.Equal(until) || st.PauseReason != "upstream-429" {
			t.Fatalf("User(ana) = %+v, %v; want paused until %v for upstream-429", st, err, until)
		}
		if logs := w.logs.String(); !strings.Contains(logs, `level=WARN msg="rota: tenant paused" user_id=ana work_key=a`) ||
			!strings.Contains(logs, "reason=upstream-429") || !strings.Contains(logs, "error=boom") {
			t.Fatalf("no Warn line for the pause naming the tenant, the reason and the upstream's error:\n%s", logs)
		}
		// Fleet-wide: a dispatcher claims none of ana's entries until the pause ends.
		anas := func(now time.Time) int {
			b, err := w.d.Dispatch(context.Background(), now)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, it := range b.Items {
				if it.Claim.Entry.UserID == "ana" {
					n++
				}
			}
			return n
		}
		if n := anas(until.Add(-time.Second)); n != 0 {
			t.Fatalf("a dispatch within the pause claimed %d of ana's entries, want none", n)
		}
		if n := anas(until); n != 3 {
			t.Fatalf("a dispatch at the pause's end claimed %d of ana's entries, want three", n)
		}
	})
}

// TestAPushbackThatCannotPauseIsAPlainError: a Pushback with no positive After or with an
// invalid Reason pauses nothing: the source backs off alone, as after any error.
func TestAPushbackThatCannotPauseIsAPlainError(t *testing.T) {
	for _, pb := range []*bridge.Pushback{{After: 0, Reason: "upstream-429"}, {After: -time.Minute, Reason: "x"}, {After: time.Minute, Reason: ""},
		{After: time.Minute, Reason: "bad\nreason"}} {
		f := newFixture()
		f.dueEntry(t, "a", "hot", 0)
		f.pipe.errs["a"] = pb
		_, err := f.b.RunDueItem(context.Background(), claim(t, f.idx, "u1", "a", t0), t0)
		if !errors.Is(err, pb) {
			t.Fatalf("RunDueItem with %+v = %v, want the error", pb, err)
		}
		if e := get(t, f.idx, "u1", "a"); e.ErrorStreak != 1 || !e.DueAt.Before(t0.Add(bridge.DefaultRetry.Base+time.Second)) {
			t.Fatalf("after %+v the entry is %+v, want a plain retry", pb, e)
		}
		if st, _ := f.idx.User(context.Background(), "u1", t0); !st.PausedUntil.IsZero() {
			t.Fatalf("%+v paused the tenant until %v", pb, st.PausedUntil)
		}
	}
}

// TestAFailingSourceIsNamedOnceAndItsRecoveryToo: a source whose failures reach
// AlarmAfterErrors gets one Warn line, "rota: source failing"; the failures after it add
// none, and its next success an Info line, "rota: source recovered".
func TestAFailingSourceIsNamedOnceAndItsRecoveryToo(t *testing.T) {
	f := newFixture()
	f.b.Retry = cadence.Backoff{Base: time.Minute, Max: time.Minute, Factor: 1}
	f.dueEntry(t, "a", "hot", 0)
	var logs strings.Builder
	wk, err := bridge.NewWorker(f.b, bridge.WorkerConfig{AlarmAfterErrors: 3, Logger: newTextLogger(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	run := func() {
		item := claim(t, f.idx, "u1", "a", now)
		wk.Do(context.Background(), item, now)
		now = get(t, f.idx, "u1", "a").DueAt
	}
	f.pipe.errs["a"] = errBoom
	for range 5 {
		run()
	}
	if n := strings.Count(logs.String(), `msg="rota: source failing" user_id=u1 work_key=a error_streak=3`); n != 1 {
		t.Fatalf("%d failing lines after five failures, want one at the third:\n%s", n, logs.String())
	}
	delete(f.pipe.errs, "a")
	run()
	if !strings.Contains(logs.String(), `level=INFO msg="rota: source recovered" user_id=u1 work_key=a error_streak=5`) {
		t.Fatalf("no recovery line:\n%s", logs.String())
	}
	if e := get(t, f.idx, "u1", "a"); e.ErrorStreak != 0 {
		t.Fatalf("ErrorStreak after a success = %d, want 0", e.ErrorStreak)
	}
}

// TestARunnerStartsNoItemOfAPausedTenant: in a Runner's cycle, the items of a tenant that
// pushed back that have not started are handed back, counted as released, and the
// cycle reports the pause.
func TestARunnerStartsNoItemOfAPausedTenant(t *testing.T) {
	pipe := bridge.PipelineFunc(func(_ context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
		if tc.UserID() == "ana" {
			return bridge.Result{}, &bridge.Pushback{After: time.Hour, Reason: "quota"}
		}
		return hit, nil
	})
	w := newWorld(t, worldConfig{pipe: pipe})
	for _, s := range []string{"a", "b", "c"} {
		w.add(t, "ana", tenancy.PlanFree, s, "hot", t0)
	}
	w.add(t, "bob", tenancy.PlanFree, "x", "hot", t0)
	rep, err := w.runner(t, bridge.RunnerConfig{Workers: 1}).Cycle(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(itemLines(rep), " ")
	if want := "free:ana/a=paused free:bob/x=hit free:ana/b=released free:ana/c=released"; got != want {
		t.Fatalf("cycle: %s, want %s", got, want)
	}
	if rep.Paused != 1 || rep.Released != 2 || rep.Hits != 1 || rep.Err() != nil {
		t.Fatalf("paused %d, released %d, hits %d, err %v; want 1, 2, 1 and no error", rep.Paused, rep.Released, rep.Hits, rep.Err())
	}
}

// TestAPausedTenantIsNoStarvation: cycles that dispatch nothing because the only due
// work is a paused tenant's never report the Runner starved.
func TestAPausedTenantIsNoStarvation(t *testing.T) {
	w := newWorld(t, worldConfig{pipe: newStub()})
	w.add(t, "ana", tenancy.PlanFree, "a", "hot", t0)
	if err := w.idx.Pause(context.Background(), mustTC(t, "ana"), t0.Add(time.Hour), "upstream-429"); err != nil {
		t.Fatal(err)
	}
	r := w.runner(t, bridge.RunnerConfig{})
	for i := range 6 {
		rep, err := r.Cycle(context.Background(), t0.Add(time.Duration(i)*time.Minute))
		if err != nil || rep.Dispatched != 0 || rep.Starved != nil {
			t.Fatalf("cycle %d: dispatched %d, starved %+v, err %v; want nothing dispatched and no starvation", i, rep.Dispatched, rep.Starved, err)
		}
	}
	if strings.Contains(w.logs.String(), "dispatching nothing") {
		t.Fatalf("a paused tenant raised the starvation warning:\n%s", w.logs.String())
	}
}
