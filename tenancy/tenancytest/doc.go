// Package tenancytest is the conformance suite for implementations of tenancy.Watchlist,
// tenancy.Entitlements and tenancy.Repository.
//
// # Use
//
// Call the Run function of the interface from a test of your implementation, with a factory
// that returns a fresh, empty one on every call:
//
//	func TestWatchlistConformance(t *testing.T) {
//		tenancytest.RunWatchlist(t, func(t *testing.T) tenancy.Watchlist { return newMyWatchlist(t) })
//	}
//
// Each Run runs one subtest per rule (see Rules); a failure names the rule it breaks. The
// factory is called once per subtest, once per tenant pair in the cross-tenant rules and
// once per generated sequence of the state-machine rule (rapid's -rapid.checks of them,
// 100 by default), always with the enclosing subtest's *testing.T, so cleanups registered
// on it run when that subtest ends. An implementation backed by a server should make each
// call cheap — empty its tables rather than create a database — and must not let one call
// see another's rows. RunEntitlements needs a SetPlan besides Plan.
//
// # What it checks
//
// The deny-by-default boundary, attacked by a second tenant whose ID would meet the
// first's in a careless store: joined into one key with "/", compared without case, after
// Unicode normalisation or with LIKE, or as a prefix. That tenant's Get, Remove and Delete
// of the first's rows must answer exactly as they did before those rows existed (the same
// ErrNotFound text); its Add and AddMany of the first's entries, as they are, are
// ErrForbidden; its List is empty; the first's rows never change. Then: round trips and
// replacement, ErrNotFound, List's order and ownership, ErrForbidden for an entry naming
// another user, ErrNoTenant for the zero Context whatever else is wrong, a done ctx, every
// bad ID (ErrInvalidID naming the field), AddedAt outside years 1 to 9999 UTC, tenants
// calling at once, and a rapid state machine per interface against a map, with several
// tenants and bad IDs.
//
// A Watchlist is held to the whole of its contract:
//
//   - GetMany answers each lookup as Get would under the lookup's own Context, in order,
//     with the two tenants of each colliding pair in one call, a slug given twice, zero
//     Contexts and bad slugs among the rest; a done ctx fails the call.
//   - AddMany is all or nothing: one entry that Validate refuses, anywhere in the batch,
//     refuses the call with Validate's error naming the entry's index, and nothing of the
//     batch is written; a slug given twice is written once, the last one winning.
//   - Tenants pages through the users that hold entries in byte order, after its after,
//     with IDs that need escaping returned as they are; a limit outside
//     [1, tenancy.MaxTenantsPage] or a bad after is ErrInvalidID; a user appears with its
//     first entry and disappears with its last.
//   - The state machine calls GetMany, AddMany and Tenants among the rest.
//
// Entitlements: PlanFree for a tenant never given a plan, any Valid plan — a host's own,
// such as "enterprise" — stored and returned byte for byte, and ErrInvalidPlan for a plan
// that is not Valid.
//
// # What it assumes
//
// Nothing beyond the contracts. It never reads the wall clock: every AddedAt is a fixed
// instant plus an offset, at microsecond precision (PostgreSQL's timestamptz keeps no
// nanoseconds), compared with Equal. A Repository stores strings the suite makes, each
// holding the row's id, so that a read can tell which row it got.
package tenancytest
