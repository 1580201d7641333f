// Package tenancy holds the tenant boundary: a validated tenant identity, deny-by-default
// storage scoped to it, the watch list of sources each tenant polls, and plans.
//
// # The model
//
// A [Context] is a tenant's validated identity, made by [NewContext]. Every tenant-scoped
// call takes one and reads and writes only that tenant's rows. No method lists or touches
// another tenant's rows; asking for one gives [ErrNotFound] with the same text as a row that
// exists for nobody, so a caller cannot even learn that it exists. The zero Context is
// refused everywhere with [ErrNoTenant], before any other check, so a forgotten identity
// fails loudly instead of reading or writing as nobody. After the Context a call checks its
// ctx, then its IDs, then the rest; the first failure is returned and nothing is written.
//
// # Where to start
//
//   - [Watchlist] holds the sources a tenant watches ([WatchlistEntry]); the slug is the
//     due-work WorkKey and the Tier a cadence tier name, checked as an ID but not against a
//     registry (which tiers exist is the host's configuration). Add refuses an entry that
//     names another user with [ErrForbidden]: it is never rewritten to the caller's user.
//     AddMany writes many entries of one tenant, all or nothing: one bad entry refuses
//     the call, naming its index. GetMany reads the entries of many tenants in one call,
//     each [Lookup] under its own Context, so the boundary holds lookup by lookup — one
//     of another tenant's entries is that lookup's ErrNotFound, a zero Context its
//     ErrNoTenant — and only a done ctx or a broken connection fails the call; a
//     dispatcher's worker pool reads a batch of items so. Tenants pages through the IDs
//     of the users that hold entries, for an operator or a start-up sync: it lists IDs
//     only, never an entry.
//   - [Entitlements] tells a tenant's [PlanID]. Plans are the host's: any valid ID is a
//     plan, such as "pro" or "enterprise". A tenant never given a plan is on [PlanFree]. Which dispatch lane and limits a plan buys is
//     wiring in package bridge.
//   - [Repository] is generic tenant-scoped storage: Put inserts or replaces, List returns
//     the tenant's rows ordered by id.
//
// Delete and Remove answer ErrNotFound for a missing row, so a caller can tell a removal
// from a no-op. [NewMemoryWatchlist], [NewMemoryEntitlements] and [NewMemoryRepository] are
// the in-memory implementations: safe for concurrent use, zero values ready to use; a
// single-row call costs one map lookup, GetMany one per lookup under one lock, AddMany one
// per entry under one lock, and List sorts the tenant's n rows in O(n log n), whatever
// other tenants hold; Tenants sorts every tenant's ID, O(t log t). The postgres module
// implements Watchlist and Entitlements for services that run on several machines; package
// tenancytest is the conformance suite every implementation runs.
//
// # IDs
//
// User IDs, slugs, row IDs and tier names are checked by [ValidateID]: non-empty, at most
// [MaxIDLength] bytes, valid UTF-8, no control or format characters (such as a zero-width
// space or a bidi control) and no white space at either end. Anything else is
// [ErrInvalidID], naming the field, the value and the offending character. A [PlanID] is
// Valid by the same rules, and SetPlan refuses one that is not with [ErrInvalidPlan].
//
// IDs are compared byte for byte and never normalised: "Alice" and "alice" are two tenants,
// and so are "José" written with a composed é (U+00E9) and with e followed by a combining
// acute accent (U+0065 U+0301), which look the same. A host that takes IDs from people
// should normalise them to NFC before calling NewContext or storing a slug, for example
// with norm.NFC.String from golang.org/x/text/unicode/norm (this package stays on the
// standard library), and fold case if its users expect "Alice" to be "alice".
//
// # The one exception
//
// A fair dispatcher must see every tenant's next due time at once, so the due-work index
// (package duework) reads across tenants for the dispatcher. That is its own storage, whose
// rows carry scheduling metadata only. In this package only Watchlist.GetMany, which
// answers each lookup under its own Context, and Watchlist.Tenants, which lists user IDs
// and nothing else, read across tenants.
package tenancy
