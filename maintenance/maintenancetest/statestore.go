package maintenancetest

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/maintenance"
)

var storeRules = append([]rule{
	{"Empty", "a new store holds no state and its fence is 0", storeEmpty},
	{"RoundTrip", "Save then Load round-trips every field, at the edges of the time, name and token ranges too", roundTrip},
	{"Replace", "Save replaces a state by Name", replace},
	{"Order", "Load returns the states ordered by Name", order},
	{"StaleToken", "a Save whose token is below the fence is ErrStaleToken and writes nothing", staleToken},
	{"FenceRises", "a Save with an equal or higher token is accepted and raises the fence to it", fenceRises},
	{"FenceFollowsLease", "once the lease grants a token, a Save below it is ErrStaleToken and Load reports it as the fence, before any Save carries it", fenceFollowsLease},
	{"InvalidState", "a Save with a state TaskState.Validate refuses is ErrInvalid and writes none of its states", invalidState},
	{"TokenRange", "a Save whose token is above math.MaxInt64 is ErrInvalid and writes nothing", tokenRange},
	{"DuplicateName", "a Save that names one task twice keeps the later state", duplicateName},
	{"Ownership", "the store keeps neither the slice it was given nor the one it returned", ownership},
	{"ConcurrentSaves", "concurrent Saves keep the highest token as the fence and exactly the accepted states", concurrentSaves},
}, updateRules...)

func (s *suite) load(st maintenance.StateStore) maintenance.Snapshot {
	s.t.Helper()
	snap, err := st.Load(bg)
	if err != nil {
		s.fatalf("Load: %v", err)
	}
	return snap
}

func (s *suite) save(st maintenance.StateStore, token uint64, states ...maintenance.TaskState) {
	s.t.Helper()
	if err := st.Save(bg, token, states...); err != nil {
		s.fatalf("Save(token %d, %d states): %v", token, len(states), err)
	}
}

// wantStates fails unless st holds exactly want, and its fence is token.
func (s *suite) wantStates(st maintenance.StateStore, token uint64, want ...maintenance.TaskState) {
	s.t.Helper()
	snap := s.load(st)
	if diff := cmp.Diff(want, snap.States, cmpopts.EquateEmpty()); diff != "" || snap.Token != token {
		s.fatalf("Load = fence %d and states (-want +got):\n%s\nwant fence %d", snap.Token, diff, token)
	}
}

func named(name string) maintenance.TaskState {
	return maintenance.TaskState{Name: name, LastRunAt: base, LastOutcome: maintenance.OutcomeSucceeded}
}

func storeEmpty(s *suite) {
	st, _ := s.freshPair()
	s.wantStates(st, 0)
}

func roundTrip(s *suite) {
	st, _ := s.freshPair()
	full := maintenance.TaskState{
		Name: "rollup", Class: maintenance.OffLease, Rank: maintenance.RankDataSafety,
		LastRunAt: base.Add(-time.Hour + 123456*time.Microsecond), LastOutcome: maintenance.OutcomeFailed,
		LastError: "boom: \"quoted\" ünïcode\nsecond line\ttab",
		Running:   true, RunningSince: base.Add(-time.Minute), RunningBy: "daemon-a", RunningToken: 1 << 40, RunningUntil: base.Add(time.Minute),
		DeferredSince: base.Add(-2 * time.Hour), DeferredAt: base.Add(-time.Second), Deferrals: 17,
		DeferReason: maintenance.ReasonGate, DeferBlocker: "compact",
	}
	edges := maintenance.TaskState{
		Name: strings.Repeat("é", vocab.MaxNameLength/2), Class: maintenance.Heavy, Rank: maintenance.RankBootstrap,
		LastRunAt: lastMicro, LastOutcome: maintenance.OutcomeCancelled, Running: true, RunningSince: firstMicro,
		RunningBy: strings.Repeat("h", vocab.MaxNameLength), RunningToken: math.MaxInt64, RunningUntil: lastMicro,
		DeferredSince: firstMicro, DeferredAt: lastMicro, Deferrals: math.MaxInt32,
	}
	s.save(st, 7, full, edges)
	s.wantStates(st, 7, full, edges)
}

func replace(s *suite) {
	st, _ := s.freshPair()
	s.save(st, 1, named("a"))
	b := named("a")
	b.LastOutcome, b.Deferrals = maintenance.OutcomeCancelled, 3
	s.save(st, 1, b)
	s.wantStates(st, 1, b)
}

func order(s *suite) {
	st, _ := s.freshPair()
	s.save(st, 1, named("m"), named("b"), named("B"))
	s.save(st, 1, named("z"), named("a"))
	s.wantStates(st, 1, named("B"), named("a"), named("b"), named("m"), named("z"))
}

func staleToken(s *suite) {
	st, _ := s.freshPair()
	s.save(st, 5, named("a"))
	stale := named("a")
	stale.LastError = "from a replaced holder"
	if err := st.Save(bg, 4, stale, named("b")); !errors.Is(err, maintenance.ErrStaleToken) {
		s.fatalf("Save with token 4 after token 5 = %v, want ErrStaleToken", err)
	}
	s.wantStates(st, 5, named("a"))
}

func fenceRises(s *suite) {
	st, _ := s.freshPair()
	s.save(st, 0, named("zero"))
	s.save(st, 3, named("a"))
	s.save(st, 3, named("b"))
	s.save(st, 9, named("c"))
	s.wantStates(st, 9, named("a"), named("b"), named("c"), named("zero"))
	if err := st.Save(bg, 8, named("d")); !errors.Is(err, maintenance.ErrStaleToken) {
		s.fatalf("the fence rose to 9, so token 8 is ErrStaleToken: got %v", err)
	}
}

func fenceFollowsLease(s *suite) {
	st, l := s.freshPair()
	s.save(st, 0, named("a"))
	g, err := l.Acquire(bg, "b", leaseTTL, base)
	if err != nil {
		s.fatalf("Acquire: %v", err)
	}
	stale := named("a")
	stale.LastError = "written after a newer grant"
	if err := st.Save(bg, g.Token-1, stale); !errors.Is(err, maintenance.ErrStaleToken) {
		s.fatalf("Save with token %d once the lease granted %d = %v, want ErrStaleToken", g.Token-1, g.Token, err)
	}
	s.wantStates(st, g.Token, named("a"))
	if err := l.Release(bg, g); err != nil {
		s.fatalf("Release: %v", err)
	}
	if err := st.Save(bg, g.Token-1, stale); !errors.Is(err, maintenance.ErrStaleToken) {
		s.fatalf("a released grant's token still fences: Save with token %d = %v, want ErrStaleToken", g.Token-1, err)
	}
	s.save(st, g.Token, stale)
	s.wantStates(st, g.Token, stale)
}

// invalidStates are states every store refuses, each beside a valid one in its Save.
func invalidStates() map[string]maintenance.TaskState {
	with := func(f func(*maintenance.TaskState)) maintenance.TaskState {
		st := named("bad")
		f(&st)
		return st
	}
	out := map[string]maintenance.TaskState{
		"no name":                            with(func(st *maintenance.TaskState) { st.Name = "" }),
		"Class 1<<40":                        with(func(st *maintenance.TaskState) { st.Class = 1 << 40 }),
		"Class 2":                            with(func(st *maintenance.TaskState) { st.Class = 2 }),
		"Rank 3":                             with(func(st *maintenance.TaskState) { st.Rank = 3 }),
		"an unknown outcome":                 with(func(st *maintenance.TaskState) { st.LastOutcome = "exploded" }),
		"negative Deferrals":                 with(func(st *maintenance.TaskState) { st.Deferrals = -1 }),
		"RunningToken above int64":           with(func(st *maintenance.TaskState) { st.RunningToken = math.MaxInt64 + 1 }),
		"NUL in LastError":                   with(func(st *maintenance.TaskState) { st.LastError = "a\x00b" }),
		"invalid UTF-8 LastError":            with(func(st *maintenance.TaskState) { st.LastError = "a\xffb" }),
		"a control character in DeferReason": with(func(st *maintenance.TaskState) { st.DeferReason = "gate\n" }),
		"a RunningBy name with NUL":          with(func(st *maintenance.TaskState) { st.RunningBy = "d\x00" }),
		"an overlong DeferBlocker":           with(func(st *maintenance.TaskState) { st.DeferBlocker = strings.Repeat("b", vocab.MaxNameLength+1) }),
	}
	for what, name := range badNames {
		out["a name "+what] = with(func(st *maintenance.TaskState) { st.Name = name })
	}
	for what, at := range badTimes {
		out["LastRunAt "+what] = with(func(st *maintenance.TaskState) { st.LastRunAt = at })
		out["DeferredAt "+what] = with(func(st *maintenance.TaskState) { st.DeferredAt = at })
	}
	out["RunningSince past 9999"] = with(func(st *maintenance.TaskState) { st.RunningSince = lastMicro.Add(time.Microsecond) })
	out["RunningUntil past 9999"] = with(func(st *maintenance.TaskState) { st.RunningUntil = lastMicro.Add(time.Microsecond) })
	out["DeferredSince in year 0"] = with(func(st *maintenance.TaskState) { st.DeferredSince = firstMicro.Add(-time.Hour) })
	return out
}

func invalidState(s *suite) {
	st, _ := s.freshPair()
	for what, bad := range invalidStates() {
		if err := st.Save(bg, 1, named("ok"), bad); !errors.Is(err, maintenance.ErrInvalid) {
			s.errorf("Save of a state with %s = %v, want ErrInvalid", what, err)
		}
	}
	s.wantStates(st, 0)
}

func tokenRange(s *suite) {
	st, _ := s.freshPair()
	for _, tok := range []uint64{math.MaxInt64 + 1, math.MaxUint64} {
		if err := st.Save(bg, tok, named("a")); !errors.Is(err, maintenance.ErrInvalid) {
			s.errorf("Save with token %d = %v, want ErrInvalid", tok, err)
		}
	}
	s.wantStates(st, 0)
	s.save(st, math.MaxInt64, named("a"))
	s.wantStates(st, math.MaxInt64, named("a"))
}

func duplicateName(s *suite) {
	st, _ := s.freshPair()
	later := named("a")
	later.Deferrals = 2
	s.save(st, 1, named("a"), later)
	s.wantStates(st, 1, later)
}

func ownership(s *suite) {
	st, _ := s.freshPair()
	in := []maintenance.TaskState{named("a"), named("b")}
	s.save(st, 1, in...)
	in[0].LastError = "changed after Save"
	out := s.load(st).States
	out[1].LastError = "changed after Load"
	s.wantStates(st, 1, named("a"), named("b"))
}

func concurrentSaves(s *suite) {
	st, _ := s.freshPair()
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n+1)
	for tok := 1; tok <= n; tok++ {
		wg.Go(func() { errs[tok] = st.Save(bg, uint64(tok), named(fmt.Sprintf("t%d", tok))) })
	}
	wg.Wait()
	var want []maintenance.TaskState
	for tok := 1; tok <= n; tok++ {
		switch err := errs[tok]; {
		case err == nil:
			want = append(want, named(fmt.Sprintf("t%d", tok)))
		case !errors.Is(err, maintenance.ErrStaleToken):
			s.fatalf("a concurrent Save with token %d = %v, want nil or ErrStaleToken", tok, err)
		}
	}
	if errs[n] != nil {
		s.fatalf("the highest token is never stale: %v", errs[n])
	}
	s.wantStates(st, n, want...)
}
