// Noisyneighbor simulates one noisy tenant among a thousand quiet ones, on a simulated
// clock, and compares first come, first served with rota's fair dispatcher.
//
//	go run ./examples/noisyneighbor -svg wait.svg
//
// # The scenario
//
// 1,000 quiet tenants have 2 to 4 sources each (about 3,000 in all); one noisy tenant has
// 100,000. Every source is due again 15 minutes after it ran, so the sources ask for nearly
// 7,000 runs a minute, while the dispatcher hands out 500 items every 10-second cycle, 3,000
// a minute: the system is overloaded for good, as it is when one tenant imports a huge
// watch-list. Each source's first due time is drawn from the seed, uniformly over the first
// 15 minutes. Both policies run on a fresh duework.Memory holding the same entries, for 540
// cycles (90 simulated minutes); every dispatched item is completed at once (a hit, next
// due 15 minutes later), so the only thing that differs is whom each cycle serves:
//
//   - fcfs, first come, first served: the 500 earliest-due entries (Index.DueBefore), whoever
//     they belong to. Every source, quiet or noisy, waits in one queue that the noisy
//     backlog makes about twenty minutes long.
//   - rota: dispatch.Dispatcher with one lane whose per-user, per-lane and global limits are
//     all 500: every tenant with due work gets one item before any gets a second, least
//     recently served first. The quiet tenants' few due items go out in the cycle they come
//     due, and the noisy tenant takes the rest of the capacity — it loses nothing but the
//     slots the quiet tenants need.
//
// # The table
//
// Per policy: the quiet tenants' wait — the dispatching cycle's time minus the entry's DueAt,
// over every dispatch of a quiet tenant's source in the run, so at most one cycle (10 s) when
// a source goes out in the first cycle at or after its due time — at the 50th and 99th
// percentile (nearest rank) and its maximum; how many quiet dispatches there were; the noisy
// tenant's throughput in dispatches per simulated hour; and Jain's fairness index.
//
// # Fairness
//
// Jain's index is (Σx)² / (n·Σx²): 1 when all x are equal, 1/n when one tenant has
// everything. Over raw served counts it would only say that a tenant with 100,000 sources
// runs more often than one with three, so it is computed, as Jain defined it for unequal
// demands, over each tenant's served count relative to its fair share:
//
//	x_t = served_t / fair_t, over the n tenants with fair_t > 0,
//	served_t = the tenant's dispatches in the run,
//	fair_t = Σ over the cycles of the tenant's max-min fair share of that cycle's capacity.
//
// A cycle's max-min fair shares are the water-filling of its capacity over the due counts at
// the start of the cycle (under the policy being measured): every tenant with d due entries
// gets min(d, L), with the level L chosen so that the shares add up to the capacity, or to
// the whole demand when it fits. So the index is 1 when every tenant got, over the run, what
// a max-min fair scheduler would have given it, and it falls as quiet tenants get less than
// their share while the noisy one gets more.
//
// # The chart
//
// With -svg PATH the program also writes an SVG chart of the quiet tenants' wait over
// simulated time, one point a minute (the p50 and p99 of the quiet dispatches in that
// minute), both policies on one chart, with axes, tick labels, axis labels and a legend. It
// is hand-written SVG 1.1 and opens in any browser.
//
// # Flags
//
//	-seed N   the seed of the tenants' source counts and first due times (default 1); the
//	          same seed prints the same table
//	-svg PATH write the chart to PATH
//
// It uses only the standard library and rota, and finishes in a few seconds.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/rotaworks/rota/duework"
)

func main() {
	seed := flag.Uint64("seed", 1, "seed of the tenants' source counts and first due times")
	svgPath := flag.String("svg", "", "write an SVG chart of the quiet tenants' wait over time to this path")
	flag.Parse()
	if err := run(*seed, *svgPath); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(seed uint64, svgPath string) error {
	res, err := Simulate(DefaultConfig(seed, func() duework.Index { return duework.NewMemory() }))
	if err != nil {
		return err
	}
	if err := WriteTable(os.Stdout, res); err != nil {
		return err
	}
	if svgPath == "" {
		return nil
	}
	f, err := os.Create(svgPath)
	if err != nil {
		return err
	}
	if err := WriteSVG(f, res); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Printf("\nchart: %s\n", svgPath)
	return nil
}
