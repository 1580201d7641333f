package rotadynamo

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/duework/indextest"
	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/maintenance/maintenancetest"
	"github.com/rotaworks/rota/tenancy"
	"github.com/rotaworks/rota/tenancy/tenancytest"
)

// The Index keeps the whole duework.Index contract, checked by the core's conformance
// suite against DynamoDB, with each group's queue in one bucket and spread over four. The
// suite asks for thousands of fresh indexes: each empties the test's one table.
func TestIndexConformance(t *testing.T) {
	for _, buckets := range []int{1, 4} {
		t.Run(fmt.Sprintf("buckets=%d", buckets), func(t *testing.T) {
			t.Parallel()
			st := openTest(t, buckets)
			indextest.Run(t, func(t *testing.T) duework.Index { return freshIndex(t, st) })
		})
	}
}

// The Watchlist and the Entitlements keep the tenancy contracts, deny-by-default included,
// checked by the core's conformance suite; each fresh store empties the test's table.
func TestWatchlistConformance(t *testing.T) {
	for _, buckets := range []int{1, 4} {
		t.Run(fmt.Sprintf("buckets=%d", buckets), func(t *testing.T) {
			t.Parallel()
			st := openTest(t, buckets)
			tenancytest.RunWatchlist(t, func(t *testing.T) tenancy.Watchlist {
				wipe(t, st)
				return st.Watchlist
			})
		})
	}
}

func TestEntitlementsConformance(t *testing.T) {
	t.Parallel()
	st := openTest(t, 1)
	tenancytest.RunEntitlements(t, func(t *testing.T) tenancytest.SettableEntitlements {
		wipe(t, st)
		return st.Entitlements
	})
}

// The Lease keeps the maintenance.Lease contract: a fresh lease name per subtest.
func TestLeaseConformance(t *testing.T) {
	t.Parallel()
	st := openTest(t, 1)
	var n atomic.Int64
	maintenancetest.RunLease(t, func(t *testing.T, maxHold time.Duration) maintenance.Lease {
		return &Lease{d: st.Lease.d, name: fmt.Sprintf("lease-%d", n.Add(1)), maxHold: maxHold}
	})
}

// The StateStore keeps the maintenance.StateStore contract, fenced by the Lease of the
// same stores: the table emptied for each subtest.
func TestStateStoreConformance(t *testing.T) {
	t.Parallel()
	st := openTest(t, 1)
	maintenancetest.RunStateStore(t, func(t *testing.T) (maintenance.StateStore, maintenance.Lease) {
		wipe(t, st)
		return st.StateStore, st.Lease
	})
}
