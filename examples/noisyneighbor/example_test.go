package main

import (
	"os"
	"time"

	"github.com/rotaworks/rota/duework"
)

// A small noisy neighbour: 20 quiet tenants and one with 2,000 sources, 40 dispatches per
// cycle. First come, first served makes the quiet tenants wait behind the backlog, long
// enough for the alarm; rota serves them in the cycle they come due.
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
		AlarmAfter:   100 * time.Second,
		NewIndex:     func() duework.Index { return duework.NewMemory() },
	})
	if err != nil {
		panic(err)
	}
	if err := WriteTable(os.Stdout, res); err != nil {
		panic(err)
	}
	// Output:
	// noisy neighbour, seed 3: 20 quiet tenants with 1–3 sources each, 1 noisy tenant with 2,000 sources;
	// every source due every 5m0s; capacity 40 per 10s cycle; 120 cycles (20m0s simulated)
	//
	//   policy  quiet wait p50    p99    max  quiet served  noisy served/h  Jain's index  longest wait          alarm on
	//     fcfs           3m12s  3m28s  3m28s            95           14115        0.1430         3m18s  92 of 120 cycles
	//     rota              5s    10s    10s           146           13962        1.0000            0s   0 of 120 cycles
	//
	// quiet wait: from DueAt to the dispatching cycle. Jain's index: over each tenant's served / max-min fair share
	// (1: every tenant got its share). longest wait: the most, over the cycles, of now − WaitingSince, how long the
	// longest-waiting ready tenant had waited for its turn; alarm on: the cycles in which it passed 1m40s, those in
	// which a Runner with that AlarmAfter keeps its noisy-neighbour alarm on.
}

// The cost of a cycle with 100 and with 10,000 quiet tenants waiting: the same reads.
func ExampleSimulateCost() {
	cfg := DefaultCostConfig()
	cfg.QuietTenants, cfg.NoisySources = []int{100, 10_000}, 500
	cfg.Capacity, cfg.Cycles = 20, 5
	res, err := SimulateCost(cfg)
	if err != nil {
		panic(err)
	}
	if err := WriteCostTable(os.Stdout, res); err != nil {
		panic(err)
	}
	// Output:
	// cycle cost, rota: 1 noisy tenant with 500 sources and N quiet tenants with one source each, all due at once,
	// every source due again 1m0s after it ran; capacity 20 per 10s cycle; 5 cycles; figures per cycle, mean / max
	//
	//   quiet tenants N  tenants with due work  users read  entries read  Index calls  LaneFor calls  dispatched
	//               100               62 / 101     20 / 20       24 / 39        3 / 3        20 / 20     20 / 20
	//            10,000         9,962 / 10,001     20 / 20       24 / 39        3 / 3        20 / 20     20 / 20
	//
	// users and entries read: what the cycle's Index.Ready calls returned; tenants with due work: what a cycle that
	// ranked every tenant with due work would have read. A cycle reads what it can serve, however many tenants wait.
}
