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
	// AddedAt is when the tenant added the source, as the host's now. It must lie in
	// years 1 to 9999 UTC.
	AddedAt time.Time
}

// Validate checks e for [Watchlist.Add] on behalf of tc and returns the first failure, in
// this order: the zero Context ([ErrNoTenant]), the slug ([ErrInvalidID]), a UserID that is
// not tc's ([ErrForbidden]), the tier ([ErrInvalidID]), and an AddedAt outside years 1 to
// 9999 UTC ([ErrInvalidID]; a zero AddedAt is accepted). Watchlist implementations call it
// after checking ctx, so that every one refuses exactly what the in-memory one refuses.
func (e WatchlistEntry) Validate(tc Context) error {
	if err := tc.Check(); err != nil {
		return err
	}
	if err := ValidateID("slug", e.Slug); err != nil {
		return err
	}
	if e.UserID != tc.userID {
		return fmt.Errorf("%w: entry %q names user %q, not the context's user", ErrForbidden, e.Slug, e.UserID)
	}
	if err := ValidateID("tier", e.Tier); err != nil {
		return err
	}
	if y := e.AddedAt.UTC().Year(); y < 1 || y > 9999 {
		return fmt.Errorf("%w: entry %q AddedAt %s is outside years 1 to 9999 UTC",
			ErrInvalidID, e.Slug, e.AddedAt.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// Watchlist is the tenant-scoped list of watched sources, deny-by-default like
// [Repository]. Every method returns [ErrNoTenant] for the zero Context and [ErrInvalidID]
// for a bad slug.
type Watchlist interface {
	// Add inserts or replaces the entry with e.Slug. It refuses what [WatchlistEntry.Validate]
	// refuses: an entry whose UserID is not the Context's is ErrForbidden, never rewritten.
	Add(ctx context.Context, tc Context, e WatchlistEntry) error
	// Remove deletes the tenant's entry slug, or returns ErrNotFound.
	Remove(ctx context.Context, tc Context, slug string) error
	// Get returns the tenant's entry slug, or ErrNotFound.
	Get(ctx context.Context, tc Context, slug string) (WatchlistEntry, error)
	// List returns all the tenant's entries ordered by slug (byte order). The slice is the
	// caller's.
	List(ctx context.Context, tc Context) ([]WatchlistEntry, error)
}

// Lookup names one entry for [BatchGetter.GetMany]: the entry Slug of the tenant Tenant.
type Lookup struct {
	Tenant Context
	Slug   string
}

// BatchGetter is an optional [Watchlist] capability: reading the entries of many tenants
// in one call. Package bridge's Runner uses it, when its Watchlist has it, to read the
// entries of a cycle's items at once instead of with one Get each.
type BatchGetter interface {
	// GetMany is Get for each lookup under the lookup's own Tenant, so each reads only its
	// own tenant's entry. When err is nil, entries and errs hold one element per lookup,
	// in order: errs[i] is nil when entries[i] was found, and otherwise what Get would
	// return — ErrNoTenant for the zero Context, ErrInvalidID for a bad slug, ErrNotFound
	// (the same text) for an entry the tenant does not hold, whoever else does — with
	// entries[i] the zero entry. A lookup given twice is answered twice. err is the
	// call's own failure, a done ctx or a broken connection, and then entries and errs
	// are nil. The slices are the caller's.
	GetMany(ctx context.Context, lookups []Lookup) (entries []WatchlistEntry, errs []error, err error)
}

// MemoryWatchlist is the in-memory [Watchlist], safe for concurrent use; the zero value is
// an empty watchlist ready to use. It stores its entries in a [MemoryRepository] keyed by
// slug, so it inherits that isolation.
type MemoryWatchlist struct {
	repo MemoryRepository[WatchlistEntry]
}

var (
	_ Watchlist   = (*MemoryWatchlist)(nil)
	_ BatchGetter = (*MemoryWatchlist)(nil)
)

// NewMemoryWatchlist returns an empty MemoryWatchlist.
func NewMemoryWatchlist() *MemoryWatchlist {
	return &MemoryWatchlist{}
}

// Add implements [Watchlist]: after the Context and ctx it checks e with
// [WatchlistEntry.Validate]; a refused entry writes nothing.
func (w *MemoryWatchlist) Add(ctx context.Context, tc Context, e WatchlistEntry) error {
	if err := checkCall(ctx, tc); err != nil {
		return err
	}
	if err := e.Validate(tc); err != nil {
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

// GetMany implements [BatchGetter]: one read lock for all the lookups, a map lookup each.
func (w *MemoryWatchlist) GetMany(ctx context.Context, lookups []Lookup) ([]WatchlistEntry, []error, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	entries := make([]WatchlistEntry, len(lookups))
	errs := make([]error, len(lookups))
	w.repo.mu.RLock()
	defer w.repo.mu.RUnlock()
	for i, l := range lookups {
		if err := l.Tenant.Check(); err != nil {
			errs[i] = err
			continue
		}
		if err := ValidateID("slug", l.Slug); err != nil {
			errs[i] = err
			continue
		}
		e, ok := w.repo.rows[l.Tenant.userID][l.Slug]
		if !ok {
			errs[i] = notFound("slug", l.Slug)
			continue
		}
		entries[i] = e
	}
	return entries, errs, nil
}
