// Package maintenancetest holds the conformance suites that every maintenance.Lease and
// maintenance.StateStore implementation runs, in the manner of testing/slogtest:
//
//	func TestLease(t *testing.T) {
//		maintenancetest.RunLease(t, func(t *testing.T, maxHold time.Duration) maintenance.Lease {
//			return NewLease(pool, uniqueName(t), maxHold)
//		})
//	}
//
// # Rules
//
// Each rule is one subtest whose failure message cites it. The suites assume nothing
// beyond the interfaces: every call takes an explicit now (fixed instants, whole
// microseconds, so a database with microsecond timestamps round-trips them), nothing
// sleeps or reads the wall clock, and each subtest calls the factory for a fresh,
// empty implementation, so an adapter backed by a shared server must isolate each call
// (a fresh lease name, a fresh schema or truncated tables).
//
// # Lease factories and MaxHold
//
// MaxHold is a property of a lease, so the lease factory receives the maxHold the
// subtest needs and must build the lease with it.
package maintenancetest
