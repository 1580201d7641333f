package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// TestNewRunnerRefusesWhatCannotWork: an Interval or MinInterval below 10 ms,
// a MinInterval beyond Interval, and a claim margin that cannot cover the Dispatcher's
// MaxClockSkew plus FlushInterval are refused when they are given.
func TestNewRunnerRefusesWhatCannotWork(t *testing.T) {
	w := newWorld(t, worldConfig{pipe: newStub()})
	short := newWorld(t, worldConfig{pipe: newStub(), claimFor: 4 * time.Second}) // margin 1s
	for _, tc := range []struct {
		name, field string
		w           *world
		cfg         bridge.RunnerConfig
	}{
		{"1ns interval", "RunnerConfig.Interval must be at least 10ms, got 1ns", w, bridge.RunnerConfig{Interval: 1}},
		{"5ms interval", "RunnerConfig.Interval must be at least 10ms, got 5ms", w, bridge.RunnerConfig{Interval: 5 * time.Millisecond}},
		{"1ns min interval", "RunnerConfig.MinInterval must be at least 10ms, got 1ns", w, bridge.RunnerConfig{MinInterval: 1}},
		{"min interval beyond interval", "RunnerConfig.MinInterval must not exceed Interval 1s, got 2s", w,
			bridge.RunnerConfig{Interval: time.Second, MinInterval: 2 * time.Second}},
		{"a quarter of ClaimFor below skew and flush", "the margin min(ClaimMargin 5s, ClaimFor/4 1s) = 1s must cover the Dispatcher's MaxClockSkew 1s plus FlushInterval 100ms", short,
			bridge.RunnerConfig{}},
		{"a margin below skew and flush", "ClaimMargin", w, bridge.RunnerConfig{ClaimMargin: time.Second}},
		{"a flush beyond the margin", "FlushInterval 5s", w, bridge.RunnerConfig{FlushInterval: 5 * time.Second}},
	} {
		r, err := bridge.NewRunner(tc.w.b, tc.w.d, tc.cfg)
		if r != nil || !errors.Is(err, bridge.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: NewRunner = %v, %v; want ErrInvalidConfig saying %s", tc.name, r, err, tc.field)
		}
	}
	for _, cfg := range []bridge.RunnerConfig{
		{Interval: 10 * time.Millisecond},
		{Interval: 20 * time.Millisecond},
		{ClaimMargin: 1100 * time.Millisecond}, // exactly the skew and the flush
	} {
		if _, err := bridge.NewRunner(w.b, w.d, cfg); err != nil {
			t.Errorf("NewRunner(%+v) = %v, want it taken", cfg, err)
		}
	}
}

// cycleTimes records when each cycle of a Runner began, on the bubble's clock.
type cycleTimes struct {
	mu  sync.Mutex
	at  []time.Time
	hit []int
}

func (c *cycleTimes) ObserveCycle(rep bridge.CycleReport) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = append(c.at, rep.Now)
	c.hit = append(c.hit, rep.Hits)
}

// TestRunDrainsABacklogAtWorkerSpeed: with Interval an hour, a backlog of ten batches
// runs in back-to-back cycles MinInterval apart, not one batch an hour.
func TestRunDrainsABacklogAtWorkerSpeed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var ran atomic.Int64
		pipe := bridge.PipelineFunc(func(context.Context, tenancy.Context, tenancy.WatchlistEntry) (bridge.Result, error) {
			ran.Add(1)
			return hit, nil
		})
		w := newWorld(t, worldConfig{pipe: pipe, global: 10})
		for i := range 100 {
			w.add(t, fmt.Sprintf("u%02d", i%20), tenancy.PlanFree, fmt.Sprintf("s%d", i/20), "hot", start)
		}
		cycles := &cycleTimes{}
		r := w.runner(t, bridge.RunnerConfig{Interval: time.Hour, MinInterval: 50 * time.Millisecond, Observer: cycles})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if err := r.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if ran.Load() != 100 {
			t.Fatalf("%d of 100 ran", ran.Load())
		}
		cycles.mu.Lock()
		defer cycles.mu.Unlock()
		// Ten full cycles 50ms apart; the tenth leaves nothing waiting, so the next waits
		// for the hour's tick, which the ten minutes do not reach.
		if len(cycles.at) != 10 {
			t.Fatalf("%d cycles at %v, want 10", len(cycles.at), cycles.at)
		}
		for i, at := range cycles.at {
			if want := start.Add(time.Duration(i) * 50 * time.Millisecond); !at.Equal(want) {
				t.Errorf("cycle %d at +%v, want +%v", i, at.Sub(start), want.Sub(start))
			}
		}
	})
}

// passingIndex is an index that, while pass is set, passes over every ready user as
// PostgreSQL's Ready passes over a user whose row a concurrent write holds: Ready returns
// nobody, with Next saying a user is ready now.
type passingIndex struct {
	duework.Index
	pass atomic.Bool
}

func (x *passingIndex) Ready(ctx context.Context, q duework.ReadyQuery) (duework.ReadyPage, error) {
	if x.pass.Load() {
		return duework.ReadyPage{Next: q.Now}, nil
	}
	return x.Index.Ready(ctx, q)
}

// TestRunRetriesADispatchThatRacedItsOwnWrites: a cycle of a backlog that dispatches
// nothing because the index passed over the ready users while the previous cycle's items
// were still running or being written is followed by the next MinInterval later, not an
// Interval later; once no earlier cycle is unfinished, an empty dispatch waits for the
// tick again.
func TestRunRetriesADispatchThatRacedItsOwnWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		idx := &passingIndex{Index: newIndex()}
		var ran atomic.Int64
		pipe := bridge.PipelineFunc(func(context.Context, tenancy.Context, tenancy.WatchlistEntry) (bridge.Result, error) {
			if ran.Add(1) == 1 {
				idx.pass.Store(true) // the first item's writes hold the user's row for a while
				time.Sleep(100 * time.Millisecond)
				idx.pass.Store(false)
			}
			return hit, nil
		})
		w := newWorld(t, worldConfig{idx: idx, pipe: pipe, global: 1})
		start := time.Now()
		for i := range 3 {
			w.add(t, "u0", tenancy.PlanFree, fmt.Sprintf("s%d", i), "hot", start)
		}
		cycles := &cycleTimes{}
		r := w.runner(t, bridge.RunnerConfig{Interval: time.Hour, MinInterval: 10 * time.Millisecond, Observer: cycles})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := r.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if n := ran.Load(); n != 3 {
			t.Fatalf("%d of 3 entries ran within a minute of an hour's Interval", n)
		}

		// Passed over with no cycle in flight: one dispatch per tick, not one per MinInterval.
		idx.pass.Store(true)
		cycles = &cycleTimes{}
		r = w.runner(t, bridge.RunnerConfig{Interval: 10 * time.Second, MinInterval: 10 * time.Millisecond, Observer: cycles})
		ctx, cancel = context.WithTimeout(context.Background(), time.Minute+time.Second)
		defer cancel()
		if err := r.Run(ctx); err != nil {
			t.Fatal(err)
		}
		cycles.mu.Lock()
		defer cycles.mu.Unlock()
		if n := len(cycles.at); n != 7 {
			t.Fatalf("%d cycles in a minute of 10s ticks with every user passed over, want 7", n)
		}
	})
}

// writeHoldingIndex passes over, in Ready, the users of a CompleteMany in flight, as
// PostgreSQL's Ready passes over users whose rows a concurrent write holds; its first
// CompleteMany waits until release is closed.
type writeHoldingIndex struct {
	duework.Index
	release chan struct{}
	first   atomic.Bool
	mu      sync.Mutex
	held    map[string]int
	claims  atomic.Int64
}

func (x *writeHoldingIndex) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	x.claims.Add(1)
	return x.Index.Claim(ctx, keys, now, until)
}

func (x *writeHoldingIndex) CompleteMany(ctx context.Context, done []duework.Done) ([]error, error) {
	x.mu.Lock()
	for _, d := range done {
		x.held[d.Tenant.UserID()]++
	}
	x.mu.Unlock()
	defer func() {
		x.mu.Lock()
		for _, d := range done {
			x.held[d.Tenant.UserID()]--
		}
		x.mu.Unlock()
	}()
	if x.first.CompareAndSwap(false, true) {
		<-x.release
	}
	return x.Index.CompleteMany(ctx, done)
}

func (x *writeHoldingIndex) Ready(ctx context.Context, q duework.ReadyQuery) (duework.ReadyPage, error) {
	x.mu.Lock()
	held := 0
	for _, n := range x.held {
		held += n
	}
	x.mu.Unlock()
	want := q.Users
	q.Users += held // read past the held users, as a scan that skips locked rows does
	p, err := x.Index.Ready(ctx, q)
	if err != nil {
		return p, err
	}
	x.mu.Lock()
	var passed []string
	p.Heads = slices.DeleteFunc(p.Heads, func(h duework.Head) bool {
		if x.held[h.UserID] > 0 {
			passed = append(passed, h.UserID)
			return true
		}
		return false
	})
	x.mu.Unlock()
	if len(p.Heads) > want {
		for _, h := range p.Heads[want:] {
			passed = append(passed, h.UserID)
		}
		p.Heads = p.Heads[:want]
	}
	if len(passed) > 0 && q.Hold > 0 {
		err = x.Index.Release(ctx, passed, q.Now.Add(q.Hold)) // never held, as PostgreSQL skips a locked row
	}
	return p, err
}

// TestRunRetriesAfterItsWritesEnd: a cycle that dispatched some users while the Runner's
// own completions held others, which its index passed over, is followed by the next once
// those completions are written, not an Interval later.
func TestRunRetriesAfterItsWritesEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		idx := &writeHoldingIndex{Index: newIndex(), release: make(chan struct{}), held: map[string]int{}}
		w := newWorld(t, worldConfig{idx: idx, pipe: bridge.PipelineFunc(func(context.Context, tenancy.Context, tenancy.WatchlistEntry) (bridge.Result, error) {
			return hit, nil
		}), lanes: []dispatch.LaneCapacity{{Lane: "free", PerUserLimit: 1, PerCycleLimit: 2}}})
		start := time.Now()
		for i := range 6 {
			w.add(t, fmt.Sprintf("u%d", i%3), tenancy.PlanFree, fmt.Sprintf("s%d", i), "hot", start)
		}
		cycles := &cycleTimes{}
		r := w.runner(t, bridge.RunnerConfig{Interval: time.Hour, MinInterval: 10 * time.Millisecond, Observer: cycles})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		go func() {
			// The first cycle serves u0 and u1 and sheds u2; while its completions are
			// held, the second serves u2 alone. Then they are written.
			time.Sleep(time.Second)
			close(idx.release)
		}()
		if err := r.Run(ctx); err != nil {
			t.Fatal(err)
		}
		cycles.mu.Lock()
		defer cycles.mu.Unlock()
		ran := 0
		for i, n := range cycles.hit {
			ran += n
			if n > 0 && cycles.at[i].Sub(start) > 2*time.Second {
				t.Errorf("cycle %d ran %d items at +%v; want every cycle with work within a second of the writes", i, n, cycles.at[i].Sub(start))
			}
		}
		if ran != 6 {
			t.Errorf("%d of 6 items ran within a minute of an hour's Interval; cycles at %v ran %v", ran, cycles.at, cycles.hit)
		}
	})
}

// TestWakeStartsACycleEarly: after Wake, Run starts its next cycle MinInterval after the
// last one began, without waiting for Interval.
func TestWakeStartsACycleEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		pipe := newStub()
		w := newWorld(t, worldConfig{pipe: pipe})
		cycles := &cycleTimes{}
		r := w.runner(t, bridge.RunnerConfig{Interval: time.Hour, Observer: cycles})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		r.Wake()
		r.Wake() // wakes before a cycle's dispatch count as one: Run's first cycle
		go func() { done <- r.Run(ctx) }()
		time.Sleep(time.Minute)
		synctest.Wait()
		w.add(t, "u1", tenancy.PlanFree, "now", "hot", time.Now()) // the host schedules "run now"
		r.Wake()
		synctest.Wait()
		if n := pipe.ncalls(); n != 1 {
			t.Fatalf("%d runs after Wake, want the new entry's", n)
		}
		time.Sleep(time.Minute)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		cycles.mu.Lock()
		defer cycles.mu.Unlock()
		if len(cycles.at) != 2 || !cycles.at[1].Equal(start.Add(time.Minute)) {
			t.Fatalf("cycles at %v, want one at the start and one at the Wake, a minute later", cycles.at)
		}
	})
}

// BenchmarkRunnerDrain: 10,000 entries due at once, an Interval of an hour, a
// GlobalBatchLimit of 100 and a pipeline that does nothing. drain-s is the seconds from
// Run's start until every entry has run: the backlog drains at the workers' speed,
// far within one Interval.
func BenchmarkRunnerDrain(b *testing.B) {
	b.ReportAllocs()
	var total time.Duration
	for range b.N {
		b.StopTimer()
		var ran atomic.Int64
		all := make(chan struct{})
		pipe := bridge.PipelineFunc(func(context.Context, tenancy.Context, tenancy.WatchlistEntry) (bridge.Result, error) {
			if ran.Add(1) == 10000 {
				close(all)
			}
			return bridge.Result{}, nil
		})
		idx := duework.NewMemory()
		w := newWorld(b, worldConfig{idx: idx, pipe: pipe, global: 100, lanes: []dispatch.LaneCapacity{
			{Lane: "free", PerUserLimit: 10, PerCycleLimit: 100},
		}})
		now := time.Now()
		for u := range 1000 {
			tc := mustTC(b, fmt.Sprintf("user%04d", u))
			es := make([]duework.Entry, 10)
			for s := range es {
				es[s] = duework.Entry{UserID: tc.UserID(), WorkKey: fmt.Sprintf("s%d", s), Tier: "hot", DueAt: now}
				if err := w.wl.Add(context.Background(), tc, tenancy.WatchlistEntry{UserID: tc.UserID(), Slug: es[s].WorkKey, Tier: "hot"}); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := idx.ScheduleMissing(context.Background(), tc, es); err != nil {
				b.Fatal(err)
			}
		}
		r := w.runner(b, bridge.RunnerConfig{Interval: time.Hour, Logger: slog.New(slog.DiscardHandler)})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		b.StartTimer()
		began := time.Now()
		go func() { done <- r.Run(ctx) }()
		<-all
		total += time.Since(began)
		b.StopTimer()
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "drain-s")
}

// TestRunnerReportsLatenessFromTheDispatcher: with the Dispatcher's own lane reports, the
// cycle's line carries the lane's lateness and the late tenant is named once.
func TestRunnerReportsLatenessFromTheDispatcher(t *testing.T) {
	w := newWorld(t, worldConfig{pipe: newStub(), global: 1, lanes: []dispatch.LaneCapacity{{Lane: "free", PerUserLimit: 1, PerCycleLimit: 1}}})
	w.add(t, "slow", tenancy.PlanFree, "a", "hot", t0.Add(-30*time.Minute))
	w.add(t, "slow", tenancy.PlanFree, "b", "hot", t0.Add(-20*time.Minute))
	r := w.runner(t, bridge.RunnerConfig{AlarmAfter: 10 * time.Minute})
	rep, err := r.Cycle(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.LateAlarms) != 1 || rep.LateAlarms[0].UserID != "slow" || rep.LateAlarms[0].Late != 30*time.Minute {
		t.Errorf("late alarms %+v, want slow, 30m late", rep.LateAlarms)
	}
	logs := w.logs.String()
	for _, s := range []string{"lateness.free=30m0s", `level=WARN msg="rota: work late" lane=free alarm_after=10m0s tenants=[slow:30m0s]`} {
		if !strings.Contains(logs, s) {
			t.Errorf("logs lack %s:\n%s", s, logs)
		}
	}
	if rep, _ := r.Cycle(context.Background(), t0.Add(time.Second)); len(rep.LateAlarms) != 0 {
		t.Errorf("the episode raised again: %+v", rep.LateAlarms)
	}
}
