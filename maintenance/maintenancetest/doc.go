// Package maintenancetest is the conformance suite for maintenance.Lease and
// maintenance.StateStore implementations, in the manner of testing/slogtest.
//
// # Use
//
// Call RunLease and RunStateStore from tests of your adapter:
//
//	func TestLease(t *testing.T) {
//		maintenancetest.RunLease(t, func(t *testing.T, maxHold time.Duration) maintenance.Lease {
//			return NewLease(pool, uniqueName(t), maxHold)
//		})
//	}
//
//	func TestStateStore(t *testing.T) {
//		maintenancetest.RunStateStore(t, func(t *testing.T) (maintenance.StateStore, maintenance.Lease) {
//			truncate(t, pool)
//			return NewStateStore(pool), NewLease(pool, "heavy", time.Hour)
//		})
//	}
//
// Each runs one subtest per rule (LeaseRules and StateStoreRules list them); a failure
// names the rule it breaks. Each subtest calls the factory for a fresh implementation: a
// lease that was never granted, built with the maxHold the subtest asks for; an empty
// store together with a never-granted lease whose grants fence it. An adapter backed by a
// shared server must isolate each call (a fresh lease name, a fresh schema or truncated
// tables).
//
// # What it assumes
//
// Nothing beyond the interfaces. Every call takes an explicit now — fixed instants in
// whole microseconds, so a store with microsecond timestamps round-trips them — and
// nothing sleeps or reads the wall clock. Names are short ASCII unless a rule is about
// names.
//
// # What it checks
//
//   - Lease: grants, exclusivity (under concurrency too), growing tokens, expiry, renewal,
//     MaxHold, stale grants, release, and bad input — empty, overlong or unprintable
//     holders, ttl ≤ 0, times outside years 1 through 9999 UTC — refused with
//     maintenance.ErrInvalid, changing nothing.
//   - StateStore: round trips of every field (at the edges of the time range too),
//     replacement, order, fencing by saved tokens and by the lease's grants, validity of
//     states and tokens, duplicate names, ownership of slices, and concurrent saves.
//   - StateStore.Update: what it reads and writes, the fence it passes and raises, its
//     errors and bad input, and that it is atomic — concurrent increments lose nothing,
//     exactly one of many concurrent compare-and-set claims wins — and, with
//     maintenance.Schedulers over the store and the lease, that schedulers polling at one
//     instant start each task once, and that a scheduler whose read predates another's
//     poll starts neither that poll's task nor one depending on it, yet records its own
//     deferrals.
package maintenancetest
