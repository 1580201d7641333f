// Package tenancy holds the tenant boundary: a validated tenant identity, deny-by-default
// storage scoped to it, the watch list of sources each tenant polls, and plans.
//
// # The model
//
// A [Context] is a tenant's validated identity, made by [NewContext]. Every tenant-scoped
// call takes one and reads and writes only that tenant's rows. There is no method that lists
// or touches another tenant's rows; asking for one gives [ErrNotFound] with the same text as
// a row that exists for nobody, so a caller cannot even learn that it exists. The zero
// Context is refused everywhere with [ErrNoTenant] — before any other check — so a forgotten
// identity fails loudly instead of reading or writing as nobody.
//
// IDs (user IDs, row IDs, slugs, tier names) are validated by [ValidateID]: non-empty, at
// most [MaxIDLength] bytes, valid UTF-8, no control characters; anything else is
// [ErrInvalidID] with the field named. IDs are compared byte for byte: "Alice" and "alice"
// are two tenants.
//
// # Where to start
//
//   - [Repository] is generic tenant-scoped storage; [NewMemoryRepository] is the in-memory
//     one. Put inserts or replaces, Get and Delete answer ErrNotFound for a missing row,
//     List returns the tenant's rows ordered by id.
//   - [Watchlist] holds the sources a tenant watches ([WatchlistEntry]); its slug is the
//     due-work WorkKey and its Tier a cadence tier name. [NewMemoryWatchlist] is the
//     in-memory one. Add refuses an entry that names another user with [ErrForbidden]: it
//     is never rewritten to the caller's user.
//   - [Entitlements] tells a tenant's [PlanID] (free, plus, pro); [NewMemoryEntitlements]
//     is the in-memory one. Which dispatch lane a plan buys is wiring in package bridge:
//     tenancy does not know lanes.
//
// The in-memory implementations are safe for concurrent use, and their zero values are
// ready to use.
//
// # The one exception
//
// A fair dispatcher must see every tenant's next due time at once, so the due-work index
// (package duework) has cross-tenant reads for the dispatcher. That is its own storage
// surface with a fixed row that carries scheduling metadata only; nothing in this package
// is cross-tenant.
//
// # Choices this package makes
//
//   - The order of checks is: the Context, then ctx, then the ids, then the rest; the first
//     failure is returned and nothing is written.
//   - Repository.Delete and Watchlist.Remove answer ErrNotFound for a missing row, so a
//     caller can tell a removal from a no-op; a row of another tenant is missing too.
//   - Watchlist.Add checks the entry's Tier as an ID (non-empty, no control characters) but
//     not against a cadence registry: which tiers exist is the host's configuration, checked
//     where the tier is used.
//   - A tenant never given a plan is on [PlanFree]; SetPlan refuses any other PlanID with
//     [ErrInvalidPlan].
package tenancy
