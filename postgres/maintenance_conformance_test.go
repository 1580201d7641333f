package postgres_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/maintenance/maintenancetest"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// The Lease keeps the maintenance.Lease contract against the real server: one migrated
// schema, a fresh lease name per subtest.
func TestLeaseConformance(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	var n atomic.Int64
	maintenancetest.RunLease(t, func(t *testing.T, maxHold time.Duration) maintenance.Lease {
		return postgres.NewLease(pool, fmt.Sprintf("lease-%d", n.Add(1)), maxHold)
	})
}

// The StateStore keeps the maintenance.StateStore contract against the real server, fenced
// by a Lease of the same schema: one migrated schema, emptied for each subtest.
func TestStateStoreConformance(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	maintenancetest.RunStateStore(t, func(t *testing.T) (maintenance.StateStore, maintenance.Lease) {
		if _, err := pool.Exec(context.Background(), `DELETE FROM rota_task_state; DELETE FROM rota_task_fence; DELETE FROM rota_leases`); err != nil {
			t.Fatal(err)
		}
		return postgres.NewStateStore(pool), postgres.NewLease(pool, "heavy", time.Hour)
	})
}
