package maintenancetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rotaworks/rota/maintenance"
)

// The rules of StateStore.Update, and the rules the Scheduler needs of a store shared by
// a fleet: a task claimed once whoever races for it, a claim refused after a stale read,
// a deferral recorded by a scheduler that does not hold the lease.
var updateRules = []rule{
	{"UpdateReads", "Update passes the fence and the states of its names, in their order, a task without state as its zero state with the name", updateReads},
	{"UpdateWrites", "Update writes what its UpdateFunc returns, a name written twice keeping the later state, and leaves every other state as it was", updateWrites},
	{"UpdateRaisesFence", "Update raises the fence to the token its UpdateFunc returns when that is higher, and only then", updateRaisesFence},
	{"UpdateFenceFollowsLease", "the fence Update passes counts the lease's latest grant, before any write carries it", updateFenceFollowsLease},
	{"UpdateError", "an UpdateFunc's error is Update's (errors.Is) and nothing is written", updateError},
	{"UpdateInvalid", "Update with bad or repeated names is ErrInvalid without calling its UpdateFunc; writes of an invalid state, of a name not given, or a token above math.MaxInt64 are ErrInvalid and write nothing", updateInvalid},
	{"UpdateOwnership", "the store keeps neither the states it passes an UpdateFunc nor the slice it returns", updateOwnership},
	{"UpdateAtomic", "concurrent Updates of one task lose no write: each reads what the one before it wrote", updateAtomic},
	{"OneClaimWins", "of many concurrent compare-and-set claims of one task, exactly one wins", oneClaimWins},
	{"OneRunAcrossSchedulers", "schedulers sharing the store and the lease that poll at one instant start each task once", oneRunAcrossSchedulers},
	{"ClaimAfterStaleRead", "a scheduler whose read predates another's poll starts neither the task the other started nor one that depends on it, and records its deferrals without error", claimAfterStaleRead},
}

func (s *suite) update(st maintenance.StateStore, names []string, f maintenance.UpdateFunc) {
	s.t.Helper()
	if err := st.Update(bg, names, f); err != nil {
		s.fatalf("Update(%q): %v", names, err)
	}
}

// writing returns an UpdateFunc that writes states and raises the fence to raise.
func writing(raise uint64, states ...maintenance.TaskState) maintenance.UpdateFunc {
	return func(uint64, []maintenance.TaskState) ([]maintenance.TaskState, uint64, error) {
		return slices.Clone(states), raise, nil
	}
}

func updateReads(s *suite) {
	st, _ := s.freshPair()
	a, b := named("a"), named("b")
	b.Deferrals = 3
	s.save(st, 4, a, b)
	var gotFence uint64
	var got []maintenance.TaskState
	s.update(st, []string{"b", "x", "a"}, func(fence uint64, states []maintenance.TaskState) ([]maintenance.TaskState, uint64, error) {
		gotFence, got = fence, slices.Clone(states)
		return nil, 0, nil
	})
	want := []maintenance.TaskState{b, {Name: "x"}, a}
	if diff := cmp.Diff(want, got); diff != "" || gotFence != 4 {
		s.errorf("Update(b, x, a) passed fence %d (want 4) and states (-want +got):\n%s", gotFence, diff)
	}
	s.update(st, nil, func(fence uint64, states []maintenance.TaskState) ([]maintenance.TaskState, uint64, error) {
		if len(states) != 0 || fence != 4 {
			s.errorf("Update without names passed fence %d and %d states, want 4 and none", fence, len(states))
		}
		return nil, 0, nil
	})
	s.wantStates(st, 4, a, b)
}

func updateWrites(s *suite) {
	st, _ := s.freshPair()
	s.save(st, 2, named("a"), named("b"), named("c"))
	a, later := named("a"), named("a")
	a.LastError, later.Deferrals = "first", 9
	d := named("d")
	d.Running, d.RunningBy, d.RunningSince, d.RunningUntil = true, "daemon-a", base, base.Add(time.Minute)
	s.update(st, []string{"a", "b", "d"}, writing(0, a, d, later))
	s.wantStates(st, 2, later, named("b"), named("c"), d)
}

func updateRaisesFence(s *suite) {
	st, _ := s.freshPair()
	s.save(st, 5, named("a"))
	s.update(st, []string{"a"}, writing(3, named("a")))
	s.wantStates(st, 5, named("a"))
	s.update(st, []string{"a"}, writing(0, named("a")))
	s.wantStates(st, 5, named("a"))
	s.update(st, []string{"b"}, writing(8, named("b")))
	s.wantStates(st, 8, named("a"), named("b"))
	if err := st.Save(bg, 7, named("c")); !errors.Is(err, maintenance.ErrStaleToken) {
		s.fatalf("the fence rose to 8, so a Save with token 7 is ErrStaleToken: got %v", err)
	}
	s.update(st, []string{"c"}, writing(math.MaxInt64, named("c")))
	s.wantStates(st, math.MaxInt64, named("a"), named("b"), named("c"))
}

func updateFenceFollowsLease(s *suite) {
	st, l := s.freshPair()
	s.save(st, 0, named("a"))
	g := s.acquire(l, "b", base)
	s.update(st, []string{"a"}, func(fence uint64, _ []maintenance.TaskState) ([]maintenance.TaskState, uint64, error) {
		if fence != g.Token {
			s.errorf("once the lease granted token %d, Update passed fence %d", g.Token, fence)
		}
		return nil, 0, nil
	})
}

var errRefused = errors.New("maintenancetest: the UpdateFunc refuses")

func updateError(s *suite) {
	st, _ := s.freshPair()
	s.save(st, 1, named("a"))
	changed := named("a")
	changed.LastError = "written by a failed Update"
	err := st.Update(bg, []string{"a", "b"}, func(uint64, []maintenance.TaskState) ([]maintenance.TaskState, uint64, error) {
		return []maintenance.TaskState{changed, named("b")}, 9, errRefused
	})
	if !errors.Is(err, errRefused) {
		s.fatalf("Update whose UpdateFunc failed = %v, want its error", err)
	}
	s.wantStates(st, 1, named("a"))
}

func updateInvalid(s *suite) {
	st, _ := s.freshPair()
	s.save(st, 1, named("ok"))
	called := false
	never := func(uint64, []maintenance.TaskState) ([]maintenance.TaskState, uint64, error) {
		called = true
		return nil, 0, nil
	}
	badNameLists := map[string][]string{"a repeated name": {"ok", "b", "ok"}}
	for what, name := range badNames {
		badNameLists["a name "+what] = []string{"ok", name}
	}
	for what, names := range badNameLists {
		if err := st.Update(bg, names, never); !errors.Is(err, maintenance.ErrInvalid) || called {
			s.errorf("Update with %s = %v (UpdateFunc called: %v), want ErrInvalid without a call", what, err, called)
		}
		called = false
	}
	bad := map[string]maintenance.UpdateFunc{
		"a write of a name not given": writing(0, named("ok"), named("elsewhere")),
		"a raise above math.MaxInt64": writing(math.MaxInt64+1, named("ok")),
	}
	for what, state := range invalidStates() {
		if state.Name == "bad" {
			bad["a write with "+what] = writing(0, named("ok"), state)
		}
	}
	for what, f := range bad {
		if err := st.Update(bg, []string{"ok", "bad"}, f); !errors.Is(err, maintenance.ErrInvalid) {
			s.errorf("Update with %s = %v, want ErrInvalid", what, err)
		}
	}
	s.wantStates(st, 1, named("ok"))
}

func updateOwnership(s *suite) {
	st, _ := s.freshPair()
	s.save(st, 1, named("a"))
	var passed, returned []maintenance.TaskState
	s.update(st, []string{"a", "b"}, func(_ uint64, states []maintenance.TaskState) ([]maintenance.TaskState, uint64, error) {
		passed, returned = states, []maintenance.TaskState{named("b")}
		return returned, 0, nil
	})
	passed[0].LastError, returned[0].LastError = "changed after Update", "changed after Update"
	s.wantStates(st, 1, named("a"), named("b"))
}

// increment returns an UpdateFunc that counts one more deferral of task "counter".
func increment(fence uint64, states []maintenance.TaskState) ([]maintenance.TaskState, uint64, error) {
	st := states[0]
	st.Deferrals++
	return []maintenance.TaskState{st}, 0, nil
}

func updateAtomic(s *suite) {
	st, _ := s.freshPair()
	const goroutines, each = 8, 5
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for range goroutines {
		wg.Go(func() {
			for range each {
				if err := st.Update(bg, []string{"counter"}, increment); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		s.fatalf("a concurrent Update failed: %v", err)
	}
	if got := s.load(st).States; len(got) != 1 || got[0].Deferrals != goroutines*each {
		s.fatalf("%d concurrent increments left %+v, want Deferrals %d", goroutines*each, got, goroutines*each)
	}
}

func oneClaimWins(s *suite) {
	st, _ := s.freshPair()
	const n = 12
	won := make([]bool, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			holder := fmt.Sprintf("daemon-%d", i)
			errs[i] = st.Update(bg, []string{"reindex"}, func(_ uint64, states []maintenance.TaskState) ([]maintenance.TaskState, uint64, error) {
				won[i] = false
				cur := states[0]
				if cur.Running {
					return nil, 0, nil
				}
				cur.Running, cur.RunningBy, cur.RunningSince, cur.RunningUntil = true, holder, base, base.Add(leaseTTL)
				won[i] = true
				return []maintenance.TaskState{cur}, 0, nil
			})
		})
	}
	wg.Wait()
	var winners []string
	for i := range n {
		if errs[i] != nil {
			s.fatalf("a concurrent claim failed: %v", errs[i])
		}
		if won[i] {
			winners = append(winners, fmt.Sprintf("daemon-%d", i))
		}
	}
	got := s.load(st).States
	if len(winners) != 1 || len(got) != 1 || got[0].RunningBy != winners[0] {
		s.fatalf("of %d concurrent claims %v won, and the store holds %+v; want exactly one, its own", n, winners, got)
	}
}

// fleet returns n schedulers over st and l, each with its own holder, over tasks; due,
// when not nil, decides for scheduler i whether a task is due (nil: its cadence).
func (s *suite) fleet(st maintenance.StateStore, l maintenance.Lease, n int, due func(i int, task string) bool) []*maintenance.Scheduler {
	s.t.Helper()
	noop := func(context.Context) error { return nil }
	var out []*maintenance.Scheduler
	for i := range n {
		tasks := []maintenance.Task{
			{Name: "vacuum", Class: maintenance.Heavy, Cadence: time.Hour, Run: noop},
			{Name: "reindex", Class: maintenance.Heavy, Cadence: time.Hour, Run: noop},
			{Name: "stats", Class: maintenance.OffLease, Cadence: time.Hour, Run: noop},
			{Name: "prune", Class: maintenance.OffLease, Cadence: time.Hour, DependsOn: []string{"stats"}, Run: noop},
		}
		if due != nil {
			for j := range tasks {
				name := tasks[j].Name
				tasks[j].Due = func(context.Context, time.Time, maintenance.TaskState) (bool, error) { return due(i, name), nil }
			}
		}
		sched, err := maintenance.NewScheduler(tasks, maintenance.Config{
			Lease: l, StateStore: st, Holder: fmt.Sprintf("daemon-%d", i), LeaseTTL: leaseTTL, MaxHold: leaseMaxHold,
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			s.fatalf("NewScheduler: %v", err)
		}
		out = append(out, sched)
	}
	return out
}

func oneRunAcrossSchedulers(s *suite) {
	st, l := s.freshPair()
	fleet := s.fleet(st, l, 8, func(_ int, task string) bool { return task == "vacuum" || task == "stats" })
	results := make([]maintenance.PollResult, len(fleet))
	errs := make([]error, len(fleet))
	var wg sync.WaitGroup
	for i, sched := range fleet {
		wg.Go(func() { results[i], errs[i] = sched.Poll(bg, base) })
	}
	wg.Wait()
	started := map[string][]string{}
	for i, res := range results {
		if errs[i] != nil {
			s.errorf("daemon-%d's poll failed: %v", i, errs[i])
		}
		for _, c := range res.Dispatched() {
			started[c.Task.Name] = append(started[c.Task.Name], fmt.Sprintf("daemon-%d", i))
		}
	}
	if len(started["vacuum"]) != 1 || len(started["stats"]) != 1 || len(started) != 2 {
		s.fatalf("8 schedulers polling at one instant started %v; want vacuum and stats once each", started)
	}
	for _, got := range s.load(st).States {
		if want := started[got.Name]; len(want) == 1 && (!got.Running || got.RunningBy != want[0]) {
			s.errorf("%s was started by %s, but the store holds %+v", got.Name, want[0], got)
		}
	}
}

// staleLease is a Lease whose next Current, once armed, runs hook before it returns: the
// hook's writes come after the read of a poll (its Load and its Current) and before the
// poll's own writes.
type staleLease struct {
	maintenance.Lease
	mu   sync.Mutex
	hook func()
}

func (l *staleLease) Current(ctx context.Context, now time.Time) (maintenance.Grant, bool, error) {
	g, ok, err := l.Lease.Current(ctx, now)
	l.mu.Lock()
	hook := l.hook
	l.hook = nil
	l.mu.Unlock()
	if hook != nil {
		hook()
	}
	return g, ok, err
}

func claimAfterStaleRead(s *suite) {
	st, l := s.freshPair()
	// daemon-0 finds vacuum and stats due; daemon-1 finds vacuum, reindex and prune due,
	// prune depending on stats.
	due := func(i int, task string) bool {
		return task == "vacuum" || slices.Contains(map[int][]string{0: {"stats"}, 1: {"reindex", "prune"}}[i], task)
	}
	stale := &staleLease{Lease: l}
	a := s.fleet(st, l, 1, due)[0]
	b := s.fleet(st, stale, 2, due)[1]
	var ra maintenance.PollResult
	var aerr error
	stale.hook = func() { ra, aerr = a.Poll(bg, base) }
	rb, berr := b.Poll(bg, base.Add(time.Second))
	if aerr != nil || len(ra.Dispatched()) != 2 {
		s.fatalf("daemon-0's poll started %v (err %v); want vacuum and stats", ra.Dispatched(), aerr)
	}
	if berr != nil {
		s.errorf("daemon-1's poll, whose read predates daemon-0's poll, failed: %v", berr)
	}
	if d := rb.Dispatched(); len(d) != 0 {
		s.errorf("daemon-1 read before daemon-0 started vacuum and stats, then started %s", d[0].Task.Name)
	}
	states := map[string]maintenance.TaskState{}
	for _, got := range s.load(st).States {
		states[got.Name] = got
	}
	if r := states["reindex"]; r.DeferReason != maintenance.ReasonOutranked || r.DeferBlocker != "vacuum" || r.Deferrals != 1 {
		s.errorf("daemon-1, which does not hold the lease, records its deferral of reindex: %+v", r)
	}
	if v := states["vacuum"]; !v.Running || v.RunningBy != "daemon-0" || !v.DeferredSince.IsZero() {
		s.errorf("vacuum runs on daemon-0, and daemon-1's deferral of it is not written over the run: %+v", v)
	}
	if p := states["prune"]; p.Running {
		s.errorf("prune, which depends on stats, runs beside it: %+v", p)
	}
	if st := states["stats"]; !st.Running || st.RunningBy != "daemon-0" {
		s.errorf("stats runs on daemon-0: %+v", st)
	}
}
