package fleettest_test

import (
	"fmt"

	"github.com/rotaworks/rota/internal/fleettest"
)

// Jain's index scores how evenly runs were shared: 1 when every tenant got as many, 1/n
// when one got them all.
func ExampleJain() {
	fmt.Printf("%.2f\n", fleettest.Jain([]int{12, 12, 12, 12}))
	fmt.Printf("%.2f\n", fleettest.Jain([]int{12, 10, 12, 14}))
	fmt.Printf("%.2f\n", fleettest.Jain([]int{48, 0, 0, 0}))
	// Output:
	// 1.00
	// 0.99
	// 0.25
}
