package bridge_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// t0 is the fixed instant the tests count from.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// newIndex returns the Index the tests run against.
func newIndex() duework.Index { return duework.NewMemory() }

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
