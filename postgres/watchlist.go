package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/tenancy"
)

// Watchlist is a tenancy.Watchlist on PostgreSQL: the watch lists of every replica in one
// table, rota_watchlist, keyed by (user_id, slug). Like the in-memory one it is
// deny-by-default: every statement filters by the Context's user, so no argument reaches
// another tenant's rows. Each call is one round trip and one statement. List reads the
// tenant's whole list, ordered by slug; AddMany writes many entries of one tenant, AddAll
// many tenants' at once; GetMany reads many tenants' entries; Tenants pages through the
// tenants by a loose scan of the primary key. AddedAt is stored to the microsecond.
type Watchlist struct {
	pool *pgxpool.Pool
}

var _ tenancy.Watchlist = (*Watchlist)(nil)

// NewWatchlist returns the Watchlist over pool's schema, which Migrate must have created.
func NewWatchlist(pool *pgxpool.Pool) *Watchlist {
	return &Watchlist{pool: pool}
}

// checkTenant refuses the zero Context first, then a done ctx, as the in-memory
// implementations of package tenancy do.
func checkTenant(ctx context.Context, tc tenancy.Context) error {
	if err := tc.Check(); err != nil {
		return err
	}
	return ctx.Err()
}

// checkSlug is checkTenant, then the slug.
func checkSlug(ctx context.Context, tc tenancy.Context, slug string) error {
	if err := checkTenant(ctx, tc); err != nil {
		return err
	}
	return tenancy.ValidateID("slug", slug)
}

func slugNotFound(slug string) error {
	return fmt.Errorf("%w: slug %q", tenancy.ErrNotFound, slug)
}

// interpretTenancy is interpret for the tenant-scoped stores: a value the server refuses is
// tenancy.ErrInvalidID.
func interpretTenancy(ctx context.Context, op string, err error) error {
	return interpretAs(ctx, op, tenancy.ErrInvalidID, err)
}

// Add implements [tenancy.Watchlist]: after the Context and ctx it checks e with
// [tenancy.WatchlistEntry.Validate], before anything is sent, then inserts or replaces the
// tenant's entry e.Slug.
func (w *Watchlist) Add(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) error {
	if err := checkTenant(ctx, tc); err != nil {
		return err
	}
	if err := e.Validate(tc); err != nil {
		return err
	}
	_, err := w.pool.Exec(ctx, `
		INSERT INTO rota_watchlist (user_id, slug, tier, added_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (user_id, slug) DO UPDATE SET tier = EXCLUDED.tier, added_at = EXCLUDED.added_at`,
		tc.UserID(), e.Slug, e.Tier, e.AddedAt)
	return interpretTenancy(ctx, "Watchlist.Add", err)
}

// AddMany implements [tenancy.Watchlist]: after the Context and ctx it checks every entry
// with [tenancy.WatchlistEntry.Validate] before anything is sent — one refused entry
// refuses the call, naming its index, and writes nothing — then inserts or replaces them
// all in one statement. A slug given twice is written once, the last one winning. The
// entries are written in slug order, so that two calls for one tenant lock its rows in
// the same order.
func (w *Watchlist) AddMany(ctx context.Context, tc tenancy.Context, entries []tenancy.WatchlistEntry) error {
	if err := checkTenant(ctx, tc); err != nil {
		return err
	}
	last := make(map[string]int, len(entries)) // slug → the index of its last entry
	for i, e := range entries {
		if err := e.Validate(tc); err != nil {
			return fmt.Errorf("entries[%d]: %w", i, err)
		}
		last[e.Slug] = i
	}
	if len(entries) == 0 {
		return nil
	}
	slugs := make([]string, 0, len(last))
	for slug := range last {
		slugs = append(slugs, slug)
	}
	slices.Sort(slugs)
	tiers, added := make([]string, len(slugs)), make([]time.Time, len(slugs))
	for i, slug := range slugs {
		e := entries[last[slug]]
		tiers[i], added[i] = e.Tier, e.AddedAt
	}
	_, err := w.pool.Exec(ctx, `
		INSERT INTO rota_watchlist (user_id, slug, tier, added_at)
		SELECT $1, k.slug, k.tier, k.added_at
		FROM unnest($2::text[], $3::text[], $4::timestamptz[]) WITH ORDINALITY AS k(slug, tier, added_at, ord)
		ORDER BY k.ord
		ON CONFLICT (user_id, slug) DO UPDATE SET tier = EXCLUDED.tier, added_at = EXCLUDED.added_at`,
		tc.UserID(), slugs, tiers, added)
	return interpretTenancy(ctx, "Watchlist.AddMany", err)
}

// AddAll implements [tenancy.Watchlist]: after ctx it checks every entry under its
// UserID's Context with [tenancy.WatchlistEntry.Validate] before anything is sent — one
// refused entry refuses the call, naming its index, and writes nothing — then inserts or
// replaces them all in one statement, in (user, slug) order so that concurrent calls lock
// rows in one order. A (user, slug) given twice is written once, the last one winning.
func (w *Watchlist) AddAll(ctx context.Context, entries []tenancy.WatchlistEntry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	type key struct{ user, slug string }
	last := make(map[key]int, len(entries)) // the index of each key's last entry
	for i, e := range entries {
		tc, err := tenancy.NewContext(e.UserID)
		if err == nil {
			err = e.Validate(tc)
		}
		if err != nil {
			return fmt.Errorf("entries[%d]: %w", i, err)
		}
		last[key{e.UserID, e.Slug}] = i
	}
	if len(last) == 0 {
		return nil
	}
	keys := slices.SortedFunc(maps.Keys(last), func(a, b key) int { return cmp.Or(strings.Compare(a.user, b.user), strings.Compare(a.slug, b.slug)) })
	users, slugs, tiers, added := make([]string, len(keys)), make([]string, len(keys)), make([]string, len(keys)), make([]time.Time, len(keys))
	for i, k := range keys {
		e := entries[last[k]]
		users[i], slugs[i], tiers[i], added[i] = e.UserID, e.Slug, e.Tier, e.AddedAt
	}
	_, err := w.pool.Exec(ctx, `
		INSERT INTO rota_watchlist (user_id, slug, tier, added_at)
		SELECT k.user_id, k.slug, k.tier, k.added_at
		FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[]) WITH ORDINALITY AS k(user_id, slug, tier, added_at, ord)
		ORDER BY k.ord
		ON CONFLICT (user_id, slug) DO UPDATE SET tier = EXCLUDED.tier, added_at = EXCLUDED.added_at`,
		users, slugs, tiers, added)
	return interpretTenancy(ctx, "Watchlist.AddAll", err)
}

// sqlTenants is Tenants' read ($1 after, $2 limit): a loose index scan of rota_watchlist's
// primary key, which jumps from one user's first entry to the next user's, so it reads
// one index entry per tenant it returns, whatever their lists hold.
const sqlTenants = `
WITH RECURSIVE t(user_id) AS (
	(SELECT w.user_id FROM rota_watchlist w WHERE w.user_id > $1 ORDER BY w.user_id LIMIT 1)
	UNION ALL
	SELECT (SELECT w.user_id FROM rota_watchlist w WHERE w.user_id > t.user_id ORDER BY w.user_id LIMIT 1)
	FROM t WHERE t.user_id IS NOT NULL
)
SELECT t.user_id FROM t WHERE t.user_id IS NOT NULL LIMIT $2`

// Tenants implements [tenancy.Watchlist]: up to limit user IDs with at least one entry,
// after after, in byte order. It is the operator's and the start-up sync's cross-tenant
// read, and lists IDs only. One statement (sqlTenants), which reads one index entry per
// tenant it returns.
func (w *Watchlist) Tenants(ctx context.Context, after string, limit int) ([]string, error) {
	if after != "" {
		if err := tenancy.ValidateID("after", after); err != nil {
			return nil, err
		}
	}
	if limit < 1 || limit > tenancy.MaxTenantsPage {
		return nil, fmt.Errorf("%w: limit must be in [1, %d], got %d", tenancy.ErrInvalidID, tenancy.MaxTenantsPage, limit)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows, err := w.pool.Query(ctx, sqlTenants, after, limit)
	if err != nil {
		return nil, interpretTenancy(ctx, "Watchlist.Tenants", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, interpretTenancy(ctx, "Watchlist.Tenants", err)
	}
	return ids, nil
}

// Remove implements [tenancy.Watchlist].
func (w *Watchlist) Remove(ctx context.Context, tc tenancy.Context, slug string) error {
	if err := checkSlug(ctx, tc, slug); err != nil {
		return err
	}
	tag, err := w.pool.Exec(ctx, `DELETE FROM rota_watchlist WHERE user_id = $1 AND slug = $2`, tc.UserID(), slug)
	if err != nil {
		return interpretTenancy(ctx, "Watchlist.Remove", err)
	}
	if tag.RowsAffected() == 0 {
		return slugNotFound(slug)
	}
	return nil
}

// Get implements [tenancy.Watchlist].
func (w *Watchlist) Get(ctx context.Context, tc tenancy.Context, slug string) (tenancy.WatchlistEntry, error) {
	if err := checkSlug(ctx, tc, slug); err != nil {
		return tenancy.WatchlistEntry{}, err
	}
	e := tenancy.WatchlistEntry{UserID: tc.UserID(), Slug: slug}
	err := w.pool.QueryRow(ctx, `SELECT tier, added_at FROM rota_watchlist WHERE user_id = $1 AND slug = $2`,
		tc.UserID(), slug).Scan(&e.Tier, &e.AddedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return tenancy.WatchlistEntry{}, slugNotFound(slug)
	}
	if err != nil {
		return tenancy.WatchlistEntry{}, interpretTenancy(ctx, "Watchlist.Get", err)
	}
	return e, nil
}

// List implements [tenancy.Watchlist]: one query that reads the tenant's entries in
// primary-key order, which is slug order byte by byte, as the in-memory Watchlist sorts.
func (w *Watchlist) List(ctx context.Context, tc tenancy.Context) ([]tenancy.WatchlistEntry, error) {
	if err := checkTenant(ctx, tc); err != nil {
		return nil, err
	}
	rows, err := w.pool.Query(ctx, `SELECT slug, tier, added_at FROM rota_watchlist WHERE user_id = $1 ORDER BY slug`, tc.UserID())
	if err != nil {
		return nil, interpretTenancy(ctx, "Watchlist.List", err)
	}
	es, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (tenancy.WatchlistEntry, error) {
		e := tenancy.WatchlistEntry{UserID: tc.UserID()}
		err := row.Scan(&e.Slug, &e.Tier, &e.AddedAt)
		return e, err
	})
	if err != nil {
		return nil, interpretTenancy(ctx, "Watchlist.List", err)
	}
	return es, nil
}

// sqlGetMany is GetMany's read ($1 users, $2 slugs): one probe of rota_watchlist's primary
// key per lookup, in a nested loop that sqlPlanSettings pins, so that its cost follows the
// lookups, not the watchlist (with hash joins allowed, the planner may read the whole table
// for a few thousand lookups).
const sqlGetMany = `
SELECT k.n, w.tier, w.added_at
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(user_id, slug, n)
JOIN rota_watchlist w ON w.user_id = k.user_id AND w.slug = k.slug`

// readMany reads sqlGetMany's answer from br, after the settings, into entries and errs:
// row n answers the lookup at[n-1], whose user and slug are users[n-1] and slugs[n-1]. A
// lookup no row answers is tenancy.ErrNotFound. The tiers, which repeat, are read as one
// string each.
func readMany(br pgx.BatchResults, entries []tenancy.WatchlistEntry, errs []error, users, slugs []string, at []int) error {
	if _, err := br.Exec(); err != nil {
		return err
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	found := make([]bool, len(at))
	var tiers internSet
	for rows.Next() {
		var (
			n  int64
			we tenancy.WatchlistEntry
		)
		if err := rows.Scan(&n, nil, &we.AddedAt); err != nil {
			return err
		}
		if n < 1 || n > int64(len(at)) {
			return fmt.Errorf("the server answered lookup %d of %d", n, len(at))
		}
		we.UserID, we.Slug, we.Tier = users[n-1], slugs[n-1], tiers.of(rows.RawValues()[1])
		i := at[n-1]
		entries[i], errs[i], found[n-1] = we, nil, true
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for n, ok := range found {
		if !ok {
			errs[at[n]] = slugNotFound(slugs[n])
		}
	}
	return nil
}

// GetMany implements [tenancy.Watchlist] in one query, whatever the number of lookups:
// the (user, slug) pair of each lookup, taken from its own Context, is joined to
// rota_watchlist by primary key, so a lookup can match only its own tenant's row. A zero
// Context or a bad slug is that lookup's error, found before anything is sent; a call
// whose lookups are all refused sends nothing.
func (w *Watchlist) GetMany(ctx context.Context, lookups []tenancy.Lookup) ([]tenancy.WatchlistEntry, []error, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	entries := make([]tenancy.WatchlistEntry, len(lookups))
	errs := make([]error, len(lookups))
	users := make([]string, 0, len(lookups))
	slugs := make([]string, 0, len(lookups))
	at := make([]int, 0, len(lookups)) // the lookup each sent pair answers
	for i, l := range lookups {
		if err := l.Tenant.Check(); err != nil {
			errs[i] = err
			continue
		}
		if err := tenancy.ValidateID("slug", l.Slug); err != nil {
			errs[i] = err
			continue
		}
		users, slugs, at = append(users, l.Tenant.UserID()), append(slugs, l.Slug), append(at, i)
	}
	if len(at) == 0 {
		return entries, errs, nil
	}
	b := &pgx.Batch{}
	b.Queue(sqlPlanSettings)
	b.Queue(sqlGetMany, users, slugs)
	br := w.pool.SendBatch(ctx, b)
	err := readMany(br, entries, errs, users, slugs, at)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, interpretTenancy(ctx, "Watchlist.GetMany", err)
	}
	return entries, errs, nil
}
