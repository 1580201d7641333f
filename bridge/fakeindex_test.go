package bridge_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// fakeIndex is a small duework.Index for the bridge's tests, used until duework.Memory is
// available. It implements the contract naively.
type fakeIndex struct {
	mu         sync.Mutex
	rows       map[duework.Key]*fakeRow
	lastServed map[string]time.Time
	tokens     uint64
}

type fakeRow struct {
	e     duework.Entry
	token uint64
	until time.Time
}

func newFakeIndex() *fakeIndex {
	return &fakeIndex{rows: map[duework.Key]*fakeRow{}, lastServed: map[string]time.Time{}}
}

var _ duework.Index = (*fakeIndex)(nil)

func (f *fakeIndex) Schedule(ctx context.Context, tc tenancy.Context, e duework.Entry) error {
	if err := e.Validate(tc); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rows[e.Key()] = &fakeRow{e: e}
	return nil
}

func (f *fakeIndex) Unschedule(ctx context.Context, tc tenancy.Context, workKey string) error {
	if err := tc.Check(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.rows, duework.Key{UserID: tc.UserID(), WorkKey: workKey})
	return nil
}

func (f *fakeIndex) Get(ctx context.Context, tc tenancy.Context, workKey string) (duework.Entry, error) {
	if err := tc.Check(); err != nil {
		return duework.Entry{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.rows[duework.Key{UserID: tc.UserID(), WorkKey: workKey}]
	if !ok {
		return duework.Entry{}, fmt.Errorf("%w: %q", duework.ErrNotFound, workKey)
	}
	return r.e, nil
}

func (f *fakeIndex) due(now time.Time) []duework.Entry {
	var out []duework.Entry
	for _, r := range f.rows {
		if !r.e.DueAt.After(now) && !r.until.After(now) {
			out = append(out, r.e)
		}
	}
	slices.SortFunc(out, func(a, b duework.Entry) int {
		return cmp.Or(a.DueAt.Compare(b.DueAt), cmp.Compare(a.UserID, b.UserID), cmp.Compare(a.WorkKey, b.WorkKey))
	})
	return out
}

func (f *fakeIndex) DueBefore(ctx context.Context, now time.Time, limit int) ([]duework.Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.due(now)
	return d[:min(limit, len(d))], nil
}

func (f *fakeIndex) DueHeads(ctx context.Context, now time.Time, perUser int) ([]duework.Head, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	by := map[string]*duework.Head{}
	var users []string
	for _, e := range f.due(now) {
		h := by[e.UserID]
		if h == nil {
			h = &duework.Head{UserID: e.UserID, LastServed: f.lastServed[e.UserID]}
			by[e.UserID] = h
			users = append(users, e.UserID)
		}
		if len(h.Due) < perUser {
			h.Due = append(h.Due, e)
		} else {
			h.More = true
		}
	}
	slices.Sort(users)
	var out []duework.Head
	for _, u := range users {
		out = append(out, *by[u])
	}
	return out, nil
}

func (f *fakeIndex) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []duework.Claim
	for _, k := range keys {
		r, ok := f.rows[k]
		if !ok || r.e.DueAt.After(now) || r.until.After(now) {
			continue
		}
		f.tokens++
		r.token, r.until = f.tokens, until
		f.lastServed[k.UserID] = now
		out = append(out, duework.Claim{Entry: r.e, Token: r.token, Until: until})
	}
	return out, nil
}

func (f *fakeIndex) Complete(ctx context.Context, tc tenancy.Context, c duework.Claim, next duework.Entry) error {
	if err := next.Validate(tc); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.rows[c.Entry.Key()]
	if !ok || r.token == 0 || r.token != c.Token || next.Key() != c.Entry.Key() {
		return duework.ErrClaimLost
	}
	f.rows[c.Entry.Key()] = &fakeRow{e: next}
	return nil
}
