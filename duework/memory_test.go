package duework_test

import (
	"testing"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/duework/indextest"
)

// TestMemoryConformance runs the whole Index contract over Memory.
func TestMemoryConformance(t *testing.T) {
	indextest.Run(t, func(*testing.T) duework.Index { return duework.NewMemory() })
}
