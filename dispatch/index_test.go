package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/duework/indextest"
	"github.com/rotaworks/rota/tenancy"
)

// indexes lists the Index implementations every Dispatch test runs over: the in-memory one
// and the reference model, so that a failure shows whether the dispatcher or the index is
// at fault.
var indexes = []struct {
	name string
	new  func() duework.Index
}{
	{"memory", func() duework.Index { return duework.NewMemory() }},
	{"model", func() duework.Index { return indextest.NewModel() }},
	// Memory behind the Index interface: the Dispatcher reads and claims with Ready and
	// Claim, as over any Index, and not into memory of its own as over a *duework.Memory.
	{"memory-ready", func() duework.Index { return readyOnly{duework.NewMemory()} }},
}

// readyOnly is an Index whose method set is the Index interface's alone.
type readyOnly struct{ duework.Index }

// forEachIndex runs f as one subtest per Index implementation.
func forEachIndex(t *testing.T, f func(t *testing.T, newIndex func() duework.Index)) {
	for _, ix := range indexes {
		t.Run(ix.name, func(t *testing.T) { f(t, ix.new) })
	}
}

// tenant returns the Context for user, failing the test on a bad ID.
func tenant(t rapid.TB, user string) tenancy.Context {
	t.Helper()
	tc, err := tenancy.NewContext(user)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// schedule puts the entries into idx.
func schedule(t rapid.TB, idx duework.Index, es ...duework.Entry) {
	t.Helper()
	for _, e := range es {
		if err := idx.Schedule(context.Background(), tenant(t, e.UserID), e); err != nil {
			t.Fatal(err)
		}
	}
}

// route puts users into group directly, as an earlier cycle would have.
func route(t rapid.TB, idx duework.Index, group Lane, users ...string) {
	t.Helper()
	routes := make([]duework.Route, len(users))
	for i, u := range users {
		routes[i] = duework.Route{UserID: u, Group: string(group)}
	}
	if err := idx.Route(context.Background(), routes); err != nil {
		t.Fatal(err)
	}
}

// readyUsers returns the users of group ready and unheld at now, in turn order, without
// holding them.
func readyUsers(t rapid.TB, idx duework.Index, group Lane, now time.Time) []string {
	t.Helper()
	page, err := idx.Ready(context.Background(), duework.ReadyQuery{Group: string(group), Now: now, Users: duework.MaxLimit, PerUser: 1})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(page.Heads))
	for i, h := range page.Heads {
		out[i] = h.UserID
	}
	return out
}

// The test doubles are whole Indexes: hookIndex forwards every call it does not record
// to the Index it wraps, fixedIndex and stubIndex serve only what a Dispatcher calls.
var (
	_ duework.Index = (*hookIndex)(nil)
	_ duework.Index = (*fixedIndex)(nil)
	_ duework.Index = stubIndex{}
)

// call is one Index call a dispatcher made, as hookIndex records it.
type call struct {
	op     string // "Groups", "Ready", "Route", "Release", "Claim"
	query  duework.ReadyQuery
	users  []string // the users Ready returned, Release's, Route's (user>group), Claim's (user/key)
	routes []duework.Route
	until  time.Time
}

// hookIndex wraps an Index to record, disturb or fail the dispatcher's calls.
type hookIndex struct {
	duework.Index
	mu    sync.Mutex
	calls []call
	// failAt, when > 0, makes the failAt-th recorded call fail with errInjected.
	failAt int
	// fail, when not nil, decides for each call, numbered from 1, whether it fails with
	// errInjected.
	fail func(n int, c call) bool
	// beforeClaim runs before Claim is forwarded.
	beforeClaim func(keys []duework.Key)
}

var errInjected = errors.New("injected index failure")

// record notes c and returns its place among the calls, and errInjected when c is to fail.
func (h *hookIndex) record(c call) (int, error) {
	h.mu.Lock()
	h.calls = append(h.calls, c)
	n := len(h.calls)
	fail := h.fail
	h.mu.Unlock()
	if n == h.failAt || (fail != nil && fail(n, c)) {
		return n - 1, fmt.Errorf("%s, call %d: %w", c.op, n, errInjected)
	}
	return n - 1, nil
}

// ops returns the recorded calls' operations.
func (h *hookIndex) ops() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, len(h.calls))
	for i, c := range h.calls {
		out[i] = c.op
	}
	return out
}

// recorded returns the calls recorded so far and forgets them.
func (h *hookIndex) recorded() []call {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.calls
	h.calls = nil
	return out
}

func (h *hookIndex) Groups(ctx context.Context, now time.Time) ([]string, error) {
	if _, err := h.record(call{op: "Groups"}); err != nil {
		return nil, err
	}
	return h.Index.Groups(ctx, now)
}

// Ready records the users it returns in its call.
func (h *hookIndex) Ready(ctx context.Context, q duework.ReadyQuery) (duework.ReadyPage, error) {
	i, err := h.record(call{op: "Ready", query: q})
	if err != nil {
		return duework.ReadyPage{}, err
	}
	page, err := h.Index.Ready(ctx, q)
	users := make([]string, len(page.Heads))
	for j, hd := range page.Heads {
		users[j] = hd.UserID
	}
	h.mu.Lock()
	if i < len(h.calls) {
		h.calls[i].users = users
	}
	h.mu.Unlock()
	return page, err
}

func (h *hookIndex) Route(ctx context.Context, routes []duework.Route) error {
	c := call{op: "Route", routes: slices.Clone(routes)}
	for _, r := range routes {
		c.users = append(c.users, r.UserID+">"+r.Group)
	}
	if _, err := h.record(c); err != nil {
		return err
	}
	return h.Index.Route(ctx, routes)
}

func (h *hookIndex) Release(ctx context.Context, userIDs []string, heldUntil time.Time) error {
	if _, err := h.record(call{op: "Release", users: slices.Clone(userIDs), until: heldUntil}); err != nil {
		return err
	}
	return h.Index.Release(ctx, userIDs, heldUntil)
}

func (h *hookIndex) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	c := call{op: "Claim", until: until}
	for _, k := range keys {
		c.users = append(c.users, k.UserID+"/"+k.WorkKey)
	}
	if _, err := h.record(c); err != nil {
		return nil, err
	}
	if h.beforeClaim != nil {
		h.beforeClaim(keys)
	}
	return h.Index.Claim(ctx, keys, now, until)
}
