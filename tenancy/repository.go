package tenancy

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

// Repository is tenant-scoped storage of values of type T, deny-by-default: every call
// reads and writes only the rows of its Context's tenant. There is no method that lists or
// touches another tenant's rows, and asking for one answers [ErrNotFound] exactly as if it
// did not exist.
//
// Every method returns [ErrNoTenant] for the zero Context and [ErrInvalidID] for a bad id.
type Repository[T any] interface {
	// Put inserts or replaces the tenant's row id.
	Put(ctx context.Context, tc Context, id string, v T) error
	// Get returns the tenant's row id, or ErrNotFound.
	Get(ctx context.Context, tc Context, id string) (T, error)
	// Delete removes the tenant's row id, or returns ErrNotFound when it has none.
	Delete(ctx context.Context, tc Context, id string) error
	// List returns the tenant's rows ordered by id. The slice is the caller's.
	List(ctx context.Context, tc Context) ([]T, error)
}

// MemoryRepository is the in-memory [Repository], safe for concurrent use. Values are
// stored as given: a T holding pointers or slices shares them with the caller.
type MemoryRepository[T any] struct {
	mu   sync.RWMutex
	rows map[string]map[string]T // userID → id → value
}

var _ Repository[int] = (*MemoryRepository[int])(nil)

// NewMemoryRepository returns an empty MemoryRepository.
func NewMemoryRepository[T any]() *MemoryRepository[T] {
	return &MemoryRepository[T]{rows: make(map[string]map[string]T)}
}

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

// Put implements [Repository].
func (r *MemoryRepository[T]) Put(ctx context.Context, tc Context, id string, v T) error {
	if err := checkRow(ctx, tc, "id", id); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.rows[tc.userID]
	if m == nil {
		m = make(map[string]T)
		r.rows[tc.userID] = m
	}
	m[id] = v
	return nil
}

// Get implements [Repository].
func (r *MemoryRepository[T]) Get(ctx context.Context, tc Context, id string) (T, error) {
	var zero T
	if err := checkRow(ctx, tc, "id", id); err != nil {
		return zero, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := r.rows[tc.userID][id]
	if !ok {
		return zero, fmt.Errorf("%w: id %q", ErrNotFound, id)
	}
	return v, nil
}

// Delete implements [Repository].
func (r *MemoryRepository[T]) Delete(ctx context.Context, tc Context, id string) error {
	if err := checkRow(ctx, tc, "id", id); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.rows[tc.userID]
	if _, ok := m[id]; !ok {
		return fmt.Errorf("%w: id %q", ErrNotFound, id)
	}
	delete(m, id)
	if len(m) == 0 {
		delete(r.rows, tc.userID)
	}
	return nil
}

// List implements [Repository]: the tenant's values ordered by id.
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
