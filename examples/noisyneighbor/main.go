// Noisyneighbor simulates one noisy tenant among quiet ones on a simulated clock: first
// how first come, first served and rota's fair dispatcher treat the quiet tenants, then
// what one of rota's dispatch cycles costs with a thousand and with a hundred thousand
// quiet tenants waiting.
//
//	go run ./examples/noisyneighbor -svg wait.svg -cost-svg cost.svg
//
// # The fairness run
//
// 1,000 quiet tenants have 2 to 4 sources each (about 3,000 in all); one noisy tenant has
// 10,000. Every source is due again 15 minutes after it ran, so the sources ask for about
// 870 runs a minute, while the dispatcher hands out 100 items every 10-second cycle, 600 a
// minute: the system is overloaded for good, as it is when one tenant imports a huge watch
// list. Each source's first due time is drawn from the seed, uniformly over the first 15
// minutes. Both policies run on a fresh duework.Memory holding the same entries, for 270
// cycles (45 simulated minutes); every dispatched item is completed at once (a hit, next
// due 15 minutes later), so the only thing that differs is whom each cycle serves:
//
//   - fcfs, first come, first served: the 100 earliest-due entries (Index.DueBefore),
//     whoever they belong to. Every source, quiet or noisy, waits in one queue that the
//     noisy backlog makes minutes long.
//   - rota: dispatch.Dispatcher with one lane whose per-user, per-lane and global limits
//     are all 100: every tenant read gets one item before any gets a second, in turn order.
//     The quiet tenants' few due items go out in the cycle they come due, and the noisy
//     tenant takes the rest of the capacity — it loses nothing but the slots the quiet
//     tenants need.
//
// The first table gives, per policy: the quiet tenants' wait — the dispatching cycle's
// time minus the entry's DueAt, over every dispatch of a quiet tenant's source, so at most
// one cycle (10 s) when a source goes out in the first cycle at or after its due time — at
// the 50th and 99th percentile (nearest rank) and its maximum; how many quiet dispatches
// there were; the noisy tenant's throughput per simulated hour; Jain's fairness index; and
// the wait a Runner's noisy-neighbour alarm watches.
//
// # The alarm
//
// At each cycle, now − WaitingSince is how long the longest-waiting ready tenant that the
// cycle did not serve has waited for its turn (dispatch.LaneReport.WaitingSince). A
// bridge.Runner raises its noisy-neighbour alarm when that wait passes AlarmAfter, ten
// cycles by default. The table shows the longest such wait of the run and the cycles in
// which the alarm is on. First come, first served has no lanes; its wait is read the same
// way, from the front of the index's turn queue after each cycle.
//
// # Fairness
//
// Jain's index is (Σx)² / (n·Σx²): 1 when all x are equal, 1/n when one tenant has
// everything. Over raw served counts it would only say that a tenant with 10,000 sources
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
// # The cost run
//
// The second table runs rota's Dispatcher twice, with 1,000 and then 100,000 quiet tenants
// of one source each beside the noisy tenant, every source due within the first cycle and
// due again a minute after it ran, so that both runs stay overloaded and every cycle hands
// out a full batch of 100; every tenant is already in its lane, as in a service that has
// run a while. The Dispatcher's Index counts, per cycle, its calls and the users and
// entries they returned, and the LaneFor counts its calls. Beside them is the number of
// tenants with due work: what a cycle that ranked every waiting tenant would have had to
// read. The counts, not the wall clock, are the cost the table shows, so that it prints the
// same on every machine; -wall adds the mean wall-clock time of a cycle, which also grows
// with the depth of the index's trees and the memory it touches.
//
// # The charts
//
// With -svg PATH the program writes a chart of the quiet tenants' wait over simulated time
// (the p50 and p99 of the quiet dispatches in each minute), both policies on one chart; with
// -cost-svg PATH one of the cost run, per cycle: tenants with due work, users read and
// entries read, both runs on one chart. Both are hand-written SVG 1.1 and open in any
// browser.
//
// # Flags
//
//	-seed N        the seed of the tenants' source counts and first due times (default 1);
//	               the same seed prints the same tables
//	-svg PATH      write the wait chart to PATH
//	-cost-svg PATH write the cost chart to PATH
//	-wall          add the wall-clock time of a cycle to the cost table (differs per run)
//
// It uses only the standard library and rota, and finishes in a few seconds.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/rotaworks/rota/duework"
)

func main() {
	var opts options
	flag.Uint64Var(&opts.seed, "seed", 1, "seed of the tenants' source counts and first due times")
	flag.StringVar(&opts.svg, "svg", "", "write an SVG chart of the quiet tenants' wait over time to this path")
	flag.StringVar(&opts.costSVG, "cost-svg", "", "write an SVG chart of what each dispatch cycle read to this path")
	flag.BoolVar(&opts.wall, "wall", false, "add the wall-clock time of a dispatch cycle to the cost table")
	flag.Parse()
	if err := run(os.Stdout, opts); err != nil {
		fmt.Fprintln(os.Stderr, "noisyneighbor:", err)
		os.Exit(1)
	}
}

// options are the program's flags.
type options struct {
	seed         uint64
	svg, costSVG string
	wall         bool
}

// run simulates both runs and writes the tables to w and the charts asked for.
func run(w io.Writer, opts options) error {
	r, err := simulateAll(opts)
	if err != nil {
		return err
	}
	return report(w, r, opts)
}

// results are both runs' results.
type results struct {
	fairness Result
	cost     CostResult
}

// simulateAll makes the fairness run and the cost run the options ask for.
func simulateAll(opts options) (results, error) {
	fairness, err := Simulate(DefaultConfig(opts.seed, func() duework.Index { return duework.NewMemory() }))
	if err != nil {
		return results{}, err
	}
	costCfg := DefaultCostConfig()
	costCfg.Wall = opts.wall
	cost, err := SimulateCost(costCfg)
	if err != nil {
		return results{}, err
	}
	return results{fairness: fairness, cost: cost}, nil
}

// report writes both tables to w, and the charts to the paths of opts.
func report(w io.Writer, r results, opts options) error {
	out := bufio.NewWriter(w)
	if err := WriteTable(out, r.fairness); err != nil {
		return err
	}
	fmt.Fprintln(out)
	if err := WriteCostTable(out, r.cost); err != nil {
		return err
	}
	for _, chart := range []struct {
		path  string
		write func(io.Writer) error
	}{
		{opts.svg, func(w io.Writer) error { return WriteSVG(w, r.fairness) }},
		{opts.costSVG, func(w io.Writer) error { return WriteCostSVG(w, r.cost) }},
	} {
		if chart.path == "" {
			continue
		}
		if err := writeFile(chart.path, chart.write); err != nil {
			return err
		}
		fmt.Fprintf(out, "\nchart: %s\n", chart.path)
	}
	return out.Flush()
}

// writeFile creates path and writes it with write, returning the errors of the write and
// the close.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	return errors.Join(write(f), f.Close())
}
