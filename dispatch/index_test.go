package dispatch

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// refIndex is a naive duework.Index, written straight from the contract: every read scans
// every row. The Dispatch tests run over duework.Memory and over it, so that a failure
// shows whether the dispatcher or the index is at fault.
type refIndex struct {
	mu         sync.Mutex
	rows       map[duework.Key]*refRow
	lastServed map[string]time.Time
	tokens     uint64
}

type refRow struct {
	e       duework.Entry
	claimed bool
	token   uint64
	until   time.Time
}

var _ duework.Index = (*refIndex)(nil)

func newRefIndex() *refIndex {
	return &refIndex{rows: map[duework.Key]*refRow{}, lastServed: map[string]time.Time{}}
}

func (x *refIndex) visibleDue(r *refRow, now time.Time) bool {
	return !r.e.DueAt.After(now) && (!r.claimed || !r.until.After(now))
}

func (x *refIndex) Schedule(_ context.Context, tc tenancy.Context, e duework.Entry) error {
	if err := e.Validate(tc); err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.rows[e.Key()] = &refRow{e: e}
	return nil
}

func (x *refIndex) Unschedule(_ context.Context, tc tenancy.Context, workKey string) error {
	if err := tc.Check(); err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.rows, duework.Key{UserID: tc.UserID(), WorkKey: workKey})
	return nil
}

func (x *refIndex) Get(_ context.Context, tc tenancy.Context, workKey string) (duework.Entry, error) {
	if err := tc.Check(); err != nil {
		return duework.Entry{}, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	r, ok := x.rows[duework.Key{UserID: tc.UserID(), WorkKey: workKey}]
	if !ok {
		return duework.Entry{}, duework.ErrNotFound
	}
	return r.e, nil
}

func (x *refIndex) due(now time.Time) []duework.Entry {
	var out []duework.Entry
	for _, r := range x.rows {
		if x.visibleDue(r, now) {
			out = append(out, r.e)
		}
	}
	slices.SortFunc(out, contractOrder)
	return out
}

// contractOrder is DueBefore's (DueAt, UserID, WorkKey) order.
func contractOrder(a, b duework.Entry) int {
	return cmp.Or(a.DueAt.Compare(b.DueAt), cmp.Compare(a.UserID, b.UserID), cmp.Compare(a.WorkKey, b.WorkKey))
}

func (x *refIndex) DueBefore(_ context.Context, now time.Time, limit int) ([]duework.Entry, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%w: limit %d", duework.ErrInvalid, limit)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	out := x.due(now)
	return out[:min(limit, len(out))], nil
}

func (x *refIndex) DueHeads(_ context.Context, now time.Time, perUser int) ([]duework.Head, error) {
	if perUser < 1 {
		return nil, fmt.Errorf("%w: perUser %d", duework.ErrInvalid, perUser)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	byUser := map[string][]duework.Entry{}
	for _, e := range x.due(now) {
		byUser[e.UserID] = append(byUser[e.UserID], e)
	}
	var heads []duework.Head
	for u, es := range byUser {
		heads = append(heads, duework.Head{
			UserID:     u,
			LastServed: x.lastServed[u],
			Due:        es[:min(perUser, len(es))],
			More:       len(es) > perUser,
		})
	}
	slices.SortFunc(heads, func(a, b duework.Head) int { return cmp.Compare(a.UserID, b.UserID) })
	return heads, nil
}

func (x *refIndex) Claim(_ context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	if !until.After(now) {
		return nil, fmt.Errorf("%w: until %v not after now %v", duework.ErrInvalid, until, now)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []duework.Claim
	for _, k := range keys {
		r, ok := x.rows[k]
		if !ok || !x.visibleDue(r, now) {
			continue
		}
		x.tokens++
		r.claimed, r.token, r.until = true, x.tokens, until
		x.lastServed[k.UserID] = now
		out = append(out, duework.Claim{Entry: r.e, Token: r.token, Until: until})
	}
	return out, nil
}

func (x *refIndex) Complete(_ context.Context, tc tenancy.Context, c duework.Claim, next duework.Entry) error {
	if err := next.Validate(tc); err != nil {
		return err
	}
	if c.Entry.Key() != next.Key() {
		return fmt.Errorf("%w: next %v is not the claim's entry %v", duework.ErrInvalid, next.Key(), c.Entry.Key())
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	r, ok := x.rows[c.Entry.Key()]
	if !ok || !r.claimed || r.token != c.Token {
		return duework.ErrClaimLost
	}
	x.rows[next.Key()] = &refRow{e: next}
	return nil
}

// indexes lists the Index implementations every Dispatch test runs over.
var indexes = []struct {
	name string
	new  func() duework.Index
}{
	{"memory", func() duework.Index { return duework.NewMemory() }},
	{"ref", func() duework.Index { return newRefIndex() }},
}

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

// hookIndex wraps an Index to watch or disturb the dispatcher's calls.
type hookIndex struct {
	duework.Index
	mu             sync.Mutex
	dueHeads       []int // perUser of every DueHeads call
	dueBefore      int
	claims         [][]duework.Key
	dueHeadsErr    error
	claimErr       error
	beforeClaim    func(keys []duework.Key) // runs before Claim is forwarded
	duplicateHeads bool                     // return the first head twice
}

func (h *hookIndex) DueBefore(ctx context.Context, now time.Time, limit int) ([]duework.Entry, error) {
	h.mu.Lock()
	h.dueBefore++
	h.mu.Unlock()
	return h.Index.DueBefore(ctx, now, limit)
}

func (h *hookIndex) DueHeads(ctx context.Context, now time.Time, perUser int) ([]duework.Head, error) {
	h.mu.Lock()
	h.dueHeads = append(h.dueHeads, perUser)
	h.mu.Unlock()
	if h.dueHeadsErr != nil {
		return nil, h.dueHeadsErr
	}
	heads, err := h.Index.DueHeads(ctx, now, perUser)
	if h.duplicateHeads && len(heads) > 0 {
		heads = append(heads[:1], heads...)
	}
	return heads, err
}

func (h *hookIndex) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	h.mu.Lock()
	h.claims = append(h.claims, slices.Clone(keys))
	h.mu.Unlock()
	if h.beforeClaim != nil {
		h.beforeClaim(keys)
	}
	if h.claimErr != nil {
		return nil, h.claimErr
	}
	return h.Index.Claim(ctx, keys, now, until)
}
