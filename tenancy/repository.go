package tenancy

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

// Repository is tenant-scoped storage of values of type T, deny-by-default: every call
// reads and writes only the rows of its Context's tenant, and another tenant's row answers
// [ErrNotFound] exactly as if it did not exist. Every method returns [ErrNoTenant] for the
// zero Context and [ErrInvalidID] for a bad id.
type Repository[T any] interface {
	// Put inserts or replaces the tenant's row id.
	Put(ctx context.Context, tc Context, id string, v T) error
	// Get returns the tenant's row id, or ErrNotFound.
	Get(ctx context.Context, tc Context, id string) (T, error)
	// Delete removes the tenant's row id, or returns ErrNotFound when it has none.
	Delete(ctx context.Context, tc Context, id string) error
	// List returns the tenant's rows ordered by id (byte order). The slice is the caller's.
	List(ctx context.Context, tc Context) ([]T, error)
}

// MemoryRepository is the in-memory [Repository], safe for concurrent use; the zero value
// is an empty repository ready to use. Values are stored as given: a T holding pointers or
// slices shares them with the caller.
//
// Rows live in one map per tenant, and every method indexes it by the Context's user ID
// before it looks at the row ID, so no argument can reach another tenant's map.
type MemoryRepository[T any] struct {
	mu   sync.RWMutex
	rows map[string]map[string]T // userID → id → value
}

var _ Repository[int] = (*MemoryRepository[int])(nil)

// NewMemoryRepository returns an empty MemoryRepository.
func NewMemoryRepository[T any]() *MemoryRepository[T] {
	return &MemoryRepository[T]{rows: make(map[string]map[string]T)}
}

// checkCall refuses the zero Context first, whatever else is wrong, then a done ctx.
func checkCall(ctx context.Context, tc Context) error {
	if err := tc.Check(); err != nil {
		return err
	}
	return ctx.Err()
}

func checkRow(ctx context.Context, tc Context, what, id string) error {
	if err := checkCall(ctx, tc); err != nil {
		return err
	}
	return ValidateID(what, id)
}

// notFound is the one not-found error of this package: its text depends only on the field
// name and the id asked for, never on whether another tenant holds that id.
func notFound(what, id string) error {
	return fmt.Errorf("%w: %s %q", ErrNotFound, what, id)
}

// Put implements [Repository].
func (r *MemoryRepository[T]) Put(ctx context.Context, tc Context, id string, v T) error {
	return r.put(ctx, tc, "id", id, v)
}

// Get implements [Repository].
func (r *MemoryRepository[T]) Get(ctx context.Context, tc Context, id string) (T, error) {
	return r.get(ctx, tc, "id", id)
}

// Delete implements [Repository].
func (r *MemoryRepository[T]) Delete(ctx context.Context, tc Context, id string) error {
	return r.delete(ctx, tc, "id", id)
}

// List implements [Repository]: the tenant's values ordered by id, in O(n log n) for the
// tenant's n rows, whatever other tenants hold.
func (r *MemoryRepository[T]) List(ctx context.Context, tc Context) ([]T, error) {
	if err := checkCall(ctx, tc); err != nil {
		return nil, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	m := r.rows[tc.userID]
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]T, 0, len(ids))
	for _, id := range ids {
		out = append(out, m[id])
	}
	return out, nil
}

// put, get and delete do the work of Put, Get and Delete; what names the id field in
// errors ("id" for a Repository, "slug" for a Watchlist).
func (r *MemoryRepository[T]) put(ctx context.Context, tc Context, what, id string, v T) error {
	if err := checkRow(ctx, tc, what, id); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tenantRows(tc.userID)[id] = v
	return nil
}

// tenantRows returns user's map of rows, made on first use; r.mu must be held for writing.
func (r *MemoryRepository[T]) tenantRows(user string) map[string]T {
	if r.rows == nil {
		r.rows = make(map[string]map[string]T)
	}
	m := r.rows[user]
	if m == nil {
		m = make(map[string]T)
		r.rows[user] = m
	}
	return m
}

func (r *MemoryRepository[T]) get(ctx context.Context, tc Context, what, id string) (T, error) {
	var zero T
	if err := checkRow(ctx, tc, what, id); err != nil {
		return zero, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := r.rows[tc.userID][id]
	if !ok {
		return zero, notFound(what, id)
	}
	return v, nil
}

func (r *MemoryRepository[T]) delete(ctx context.Context, tc Context, what, id string) error {
	if err := checkRow(ctx, tc, what, id); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.rows[tc.userID]
	if _, ok := m[id]; !ok {
		return notFound(what, id)
	}
	delete(m, id)
	if len(m) == 0 {
		delete(r.rows, tc.userID)
	}
	return nil
}
