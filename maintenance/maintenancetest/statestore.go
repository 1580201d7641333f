package maintenancetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rotaworks/rota/maintenance"
)

// storeRule is one rule of the StateStore suite; fresh builds a new, empty store.
type storeRule struct {
	name  string
	check func(t tb, fresh func() maintenance.StateStore)
}

// RunStateStore runs the StateStore conformance suite: one subtest per rule of
// maintenance.StateStore (StateStoreRules lists them). newStore must return a fresh,
// empty store.
func RunStateStore(t *testing.T, newStore func(t *testing.T) maintenance.StateStore) {
	t.Helper()
	for _, r := range storeRules() {
		t.Run(r.name, func(t *testing.T) {
			r.check(t, func() maintenance.StateStore {
				t.Helper()
				s := newStore(t)
				if s == nil {
					t.Fatalf("the factory returned a nil StateStore")
				}
				return s
			})
		})
	}
}

// StateStoreRules returns the names of the StateStore suite's rules, in the order
// RunStateStore runs them as subtests.
func StateStoreRules() []string {
	var names []string
	for _, r := range storeRules() {
		names = append(names, r.name)
	}
	return names
}

func storeRules() []storeRule {
	ctx := context.Background()
	load := func(t tb, s maintenance.StateStore) maintenance.Snapshot {
		t.Helper()
		snap, err := s.Load(ctx)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		return snap
	}
	save := func(t tb, s maintenance.StateStore, token uint64, states ...maintenance.TaskState) {
		t.Helper()
		if err := s.Save(ctx, token, states...); err != nil {
			t.Fatalf("Save(token %d, %d states): %v", token, len(states), err)
		}
	}
	var rules []storeRule
	named := func(name string) maintenance.TaskState {
		return maintenance.TaskState{Name: name, LastRunAt: base, LastOutcome: maintenance.OutcomeSucceeded}
	}

	rules = append(rules, storeRule{"a new store is empty with token 0", func(t tb, fresh func() maintenance.StateStore) {
		snap := load(t, fresh())
		if snap.Token != 0 || len(snap.States) != 0 {
			t.Fatalf("rule: a fresh store holds nothing: got token %d and %d states", snap.Token, len(snap.States))
		}
	}})

	rules = append(rules, storeRule{"save then load round-trips every field", func(t tb, fresh func() maintenance.StateStore) {
		s := fresh()
		full := maintenance.TaskState{
			Name: "summary", Class: maintenance.OffLease, Rank: maintenance.RankDataSafety,
			LastRunAt: base.Add(-time.Hour + 123456*time.Microsecond), LastOutcome: maintenance.OutcomeFailed,
			LastError: "boom: \"quoted\" ünïcode",
			Running:   true, RunningSince: base.Add(-time.Minute), RunningBy: "daemon-a", RunningToken: 1 << 40,
			DeferredSince: base.Add(-2 * time.Hour), DeferredAt: base.Add(-time.Second), Deferrals: 17,
			DeferReason: maintenance.ReasonGate, DeferBlocker: "memory-summary-backfill",
		}
		save(t, s, 7, full)
		snap := load(t, s)
		if snap.Token != 7 {
			t.Errorf("rule: Load reports the highest token saved: got %d, want 7", snap.Token)
		}
		if diff := cmp.Diff([]maintenance.TaskState{full}, snap.States); diff != "" {
			t.Fatalf("rule: every field round-trips (times compare with Equal) (-saved +loaded):\n%s", diff)
		}
	}})

	rules = append(rules, storeRule{"save replaces a state by name", func(t tb, fresh func() maintenance.StateStore) {
		s := fresh()
		save(t, s, 1, named("a"))
		b := named("a")
		b.LastOutcome, b.Deferrals = maintenance.OutcomeCancelled, 3
		save(t, s, 1, b)
		if diff := cmp.Diff([]maintenance.TaskState{b}, load(t, s).States); diff != "" {
			t.Fatalf("rule: Save replaces by Name (-want +got):\n%s", diff)
		}
	}})

	rules = append(rules, storeRule{"load orders states by name", func(t tb, fresh func() maintenance.StateStore) {
		s := fresh()
		save(t, s, 1, named("m"), named("b"))
		save(t, s, 1, named("z"), named("a"))
		var got []string
		for _, st := range load(t, s).States {
			got = append(got, st.Name)
		}
		if diff := cmp.Diff([]string{"a", "b", "m", "z"}, got); diff != "" {
			t.Fatalf("rule: Load returns states ordered by Name (-want +got):\n%s", diff)
		}
	}})

	rules = append(rules, storeRule{"a token older than the highest seen is refused with ErrStaleToken and writes nothing", func(t tb, fresh func() maintenance.StateStore) {
		s := fresh()
		save(t, s, 5, named("a"))
		stale := named("a")
		stale.LastError = "from a superseded holder"
		err := s.Save(ctx, 4, stale, named("b"))
		if !errors.Is(err, maintenance.ErrStaleToken) {
			t.Fatalf("rule: Save with token 4 after token 5 is ErrStaleToken: got %v", err)
		}
		snap := load(t, s)
		if diff := cmp.Diff([]maintenance.TaskState{named("a")}, snap.States); diff != "" || snap.Token != 5 {
			t.Fatalf("rule: a refused Save writes none of its states and keeps the fence (token %d, want 5) (-want +got):\n%s", snap.Token, diff)
		}
	}})

	rules = append(rules, storeRule{"an equal or higher token is accepted and raises the fence", func(t tb, fresh func() maintenance.StateStore) {
		s := fresh()
		save(t, s, 0, named("zero"))
		save(t, s, 3, named("a"))
		save(t, s, 3, named("b"))
		save(t, s, 9, named("c"))
		snap := load(t, s)
		if snap.Token != 9 || len(snap.States) != 4 {
			t.Fatalf("rule: equal and higher tokens are accepted and the fence is the highest: got token %d, %d states", snap.Token, len(snap.States))
		}
		if err := s.Save(ctx, 8, named("d")); !errors.Is(err, maintenance.ErrStaleToken) {
			t.Fatalf("rule: the fence rose to 9, so token 8 is ErrStaleToken: got %v", err)
		}
	}})

	rules = append(rules, storeRule{"a state without a name is ErrInvalid and the batch writes nothing", func(t tb, fresh func() maintenance.StateStore) {
		s := fresh()
		err := s.Save(ctx, 1, named("ok"), maintenance.TaskState{})
		if !errors.Is(err, maintenance.ErrInvalid) {
			t.Fatalf("rule: a state with an empty Name is ErrInvalid: got %v", err)
		}
		if snap := load(t, s); len(snap.States) != 0 {
			t.Fatalf("rule: a refused batch writes none of its states: got %+v", snap.States)
		}
	}})

	rules = append(rules, storeRule{"a name given twice in one save keeps the later state", func(t tb, fresh func() maintenance.StateStore) {
		s := fresh()
		later := named("a")
		later.Deferrals = 2
		save(t, s, 1, named("a"), later)
		if diff := cmp.Diff([]maintenance.TaskState{later}, load(t, s).States); diff != "" {
			t.Fatalf("rule: the later state wins (-want +got):\n%s", diff)
		}
	}})

	rules = append(rules, storeRule{"returned slices belong to the caller and saved ones are not kept", func(t tb, fresh func() maintenance.StateStore) {
		s := fresh()
		in := []maintenance.TaskState{named("a"), named("b")}
		save(t, s, 1, in...)
		in[0].LastError = "mutated after Save"
		out := load(t, s).States
		out[1].LastError = "mutated after Load"
		out = append(out[:0], named("x"))
		_ = out
		if diff := cmp.Diff([]maintenance.TaskState{named("a"), named("b")}, load(t, s).States); diff != "" {
			t.Fatalf("rule: the store keeps neither the caller's slice nor the one it returned (-want +got):\n%s", diff)
		}
	}})

	rules = append(rules, storeRule{"concurrent saves keep the highest token and its write", func(t tb, fresh func() maintenance.StateStore) {
		s := fresh()
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n+1)
		for tok := 1; tok <= n; tok++ {
			wg.Go(func() {
				st := named(fmt.Sprintf("t%d", tok))
				errs[tok] = s.Save(ctx, uint64(tok), st)
			})
		}
		wg.Wait()
		for tok, err := range errs[1:] {
			if err != nil && !errors.Is(err, maintenance.ErrStaleToken) {
				t.Fatalf("rule: a concurrent Save succeeds or is ErrStaleToken: token %d: %v", tok+1, err)
			}
		}
		if errs[n] != nil {
			t.Fatalf("rule: the highest token is never stale: %v", errs[n])
		}
		snap := load(t, s)
		if snap.Token != n {
			t.Fatalf("rule: the fence is the highest token saved: got %d, want %d", snap.Token, n)
		}
		saved := 0
		for tok := 1; tok <= n; tok++ {
			if errs[tok] == nil {
				saved++
			}
		}
		if len(snap.States) != saved {
			t.Fatalf("rule: exactly the accepted saves are stored: %d states, %d accepted", len(snap.States), saved)
		}
	}})
	return rules
}
