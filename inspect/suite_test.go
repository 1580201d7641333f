package inspect_test

import (
	"testing"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/duework/indextest"
	"github.com/rotaworks/rota/inspect/inspecttest"
	"github.com/rotaworks/rota/maintenance"
)

// The Inspector over the in-memory Index and StateStore.
func TestInspectorMemory(t *testing.T) {
	inspecttest.Run(t, func(t *testing.T) inspecttest.Stores {
		return inspecttest.Stores{Index: duework.NewMemory(), StateStore: maintenance.NewMemoryStateStore()}
	})
}

// The Inspector over the reference Model, which every Index agrees with.
func TestInspectorModel(t *testing.T) {
	inspecttest.Run(t, func(t *testing.T) inspecttest.Stores {
		return inspecttest.Stores{Index: indextest.NewModel(), StateStore: maintenance.NewMemoryStateStore()}
	})
}
