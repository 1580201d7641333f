package main

import (
	"os"
	"time"

	"github.com/rotaworks/rota/duework"
)

// A small noisy neighbour: 20 quiet tenants and one with 2,000 sources, 40 dispatches per
// cycle. First come, first served makes the quiet tenants wait behind the backlog; rota
// serves them in the cycle they come due.
func ExampleSimulate() {
	res, err := Simulate(Config{
		Seed:         3,
		QuietTenants: 20,
		QuietSources: [2]int{1, 3},
		NoisySources: 2000,
		Interval:     5 * time.Minute,
		Cycle:        10 * time.Second,
		Capacity:     40,
		Cycles:       120,
		BucketCycles: 6,
		NewIndex:     func() duework.Index { return duework.NewMemory() },
	})
	if err != nil {
		panic(err)
	}
	if err := WriteTable(os.Stdout, res); err != nil {
		panic(err)
	}
	// Output:
	// noisy neighbour, seed 3: 20 quiet tenants with 1–3 sources each, 1 noisy tenant with 2000 sources;
	// every source due every 5m0s; capacity 40 per 10s cycle; 120 cycles (20m0s simulated)
	//
	//   policy  quiet wait p50    p99    max  quiet served  noisy served/h  Jain's index
	//     fcfs           3m11s  3m28s  3m28s            95           14115        0.1432
	//     rota              5s    10s    10s           148           13956        1.0000
	//
	// wait: from DueAt to the dispatching cycle; Jain's index over each tenant's served / max-min fair share (1: every tenant got its share)
}
