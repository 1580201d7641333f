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
// and forged claims, CompleteMany and Unclaim, claims started once (StartClaims, its
// retries, and concurrent starters of one claim), the operator's User, Entries and
// Paused, flow control (the in-flight cap, the rate and its window bound,
// weights and their stride, what Route keeps, bad limits and the largest ones), pauses
// (what a paused user is spared and when it comes back, the later of two pauses, Resume),
// ErrorStreak through every write and read, every kind of bad input and the bounds
// themselves, and concurrent readers, claimers, starters and dispatchers, limits and
// pauses included. The last subtest drives the Index and the Model with at least 1,000
// generated sequences of calls (more with a larger -rapid.checks), about 30 each over four
// users with random limits (zero most of the time) and pauses, and compares every answer.
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
