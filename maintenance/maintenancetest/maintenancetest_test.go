package maintenancetest_test

import (
	"testing"
	"time"

	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/maintenance/maintenancetest"
)

func TestMemoryLease(t *testing.T) {
	maintenancetest.RunLease(t, func(t *testing.T, maxHold time.Duration) maintenance.Lease {
		return maintenance.NewMemoryLease(maxHold)
	})
}

func TestMemoryStateStore(t *testing.T) {
	maintenancetest.RunStateStore(t, func(t *testing.T) (maintenance.StateStore, maintenance.Lease) {
		store, lease := maintenance.NewMemoryStateStore(), maintenance.NewMemoryLease(time.Hour)
		store.FenceWith(lease)
		return store, lease
	})
}
