package tenancy

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/rotaworks/rota/internal/vocab"
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
	if !vocab.ValidTime(e.AddedAt) {
		return vocab.Time(ErrInvalidID, fmt.Sprintf("entry %q AddedAt", e.Slug), e.AddedAt)
	}
	return nil
}

// Watchlist is the tenant-scoped list of watched sources, deny-by-default like
// [Repository]. Every method returns [ErrNoTenant] for the zero Context and [ErrInvalidID]
// for a bad slug. GetMany, AddAll and Tenants are the cross-tenant exceptions: GetMany
// answers each lookup under the lookup's own Context, AddAll writes each entry under its
// own UserID's, and Tenants lists user IDs only, for an operator or a start-up sync.
type Watchlist interface {
	// Add inserts or replaces the entry with e.Slug. It refuses what [WatchlistEntry.Validate]
	// refuses: an entry whose UserID is not the Context's is ErrForbidden, never rewritten.
	Add(ctx context.Context, tc Context, e WatchlistEntry) error
	// AddMany is Add for many entries of one tenant, all or nothing: one entry that Validate
	// refuses refuses the call, naming the entry's index, and nothing is written. A slug
	// given twice is written once, the last one winning.
	AddMany(ctx context.Context, tc Context, entries []WatchlistEntry) error
	// AddAll is AddMany for the entries of many tenants at once, each under the Context
	// of its own UserID: the cross-tenant write of a seeding or an import, one call for
	// every tenant's sources (one statement on a database). All or nothing: an entry that
	// Validate refuses under its UserID's Context — an invalid UserID among them — refuses
	// the call, naming its index, and nothing is written. A (UserID, Slug) given twice is
	// written once, the last one winning.
	AddAll(ctx context.Context, entries []WatchlistEntry) error
	// Remove deletes the tenant's entry slug, or returns ErrNotFound.
	Remove(ctx context.Context, tc Context, slug string) error
	// Get returns the tenant's entry slug, or ErrNotFound.
	Get(ctx context.Context, tc Context, slug string) (WatchlistEntry, error)
	// GetMany is Get for each lookup under the lookup's own Tenant, so each reads only its
	// own tenant's entry. When err is nil, entries and errs hold one element per lookup,
	// in order: errs[i] is nil when entries[i] was found, and otherwise what Get would
	// return — ErrNoTenant for the zero Context, ErrInvalidID for a bad slug, ErrNotFound
	// (the same text) for an entry the tenant does not hold, whoever else does — with
	// entries[i] the zero entry. A lookup given twice is answered twice. err is the
	// call's own failure, a done ctx or a broken connection, and then entries and errs
	// are nil. The slices are the caller's.
	GetMany(ctx context.Context, lookups []Lookup) (entries []WatchlistEntry, errs []error, err error)
	// List returns all the tenant's entries ordered by slug (byte order). The slice is the
	// caller's.
	List(ctx context.Context, tc Context) ([]WatchlistEntry, error)
	// Tenants returns, in byte order, up to limit IDs of users that have at least one entry
	// and sort after after ("" for the first page); after must be "" or a valid ID, and
	// limit in [1, MaxTenantsPage] ([ErrInvalidID] otherwise). An adapter over an index on
	// user IDs makes it cost what it returns.
	Tenants(ctx context.Context, after string, limit int) ([]string, error)
}

// MaxTenantsPage is the largest page [Watchlist.Tenants] returns.
const MaxTenantsPage = 10000

// Lookup names one entry for [Watchlist.GetMany]: the entry Slug of the tenant Tenant.
type Lookup struct {
	Tenant Context
	Slug   string
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

// AddMany implements [Watchlist]: every entry is checked with [WatchlistEntry.Validate]
// before any is written, all under one lock.
func (w *MemoryWatchlist) AddMany(ctx context.Context, tc Context, entries []WatchlistEntry) error {
	if err := checkCall(ctx, tc); err != nil {
		return err
	}
	for i, e := range entries {
		if err := e.Validate(tc); err != nil {
			return fmt.Errorf("entries[%d]: %w", i, err)
		}
	}
	if len(entries) == 0 {
		return nil
	}
	w.repo.mu.Lock()
	defer w.repo.mu.Unlock()
	rows := w.repo.tenantRows(tc.userID)
	for _, e := range entries {
		rows[e.Slug] = e
	}
	return nil
}

// AddAll implements [Watchlist]: every entry is checked under its UserID's Context
// before any is written, all under one lock.
func (w *MemoryWatchlist) AddAll(ctx context.Context, entries []WatchlistEntry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for i, e := range entries {
		tc, err := NewContext(e.UserID)
		if err == nil {
			err = e.Validate(tc)
		}
		if err != nil {
			return fmt.Errorf("entries[%d]: %w", i, err)
		}
	}
	w.repo.mu.Lock()
	defer w.repo.mu.Unlock()
	for _, e := range entries {
		w.repo.tenantRows(e.UserID)[e.Slug] = e
	}
	return nil
}

// Tenants implements [Watchlist]. It walks and sorts every tenant: O(t log t) for t
// tenants, fine for a start-up sync, not for a page an operator reloads.
func (w *MemoryWatchlist) Tenants(ctx context.Context, after string, limit int) ([]string, error) {
	if err := checkPage(ctx, after, limit); err != nil {
		return nil, err
	}
	w.repo.mu.RLock()
	ids := make([]string, 0, min(limit, len(w.repo.rows)))
	for id, rows := range w.repo.rows {
		if id > after && len(rows) > 0 {
			ids = append(ids, id)
		}
	}
	w.repo.mu.RUnlock()
	slices.Sort(ids)
	return ids[:min(limit, len(ids)):min(limit, len(ids))], nil
}

// checkPage checks the arguments of [Watchlist.Tenants], then ctx.
func checkPage(ctx context.Context, after string, limit int) error {
	if after != "" {
		if err := ValidateID("after", after); err != nil {
			return err
		}
	}
	if limit < 1 || limit > MaxTenantsPage {
		return fmt.Errorf("%w: limit must be in [1, %d], got %d", ErrInvalidID, MaxTenantsPage, limit)
	}
	return ctx.Err()
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

// GetMany implements [Watchlist]: one read lock for all the lookups, a map lookup each.
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
