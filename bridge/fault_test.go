package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// injectedError is the failure faultyIndex injects; each names its call.
type injectedError struct {
	call   int
	method string
}

func (e *injectedError) Error() string {
	return fmt.Sprintf("injected failure of index call %d (%s)", e.call, e.method)
}

// faultyIndex fails the call at names (see fault), whichever of the Index's methods it
// is. With at.after set, a write is made first and only its answer is lost (a write that
// happened although the caller hears it failed).
type faultyIndex struct {
	duework.Index
	mu          sync.Mutex
	at          fault
	calls       int
	methodCalls int // calls of at.method
	injected    *injectedError
}

var _ duework.Index = (*faultyIndex)(nil)

func (f *faultyIndex) fault(method string) (*injectedError, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	n := f.calls
	if f.at.method != "" {
		if method != f.at.method {
			return nil, false
		}
		f.methodCalls++
		n = f.methodCalls
	}
	if n != f.at.n {
		return nil, false
	}
	f.injected = &injectedError{call: f.calls, method: method}
	return f.injected, true
}

// read fails a read before it is made.
func (f *faultyIndex) read(method string, call func() error) error {
	if ie, fail := f.fault(method); fail {
		return ie
	}
	return call()
}

// write fails a write before it is made, or after it when f.at.after is set.
func (f *faultyIndex) write(method string, call func() error) error {
	ie, fail := f.fault(method)
	if fail && !f.at.after {
		return ie
	}
	err := call()
	if fail {
		return ie
	}
	return err
}

func (f *faultyIndex) Schedule(ctx context.Context, tc tenancy.Context, e duework.Entry) error {
	return f.write("Schedule", func() error { return f.Index.Schedule(ctx, tc, e) })
}

func (f *faultyIndex) ScheduleMissing(ctx context.Context, tc tenancy.Context, es []duework.Entry) (n int, err error) {
	err = f.write("ScheduleMissing", func() error { n, err = f.Index.ScheduleMissing(ctx, tc, es); return err })
	return n, err
}

func (f *faultyIndex) Unschedule(ctx context.Context, tc tenancy.Context, workKey string) error {
	return f.write("Unschedule", func() error { return f.Index.Unschedule(ctx, tc, workKey) })
}

func (f *faultyIndex) Get(ctx context.Context, tc tenancy.Context, workKey string) (e duework.Entry, err error) {
	err = f.read("Get", func() error { e, err = f.Index.Get(ctx, tc, workKey); return err })
	return e, err
}

func (f *faultyIndex) Complete(ctx context.Context, tc tenancy.Context, c duework.Claim, next duework.Entry) error {
	return f.write("Complete", func() error { return f.Index.Complete(ctx, tc, c, next) })
}

func (f *faultyIndex) CompleteMany(ctx context.Context, done []duework.Done) (errs []error, err error) {
	err = f.write("CompleteMany", func() error { errs, err = f.Index.CompleteMany(ctx, done); return err })
	if err != nil {
		errs = nil
	}
	return errs, err
}

func (f *faultyIndex) StartClaims(ctx context.Context, claims []duework.Unclaim) (errs []error, err error) {
	err = f.write("StartClaims", func() error { errs, err = f.Index.StartClaims(ctx, claims); return err })
	if err != nil {
		errs = nil
	}
	return errs, err
}

func (f *faultyIndex) Pause(ctx context.Context, tc tenancy.Context, until time.Time, reason string) error {
	return f.write("Pause", func() error { return f.Index.Pause(ctx, tc, until, reason) })
}

func (f *faultyIndex) UnscheduleClaimed(ctx context.Context, tc tenancy.Context, c duework.Claim) error {
	return f.write("UnscheduleClaimed", func() error { return f.Index.UnscheduleClaimed(ctx, tc, c) })
}

func (f *faultyIndex) Unclaim(ctx context.Context, claims []duework.Unclaim) (errs []error, err error) {
	err = f.write("Unclaim", func() error { errs, err = f.Index.Unclaim(ctx, claims); return err })
	if err != nil {
		errs = nil
	}
	return errs, err
}

func (f *faultyIndex) DueBefore(ctx context.Context, now time.Time, limit int) (es []duework.Entry, err error) {
	err = f.read("DueBefore", func() error { es, err = f.Index.DueBefore(ctx, now, limit); return err })
	return es, err
}

func (f *faultyIndex) Ready(ctx context.Context, q duework.ReadyQuery) (p duework.ReadyPage, err error) {
	err = f.write("Ready", func() error { p, err = f.Index.Ready(ctx, q); return err })
	return p, err
}

func (f *faultyIndex) Route(ctx context.Context, routes []duework.Route) error {
	return f.write("Route", func() error { return f.Index.Route(ctx, routes) })
}

func (f *faultyIndex) Groups(ctx context.Context, now time.Time) (gs []string, err error) {
	err = f.read("Groups", func() error { gs, err = f.Index.Groups(ctx, now); return err })
	return gs, err
}

func (f *faultyIndex) Release(ctx context.Context, userIDs []string, heldUntil time.Time) error {
	return f.write("Release", func() error { return f.Index.Release(ctx, userIDs, heldUntil) })
}

func (f *faultyIndex) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) (cs []duework.Claim, err error) {
	err = f.write("Claim", func() error { cs, err = f.Index.Claim(ctx, keys, now, until); return err })
	if err != nil {
		cs = nil
	}
	return cs, err
}

func (f *faultyIndex) User(ctx context.Context, userID string, now time.Time) (st duework.UserState, err error) {
	err = f.read("User", func() error { st, err = f.Index.User(ctx, userID, now); return err })
	return st, err
}

func (f *faultyIndex) Entries(ctx context.Context, userID, after string, limit int) (es []duework.EntryState, err error) {
	err = f.read("Entries", func() error { es, err = f.Index.Entries(ctx, userID, after, limit); return err })
	return es, err
}

// injectedIn returns every injectedError in err's tree (wrapped and joined errors).
func injectedIn(err error) []*injectedError {
	if err == nil {
		return nil
	}
	if ie, ok := err.(*injectedError); ok {
		return []*injectedError{ie}
	}
	switch x := err.(type) {
	case interface{ Unwrap() []error }:
		var out []*injectedError
		for _, e := range x.Unwrap() {
			out = append(out, injectedIn(e)...)
		}
		return out
	case interface{ Unwrap() error }:
		return injectedIn(x.Unwrap())
	}
	return nil
}

// seededPipeline finds something new on a fixed pattern per source and run, and always
// fails for sources named "flaky": deterministic whatever order the workers run in.
type seededPipeline struct {
	mu   sync.Mutex
	runs map[string]int
}

func (p *seededPipeline) Run(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
	if e.Slug == "flaky" {
		return bridge.Result{}, errBoom
	}
	key := tc.UserID() + "/" + e.Slug
	p.mu.Lock()
	n := p.runs[key]
	p.runs[key]++
	p.mu.Unlock()
	h := fnv.New32a()
	h.Write([]byte(key))
	if (h.Sum32()+uint32(n))%3 == 0 {
		return hit, nil
	}
	return miss, nil
}

const (
	faultUsers   = 12
	faultCycles  = 8
	faultEvery   = 4 * time.Minute
	faultSources = 4
)

type faultRun struct {
	w       *world
	fi      *faultyIndex
	watched []duework.Key
	tiers   map[duework.Key]string
	errs    []error
}

// newFaulty returns a faultyIndex over a new Index.
func newFaulty() *faultyIndex { return &faultyIndex{Index: duework.NewMemory()} }

// fault is the call runFaulty fails: the n-th index call of the cycles, or with method
// set the n-th call of that method; with after set, after its write. n 0 fails nothing.
type fault struct {
	n      int
	method string
	after  bool
}

func (f fault) String() string {
	if f.method != "" {
		return fmt.Sprintf("failing %s call %d (after=%v)", f.method, f.n, f.after)
	}
	return fmt.Sprintf("failing call %d (after=%v)", f.n, f.after)
}

// runFaulty sets up many tenants without faults, then runs several cycles with the index
// call at failing, and returns what it saw.
func runFaulty(t *testing.T, at fault) *faultRun {
	t.Helper()
	fi := newFaulty()
	w := newWorld(t, worldConfig{idx: fi, pipe: &seededPipeline{runs: map[string]int{}}, global: 18, lanes: []dispatch.LaneCapacity{
		{Lane: "pro", PerUserLimit: 2, PerCycleLimit: 8},
		{Lane: "plus", PerUserLimit: 2, PerCycleLimit: 8},
		{Lane: "free", PerUserLimit: 1, PerCycleLimit: 4, MinShare: 3},
	}})
	fr := &faultRun{w: w, fi: fi, tiers: map[duework.Key]string{}}
	ctx := context.Background()
	plans := []tenancy.PlanID{tenancy.PlanFree, "plus", "pro"}
	for u := range faultUsers {
		user := fmt.Sprintf("user%02d", u)
		tc := mustTC(t, user)
		if err := w.ent.SetPlan(ctx, tc, plans[u%3]); err != nil {
			t.Fatal(err)
		}
		for s := range faultSources {
			slug, tier := fmt.Sprintf("src%d", s), []string{"fast", "hot"}[s%2]
			if u == 3 && s == 0 {
				slug = "flaky"
			}
			watch(t, w.wl, user, slug, tier)
			k := duework.Key{UserID: user, WorkKey: slug}
			fr.watched = append(fr.watched, k)
			fr.tiers[k] = tier
		}
		if _, err := w.b.SyncWatchlist(ctx, tc, t0.Add(-10*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	// Two tenants drop a source after it was scheduled: the run unschedules them.
	for _, k := range []duework.Key{{UserID: "user01", WorkKey: "src1"}, {UserID: "user05", WorkKey: "src2"}} {
		if err := w.wl.Remove(ctx, mustTC(t, k.UserID), k.WorkKey); err != nil {
			t.Fatal(err)
		}
		fr.watched = slices.DeleteFunc(fr.watched, func(x duework.Key) bool { return x == k })
	}

	fi.mu.Lock()
	fi.calls, fi.methodCalls, fi.at = 0, 0, at
	fi.mu.Unlock()
	r := w.runner(t, bridge.RunnerConfig{Workers: 3, FlushItems: 4})
	for i := range faultCycles {
		rep, err := r.Cycle(ctx, t0.Add(time.Duration(i)*faultEvery))
		fr.errs = append(fr.errs, err)
		for _, it := range rep.Items {
			fr.errs = append(fr.errs, it.Err) // lost claims too
		}
	}
	fi.mu.Lock()
	fi.at = fault{}
	fi.mu.Unlock()
	return fr
}

// check verifies that every watched source is still scheduled, exactly once, with its
// tier, and that after fault-free cycles the index holds exactly the watched sources.
func (fr *faultRun) check(t *testing.T, label string) {
	t.Helper()
	ctx := context.Background()
	for _, k := range fr.watched {
		e, err := fr.fi.Index.Get(ctx, mustTC(t, k.UserID), k.WorkKey)
		if err != nil {
			t.Fatalf("%s: %v lost: %v", label, k, err)
		}
		if e.Key() != k || e.Tier != fr.tiers[k] || e.DueAt.IsZero() || e.MissStreak < 0 {
			t.Fatalf("%s: %v corrupt: %+v", label, k, e)
		}
	}
	keys := func(at time.Time) []duework.Key {
		due, err := fr.fi.Index.DueBefore(ctx, at, 10000)
		if err != nil {
			t.Fatal(err)
		}
		var out []duework.Key
		for _, e := range due {
			out = append(out, e.Key())
		}
		slices.SortFunc(out, func(a, b duework.Key) int {
			if a.UserID != b.UserID {
				return cmpString(a.UserID, b.UserID)
			}
			return cmpString(a.WorkKey, b.WorkKey)
		})
		return out
	}
	far := t0.Add(1000 * time.Hour) // every claim of the run has ended by then
	got := keys(far)
	for i := 1; i < len(got); i++ {
		if got[i] == got[i-1] {
			t.Fatalf("%s: %v scheduled twice", label, got[i])
		}
	}
	// Fault-free cycles far later dispatch everything, so removed sources go too.
	r := fr.w.runner(t, bridge.RunnerConfig{Workers: 3})
	want := slices.Clone(fr.watched)
	slices.SortFunc(want, func(a, b duework.Key) int {
		if a.UserID != b.UserID {
			return cmpString(a.UserID, b.UserID)
		}
		return cmpString(a.WorkKey, b.WorkKey)
	})
	for i := range 10 {
		now := far.Add(time.Duration(i) * 100 * time.Hour)
		if _, err := r.Cycle(ctx, now); err != nil && !errors.Is(err, errBoom) {
			t.Fatalf("%s: clean cycle: %v", label, err)
		}
		if slices.Equal(keys(now.Add(100*time.Hour-time.Second)), want) {
			return
		}
	}
	t.Fatalf("%s: after clean cycles the index holds %v, want exactly the watched %v", label, keys(far.Add(2000*time.Hour)), want)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestFaultInjectionLosesNothing fails the n-th index call of several cycles, for every
// n, before and after the call's write: every failure is reported, no watched source is
// lost or scheduled twice, and fault-free cycles afterwards leave exactly the watched
// sources. Items run on several workers, so which method the n-th call is varies from run
// to run; every method the Runner calls is then failed by name as well, so that each is
// certain to be failed at least once.
func TestFaultInjectionLosesNothing(t *testing.T) {
	clean := runFaulty(t, fault{})
	total := clean.fi.calls
	if total < 5*faultCycles {
		t.Fatalf("the clean run made only %d index calls", total)
	}
	for _, err := range clean.errs {
		if err != nil && !errors.Is(err, errBoom) {
			t.Fatalf("clean run: %v", err)
		}
	}
	clean.check(t, "clean run")

	// The Runner checks no claim of its own items; it removes a gone source under its
	// claim.
	methods := []string{"CompleteMany", "Claim", "Ready", "Release", "Groups", "UnscheduleClaimed"}
	for _, after := range []bool{false, true} {
		for n := 1; n <= total; n++ {
			faultOnce(t, fault{n: n, after: after})
		}
		for _, m := range methods {
			if !faultOnce(t, fault{n: 1, method: m, after: after}) {
				t.Errorf("no %s call was failed: the run does not exercise it", m)
			}
		}
	}
}

// faultOnce runs the cycles failing the call at and checks that the failure was reported
// and nothing was lost. It reports false when the run made no such call.
func faultOnce(t *testing.T, at fault) bool {
	t.Helper()
	label := at.String()
	fr := runFaulty(t, at)
	if fr.fi.injected == nil {
		if at.method == "" && fr.fi.calls >= at.n {
			t.Fatalf("%s: not injected in %d calls", label, fr.fi.calls)
		}
		return false
	}
	var reported bool
	for _, err := range fr.errs {
		for _, ie := range injectedIn(err) {
			if ie != fr.fi.injected {
				t.Fatalf("%s: reported a failure that was not injected: %v", label, ie)
			}
			reported = true
		}
	}
	if !reported {
		t.Fatalf("%s: the failure of %s was not reported", label, fr.fi.injected.method)
	}
	fr.check(t, label)
	return true
}

// TestSyncWatchlistUnderFaults fails each index call of a sync, before and after its
// write: the failure is returned, and a second sync adds what the first did not.
func TestSyncWatchlistUnderFaults(t *testing.T) {
	ctx := context.Background()
	for _, after := range []bool{false, true} {
		for n := 1; n <= 20; n++ {
			fi := newFaulty()
			fi.at = fault{n: n, after: after}
			wl := tenancy.NewMemoryWatchlist()
			b := &bridge.Bridge{Index: fi, Watchlist: wl}
			for s := range 10 {
				watch(t, wl, "u1", fmt.Sprintf("s%d", s), "hot")
			}
			tc := mustTC(t, "u1")
			added, err := b.SyncWatchlist(ctx, tc, t0)
			if fi.injected == nil {
				if n > 1 {
					break // one call per sync
				}
				t.Fatalf("n=%d: no call failed", n)
			}
			label := fmt.Sprintf("n=%d after=%v", n, after)
			if got := injectedIn(err); len(got) != 1 || got[0] != fi.injected {
				t.Fatalf("%s: err = %v, want the injected failure", label, err)
			}
			fi.at = fault{}
			more, err := b.SyncWatchlist(ctx, tc, t0)
			if err != nil {
				t.Fatal(err)
			}
			unreported := 0
			if after {
				unreported = 10 // the failed ScheduleMissing wrote them all
			}
			if added+more+unreported != 10 {
				t.Fatalf("%s: added %d then %d (+%d unreported), want 10 in all", label, added, more, unreported)
			}
			for s := range 10 {
				get(t, fi.Index, "u1", fmt.Sprintf("s%d", s))
			}
		}
	}
}
