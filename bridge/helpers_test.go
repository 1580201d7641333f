package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/fakeclock"
	"github.com/rotaworks/rota/tenancy"
)

var _ bridge.Clock = (*fakeclock.Clock)(nil)

// t0 is the fixed instant the tests count from.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// newIndex returns the Index the tests run against.
func newIndex() duework.Index { return duework.NewMemory() }

// countingIndex counts the calls of each method and records the size of every
// CompleteMany.
type countingIndex struct {
	*duework.Memory
	mu        sync.Mutex
	calls     map[string]int
	sizes     []int
	completed chan int // when not nil, receives the size of every CompleteMany
	unclaimed chan int // when not nil, receives the size of every Unclaim
	// beforeUnschedule, when not nil, is called before every UnscheduleClaimed. Set it
	// before the index is used.
	beforeUnschedule func(duework.Claim)
}

func newCountingIndex() *countingIndex {
	return &countingIndex{Memory: duework.NewMemory(), calls: map[string]int{}}
}

func (x *countingIndex) count(method string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.calls[method]++
}

func (x *countingIndex) n(method string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.calls[method]
}

func (x *countingIndex) batchSizes() []int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Clone(x.sizes)
}

func (x *countingIndex) Schedule(ctx context.Context, tc tenancy.Context, e duework.Entry) error {
	x.count("Schedule")
	return x.Memory.Schedule(ctx, tc, e)
}

func (x *countingIndex) ScheduleMissing(ctx context.Context, tc tenancy.Context, es []duework.Entry) (int, error) {
	x.count("ScheduleMissing")
	return x.Memory.ScheduleMissing(ctx, tc, es)
}

func (x *countingIndex) Get(ctx context.Context, tc tenancy.Context, workKey string) (duework.Entry, error) {
	x.count("Get")
	return x.Memory.Get(ctx, tc, workKey)
}

func (x *countingIndex) Complete(ctx context.Context, tc tenancy.Context, c duework.Claim, next duework.Entry) error {
	x.count("Complete")
	return x.Memory.Complete(ctx, tc, c, next)
}

func (x *countingIndex) CompleteMany(ctx context.Context, done []duework.Done) ([]error, error) {
	x.mu.Lock()
	x.calls["CompleteMany"]++
	x.sizes = append(x.sizes, len(done))
	x.mu.Unlock()
	errs, err := x.Memory.CompleteMany(ctx, done)
	if x.completed != nil {
		x.completed <- len(done)
	}
	return errs, err
}

// StartClaims counts its calls, and under "claims started" the claims they carry.
func (x *countingIndex) StartClaims(ctx context.Context, claims []duework.Unclaim) ([]error, error) {
	x.mu.Lock()
	x.calls["StartClaims"]++
	x.calls["claims started"] += len(claims)
	x.mu.Unlock()
	return x.Memory.StartClaims(ctx, claims)
}

func (x *countingIndex) Unclaim(ctx context.Context, claims []duework.Unclaim) ([]error, error) {
	x.count("Unclaim")
	errs, err := x.Memory.Unclaim(ctx, claims)
	if x.unclaimed != nil {
		x.unclaimed <- len(claims)
	}
	return errs, err
}

// UnscheduleClaimed counts its calls, and first calls beforeUnschedule when it is set:
// a host acting just before a gone source is removed.
func (x *countingIndex) UnscheduleClaimed(ctx context.Context, tc tenancy.Context, c duework.Claim) error {
	x.count("UnscheduleClaimed")
	if x.beforeUnschedule != nil {
		x.beforeUnschedule(c)
	}
	return x.Memory.UnscheduleClaimed(ctx, tc, c)
}

// countingWatchlist counts the Gets of the MemoryWatchlist it wraps and records the size
// of every GetMany. Set before (under no lock: before the Runner starts) to act as a
// concurrent host just before each GetMany reads.
type countingWatchlist struct {
	*tenancy.MemoryWatchlist
	before  func()
	mu      sync.Mutex
	gets    int
	batches []int
}

func (w *countingWatchlist) Get(ctx context.Context, tc tenancy.Context, slug string) (tenancy.WatchlistEntry, error) {
	w.mu.Lock()
	w.gets++
	w.mu.Unlock()
	return w.MemoryWatchlist.Get(ctx, tc, slug)
}

func (w *countingWatchlist) GetMany(ctx context.Context, lookups []tenancy.Lookup) ([]tenancy.WatchlistEntry, []error, error) {
	w.mu.Lock()
	w.batches = append(w.batches, len(lookups))
	w.mu.Unlock()
	if w.before != nil {
		w.before()
	}
	return w.MemoryWatchlist.GetMany(ctx, lookups)
}

// reads returns the number of Gets and the sizes of the GetManys so far.
func (w *countingWatchlist) reads() (gets int, batches []int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gets, slices.Clone(w.batches)
}

// recv returns the next value from ch, failing the test if none comes within ten seconds
// of real time (a bound on a hang, not a wait: the value is normally there at once).
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// waitLive blocks until exactly tickers tickers run and timers timers are pending on clk —
// the code under test has reached the state the test steps the clock from — and fails the
// test if that does not happen within ten seconds of real time.
func waitLive(t testing.TB, clk *fakeclock.Clock, tickers, timers int) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		clk.Wait(tickers, timers)
		close(done)
	}()
	recv(t, done, fmt.Sprintf("%d tickers and %d timers on the fake clock", tickers, timers))
}

// sameAfterRun fails unless got is want but for DueAt and LastRunAt, which may lie up to
// a second later than want's: RunDueItem advances from the time its run ended, measured
// on the real clock.
func sameAfterRun(t testing.TB, want, got duework.Entry) {
	t.Helper()
	later := func(w, g time.Time) bool { return !g.Before(w) && g.Before(w.Add(time.Second)) }
	if later(want.DueAt, got.DueAt) && (later(want.LastRunAt, got.LastRunAt) || got.LastRunAt.Equal(want.LastRunAt)) {
		got.DueAt, got.LastRunAt = want.DueAt, want.LastRunAt
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("entry after the run (-want +got):\n%s", diff)
	}
}

func mustTC(t testing.TB, user string) tenancy.Context {
	t.Helper()
	tc, err := tenancy.NewContext(user)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

func watch(t testing.TB, wl tenancy.Watchlist, user, slug, tier string) {
	t.Helper()
	if err := wl.Add(context.Background(), mustTC(t, user), tenancy.WatchlistEntry{UserID: user, Slug: slug, Tier: tier, AddedAt: t0}); err != nil {
		t.Fatal(err)
	}
}

func schedule(t testing.TB, idx duework.Index, e duework.Entry) {
	t.Helper()
	if err := idx.Schedule(context.Background(), mustTC(t, e.UserID), e); err != nil {
		t.Fatal(err)
	}
}

func get(t testing.TB, idx duework.Index, user, slug string) duework.Entry {
	t.Helper()
	e, err := idx.Get(context.Background(), mustTC(t, user), slug)
	if err != nil {
		t.Fatalf("Get(%s, %s): %v", user, slug, err)
	}
	return e
}

// claim claims the entry at now for ten minutes and returns it as a dispatched item.
func claim(t testing.TB, idx duework.Index, user, slug string, now time.Time) dispatch.Item {
	t.Helper()
	cs, err := idx.Claim(context.Background(), []duework.Key{{UserID: user, WorkKey: slug}}, now, now.Add(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 {
		t.Fatalf("Claim(%s, %s) at %v: got %d claims, want 1", user, slug, now, len(cs))
	}
	return dispatch.Item{Claim: cs[0], Lane: "free"}
}

// stubPipeline answers per slug and records its calls.
type stubPipeline struct {
	mu      sync.Mutex
	results map[string]bridge.Result
	errs    map[string]error
	panics  map[string]bool
	calls   []tenancy.WatchlistEntry
	users   []string
}

func newStub() *stubPipeline {
	return &stubPipeline{results: map[string]bridge.Result{}, errs: map[string]error{}, panics: map[string]bool{}}
}

func (p *stubPipeline) Run(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, e)
	p.users = append(p.users, tc.UserID())
	if p.panics[e.Slug] {
		panic("boom " + e.Slug)
	}
	if err := p.errs[e.Slug]; err != nil {
		return bridge.Result{}, err
	}
	return p.results[e.Slug], nil
}

func (p *stubPipeline) ncalls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.calls)
}

var (
	hit  = bridge.Result{Outcomes: []bridge.Outcome{{ID: "p1", Stage: bridge.StageAlreadySeen}, {ID: "p2", Stage: "scored"}}}
	miss = bridge.Result{Outcomes: []bridge.Outcome{{ID: "p1", Stage: bridge.StageAlreadySeen}}}
)

var errBoom = errors.New("boom")

// observerFunc adapts a function to a bridge.Observer.
type observerFunc func(bridge.CycleReport)

func (f observerFunc) ObserveCycle(rep bridge.CycleReport) { f(rep) }

// everyMinute is a retry policy that does not back off: a failing source is retried a
// minute after each failure.
var everyMinute = cadence.Backoff{Base: time.Minute, Max: time.Minute, Factor: 1}

// newTextLogger returns a logger writing text lines to w.
func newTextLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
