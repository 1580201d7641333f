package rotadynamo

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rotaworks/rota/tenancy"
)

// Watchlist is a tenancy.Watchlist on the table: each entry is an item in its tenant's
// partition, so every call of a tenant reads and writes that partition only, and a
// tenants index (one list per bucket) lets Tenants page through the users that have
// entries. OpenStores builds it; it is safe for concurrent use. AddedAt is kept to the
// nanosecond.
type Watchlist struct {
	d       *db
	buckets int
}

var _ tenancy.Watchlist = (*Watchlist)(nil)

// The attributes of a watch-list item (partition userPK(user), sort key watchSK(slug)).
const (
	attrWatchTier = "tr"
	attrAddedAt   = "ad"
)

// checkTenant refuses the zero Context first, then a done ctx, as the in-memory
// implementations of package tenancy do.
func checkTenant(ctx context.Context, tc tenancy.Context) error {
	if err := tc.Check(); err != nil {
		return err
	}
	return ctx.Err()
}

func slugNotFound(slug string) error {
	return fmt.Errorf("%w: slug %q", tenancy.ErrNotFound, slug)
}

func (w *Watchlist) item(e tenancy.WatchlistEntry) map[string]av {
	m := key(userPK(e.UserID), watchSK(e.Slug))
	m[attrWatchTier], m[attrAddedAt] = sv(e.Tier), tv(e.AddedAt)
	m[attrTenantsKey] = sv(tenantsKey(bucketOf(e.UserID, w.buckets)))
	m[attrTenantsSK] = sv(tenantsSK(e.UserID, e.Slug))
	return m
}

func readWatch(m map[string]av) (tenancy.WatchlistEntry, error) {
	it := &item{m: m}
	e := tenancy.WatchlistEntry{
		UserID: userOf(it.str(attrPK)), Slug: strings.TrimPrefix(it.str(attrSK), watchPrefix),
		Tier: it.str(attrWatchTier), AddedAt: norm(it.time(attrAddedAt)),
	}
	return e, it.err
}

// Add inserts or replaces the tenant's entry e.Slug: one write, after the Context, ctx and
// e are checked.
func (w *Watchlist) Add(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) error {
	if err := checkTenant(ctx, tc); err != nil {
		return err
	}
	if err := e.Validate(tc); err != nil {
		return err
	}
	return interpret(ctx, "Watchlist.Add", w.d.put(ctx, &dynamodb.PutItemInput{Item: w.item(e)}))
}

// AddMany inserts or replaces entries of one tenant, the last of a slug given twice
// winning. Every entry is checked before anything is written; then they go in batches of
// 25 writes, so a call that fails midway (ctx, connection) may have written some of them.
func (w *Watchlist) AddMany(ctx context.Context, tc tenancy.Context, entries []tenancy.WatchlistEntry) error {
	if err := checkTenant(ctx, tc); err != nil {
		return err
	}
	last := make(map[string]int, len(entries))
	for i, e := range entries {
		if err := e.Validate(tc); err != nil {
			return fmt.Errorf("entries[%d]: %w", i, err)
		}
		last[e.Slug] = i
	}
	var reqs []types.WriteRequest
	for i, e := range entries {
		if last[e.Slug] == i {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: w.item(e)}})
		}
	}
	return interpret(ctx, "Watchlist.AddMany", w.d.batchWrite(ctx, reqs))
}

// AddAll is AddMany for the entries of many tenants, each under the Context of its own
// UserID: every entry is checked before anything is written, then they go in batches of
// 25 writes, so a call that fails midway (ctx, connection) may have written some of them.
// A (UserID, Slug) given twice is written once, the last one winning.
func (w *Watchlist) AddAll(ctx context.Context, entries []tenancy.WatchlistEntry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	last := make(map[[2]string]int, len(entries))
	for i, e := range entries {
		tc, err := tenancy.NewContext(e.UserID)
		if err == nil {
			err = e.Validate(tc)
		}
		if err != nil {
			return fmt.Errorf("entries[%d]: %w", i, err)
		}
		last[[2]string{e.UserID, e.Slug}] = i
	}
	var reqs []types.WriteRequest
	for i, e := range entries {
		if last[[2]string{e.UserID, e.Slug}] == i {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: w.item(e)}})
		}
	}
	return interpret(ctx, "Watchlist.AddAll", w.d.batchWrite(ctx, reqs))
}

// Remove deletes the tenant's entry slug, or returns tenancy.ErrNotFound: one
// conditional delete.
func (w *Watchlist) Remove(ctx context.Context, tc tenancy.Context, slug string) error {
	if err := checkTenant(ctx, tc); err != nil {
		return err
	}
	if err := tenancy.ValidateID("slug", slug); err != nil {
		return err
	}
	var e expr
	cond := "attribute_exists(" + e.n(attrPK) + ")"
	err := w.d.delete(ctx, &dynamodb.DeleteItemInput{Key: key(userPK(tc.UserID()), watchSK(slug)),
		ConditionExpression: &cond, ExpressionAttributeNames: e.namesOrNil()})
	if conditionFailed(err) {
		return slugNotFound(slug)
	}
	return interpret(ctx, "Watchlist.Remove", err)
}

// Get returns the tenant's entry slug, or tenancy.ErrNotFound: one strongly consistent
// read.
func (w *Watchlist) Get(ctx context.Context, tc tenancy.Context, slug string) (tenancy.WatchlistEntry, error) {
	if err := checkTenant(ctx, tc); err != nil {
		return tenancy.WatchlistEntry{}, err
	}
	if err := tenancy.ValidateID("slug", slug); err != nil {
		return tenancy.WatchlistEntry{}, err
	}
	m, err := w.d.get(ctx, key(userPK(tc.UserID()), watchSK(slug)), true)
	if err != nil {
		return tenancy.WatchlistEntry{}, interpret(ctx, "Watchlist.Get", err)
	}
	if m == nil {
		return tenancy.WatchlistEntry{}, slugNotFound(slug)
	}
	return readWatch(m)
}

// List returns the tenant's entries in slug order: a strongly consistent query of its
// partition's watch-list items.
func (w *Watchlist) List(ctx context.Context, tc tenancy.Context) ([]tenancy.WatchlistEntry, error) {
	if err := checkTenant(ctx, tc); err != nil {
		return nil, err
	}
	var out []tenancy.WatchlistEntry
	err := w.d.pageRange(ctx, userPK(tc.UserID()), watchPrefix, watchEnd, 1000, func(m map[string]av) (bool, error) {
		e, err := readWatch(m)
		out = append(out, e)
		return true, err
	})
	if err != nil {
		return nil, interpret(ctx, "Watchlist.List", err)
	}
	return out, nil
}

// GetMany answers each lookup as Get would under the lookup's own Context: one batched,
// strongly consistent read of the items the lookups name, each keyed by its own tenant.
func (w *Watchlist) GetMany(ctx context.Context, lookups []tenancy.Lookup) ([]tenancy.WatchlistEntry, []error, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	entries := make([]tenancy.WatchlistEntry, len(lookups))
	errs := make([]error, len(lookups))
	var keys []map[string]av
	seen := map[[2]string]bool{}
	for i, l := range lookups {
		if errs[i] = l.Tenant.Check(); errs[i] != nil {
			continue
		}
		if errs[i] = tenancy.ValidateID("slug", l.Slug); errs[i] != nil {
			continue
		}
		errs[i] = slugNotFound(l.Slug) // until its item comes back
		if k := [2]string{l.Tenant.UserID(), l.Slug}; !seen[k] {
			seen[k] = true
			keys = append(keys, key(userPK(k[0]), watchSK(k[1])))
		}
	}
	items, err := w.d.batchGet(ctx, keys)
	if err != nil {
		return nil, nil, interpret(ctx, "Watchlist.GetMany", err)
	}
	found := map[[2]string]tenancy.WatchlistEntry{}
	for _, m := range items {
		e, err := readWatch(m)
		if err != nil {
			return nil, nil, err
		}
		found[[2]string{e.UserID, e.Slug}] = e
	}
	for i, l := range lookups {
		if errs[i] == nil || l.Tenant.Check() != nil {
			continue
		}
		if e, ok := found[[2]string{l.Tenant.UserID(), l.Slug}]; ok {
			entries[i], errs[i] = e, nil
		}
	}
	return entries, errs, nil
}

// Tenants returns, in byte order, up to limit IDs of users with at least one entry, after
// after. It reads the tenants index, eventually consistent: a query of one item per bucket
// to start, then one per user it returns, each jumping past that user's entries, so it
// costs what it returns whatever the lists hold.
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
	heads := make([]string, w.buckets) // each bucket's next user; "" when it has none
	err := parallel(ctx, w.buckets, func(ctx context.Context, b int) error {
		var err error
		heads[b], err = w.nextTenant(ctx, b, after)
		return err
	})
	var out []string
	for err == nil && len(out) < limit {
		best := -1
		for b, u := range heads {
			if u != "" && (best < 0 || u < heads[best]) {
				best = b
			}
		}
		if best < 0 {
			break
		}
		out = append(out, heads[best])
		heads[best], err = w.nextTenant(ctx, best, heads[best])
	}
	if err != nil {
		return nil, interpret(ctx, "Watchlist.Tenants", err)
	}
	return out, nil
}

// nextTenant returns the first user of bucket b's tenants list after after ("" for the
// first), or "" when there is none: a query of one item.
func (w *Watchlist) nextTenant(ctx context.Context, b int, after string) (string, error) {
	var e expr
	cond := e.n(attrTenantsKey) + " = " + e.v(sv(tenantsKey(b)))
	if after != "" {
		cond += " AND " + e.n(attrTenantsSK) + " > " + e.v(sv(tenantsAfter(after)))
	}
	out, err := w.d.query(ctx, &dynamodb.QueryInput{IndexName: ptr(idxTenants), KeyConditionExpression: &cond,
		Limit: ptr(int32(1)), ExpressionAttributeNames: e.namesOrNil(), ExpressionAttributeValues: e.valuesOrNil()})
	if err != nil || len(out.Items) == 0 {
		return "", err
	}
	return userOf((&item{m: out.Items[0]}).str(attrPK)), nil
}
