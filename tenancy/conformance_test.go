package tenancy_test

import (
	"testing"

	"github.com/rotaworks/rota/tenancy"
	"github.com/rotaworks/rota/tenancy/tenancytest"
)

// The in-memory implementations keep their contracts, made by their constructors and as
// zero values.

func TestMemoryWatchlistConformance(t *testing.T) {
	t.Run("New", func(t *testing.T) {
		tenancytest.RunWatchlist(t, func(*testing.T) tenancy.Watchlist { return tenancy.NewMemoryWatchlist() })
	})
	t.Run("ZeroValue", func(t *testing.T) {
		tenancytest.RunWatchlist(t, func(*testing.T) tenancy.Watchlist { return new(tenancy.MemoryWatchlist) })
	})
}

func TestMemoryRepositoryConformance(t *testing.T) {
	t.Run("New", func(t *testing.T) {
		tenancytest.RunRepository(t, func(*testing.T) tenancy.Repository[string] { return tenancy.NewMemoryRepository[string]() })
	})
	t.Run("ZeroValue", func(t *testing.T) {
		tenancytest.RunRepository(t, func(*testing.T) tenancy.Repository[string] { return new(tenancy.MemoryRepository[string]) })
	})
}

func TestMemoryEntitlementsConformance(t *testing.T) {
	t.Run("New", func(t *testing.T) {
		tenancytest.RunEntitlements(t, func(*testing.T) tenancytest.SettableEntitlements { return tenancy.NewMemoryEntitlements() })
	})
	t.Run("ZeroValue", func(t *testing.T) {
		tenancytest.RunEntitlements(t, func(*testing.T) tenancytest.SettableEntitlements { return new(tenancy.MemoryEntitlements) })
	})
}
