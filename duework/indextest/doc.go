// Package indextest is the conformance suite for duework.Index implementations.
//
// # Use
//
// Call Run from a test of your implementation, with a factory that returns a fresh, empty
// Index on every call:
//
//	func TestIndexConformance(t *testing.T) {
//		indextest.Run(t, func(t *testing.T) duework.Index { return newMyIndex(t) })
//	}
//
// Run runs one subtest per rule of the contract (see duework.Index); a failure names the
// rule it breaks. The factory is called once per subtest, and once per generated sequence of
// the state-machine test (at least MinSequences of them), always with the enclosing
// subtest's *testing.T, so cleanups registered on it run when that subtest ends. An
// implementation backed by a server should therefore make each call cheap — truncate
// tables rather than create a database — and must not let one call see another's entries.
//
// # What it assumes
//
// Nothing beyond the contract. It never reads the wall clock: every instant is a fixed time
// plus an offset, in UTC, truncated to the microsecond (PostgreSQL's timestamptz keeps no
// nanoseconds), and times are compared with Equal, never with ==. It uses only valid IDs of
// a few ASCII letters and digits. It does not assume token values, only that a token is
// new for its entry; it does not assume which sentinel a cross-tenant Complete gets, only
// that it fails (with duework.ErrInvalid or duework.ErrClaimLost) and changes nothing.
//
// # What it checks
//
//   - Schedule, Get and Unschedule round trips, replacement, ErrNotFound.
//   - DueBefore and DueHeads ordering, limits, perUser cuts and More, LastServed.
//   - Tenant isolation of Schedule, Unschedule, Get and Complete.
//   - Claims: order, skipping, invisibility while held, expiry at Until, now moving both
//     ways, fresh tokens, stale and forged claims, Complete past Until, Schedule and
//     Unschedule of a claimed entry.
//   - Parallel claimers: each entry claimed at most once per claim window.
//   - Every bad input: duework.ErrInvalid naming the field, tenancy.ErrNoTenant for the zero
//     Context, and nothing changed.
//   - A rapid state-machine test against a reference model (a map and a sort): sequences of
//     at most 30 operations over 3 users and 4 work keys, with now moving both ways.
package indextest
