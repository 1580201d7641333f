package tenancy

import (
	"context"
	"fmt"
	"time"
)

// WatchlistEntry is one source a tenant watches. Slug identifies the source within the
// tenant and is the due-work WorkKey; Tier names the cadence tier (see cadence.Registry).
type WatchlistEntry struct {
	// UserID is the tenant that watches the source; it must be the Context's user.
	UserID string
	// Slug identifies the source within the tenant; it is the due-work WorkKey.
	Slug string
	// Tier names the cadence tier the source is polled on, such as "hot".
	Tier string
	// AddedAt is when the tenant added the source, as the host's now.
	AddedAt time.Time
}

// Watchlist is the tenant-scoped list of watched sources, deny-by-default like
// [Repository]. Every method returns [ErrNoTenant] for the zero Context and [ErrInvalidID]
// for a bad slug.
type Watchlist interface {
	// Add inserts or replaces the entry with e.Slug. An entry whose UserID is not the
	// Context's is refused with ErrForbidden, never rewritten; an empty Tier is ErrInvalidID.
	Add(ctx context.Context, tc Context, e WatchlistEntry) error
	// Remove deletes the tenant's entry slug, or returns ErrNotFound.
	Remove(ctx context.Context, tc Context, slug string) error
	// Get returns the tenant's entry slug, or ErrNotFound.
	Get(ctx context.Context, tc Context, slug string) (WatchlistEntry, error)
	// List returns the tenant's entries ordered by slug. The slice is the caller's.
	List(ctx context.Context, tc Context) ([]WatchlistEntry, error)
}

// MemoryWatchlist is the in-memory [Watchlist], safe for concurrent use; the zero value is
// an empty watchlist ready to use. It stores its entries in a [MemoryRepository] keyed by
// slug, so it inherits that isolation.
type MemoryWatchlist struct {
	repo MemoryRepository[WatchlistEntry]
}

var _ Watchlist = (*MemoryWatchlist)(nil)

// NewMemoryWatchlist returns an empty MemoryWatchlist.
func NewMemoryWatchlist() *MemoryWatchlist {
	return &MemoryWatchlist{}
}

// Add implements [Watchlist]. It checks, in order: the Context ([ErrNoTenant]), ctx, the
// slug ([ErrInvalidID]), the entry's UserID ([ErrForbidden]) and its Tier ([ErrInvalidID]);
// a refused entry writes nothing.
func (w *MemoryWatchlist) Add(ctx context.Context, tc Context, e WatchlistEntry) error {
	if err := checkRow(ctx, tc, "slug", e.Slug); err != nil {
		return err
	}
	if e.UserID != tc.userID {
		return fmt.Errorf("%w: entry %q names user %q, not the context's user", ErrForbidden, e.Slug, e.UserID)
	}
	if err := ValidateID("tier", e.Tier); err != nil {
		return err
	}
	return w.repo.put(ctx, tc, "slug", e.Slug, e)
}

// Remove implements [Watchlist].
func (w *MemoryWatchlist) Remove(ctx context.Context, tc Context, slug string) error {
	return w.repo.delete(ctx, tc, "slug", slug)
}

// Get implements [Watchlist].
func (w *MemoryWatchlist) Get(ctx context.Context, tc Context, slug string) (WatchlistEntry, error) {
	return w.repo.get(ctx, tc, "slug", slug)
}

// List implements [Watchlist].
func (w *MemoryWatchlist) List(ctx context.Context, tc Context) ([]WatchlistEntry, error) {
	return w.repo.List(ctx, tc)
}
