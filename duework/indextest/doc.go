// Package indextest is the conformance suite for duework.Index implementations, and its
// reference Index, Model.
//
// Call Run from a test of your implementation, with a factory that returns a fresh, empty
// Index on every call:
//
//	func TestIndexConformance(t *testing.T) {
//		indextest.Run(t, func(t *testing.T) duework.Index { return newMyIndex(t) })
//	}
//
// Run runs one subtest per rule of the contract (Rules lists them); a failure cites the
// rule it breaks. The rules cover the tenant-scoped calls and isolation, DueBefore, the
// turn order and what Ready reads, holds, Route and Groups, claims and their expiry, lost
// and forged claims, CompleteMany, every kind of bad input and the bounds themselves,
// concurrent readers and claimers, and the optional duework.MissingScheduler and
// duework.ClaimGuard (skipped for an Index without them). The last subtest drives the
// Index and the Model with at least MinSequences generated sequences of calls, about 30
// each over four users, and compares every answer.
//
// The factory is called once per subtest and once per generated sequence, always with the
// enclosing subtest's *testing.T, so cleanups registered on it run when that subtest ends.
// An Index backed by a server should make each call cheap — truncate tables rather than
// create a database — and must not let one call see another's entries.
//
// The suite assumes nothing beyond the contract. It never reads the wall clock: every
// instant is a fixed time plus an offset, in UTC, in whole microseconds, and times are
// compared with Equal. It does not assume token values, only that a token is new for its
// entry, nor which sentinel a cross-tenant Complete gets, only that it fails and changes
// nothing.
package indextest
