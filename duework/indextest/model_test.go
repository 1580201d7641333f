package indextest_test

import (
	"testing"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/duework/indextest"
)

// TestModelConformance holds the reference Model to every rule it is the reference for.
func TestModelConformance(t *testing.T) {
	indextest.Run(t, func(*testing.T) duework.Index { return indextest.NewModel() })
}
