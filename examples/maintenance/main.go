// Command maintenance replays a backlog incident on a simulated clock: a rollup task with
// a backlog of 371 batches, holding the heavy lease about 45 minutes a run on a 10-minute
// cadence, beside compact (never run), reindex (1 h cadence, last run 5 h ago), verify
// (off-lease, 1 h, 18 days stale) and snapshot (data-safety, 24 h, last run 23 h ago). It
// runs the scenario under a static registry-order picker and under rota's
// maintenance.Scheduler, and prints each task's longest wait, when the chain drained to
// idle, and which tasks starved.
//
//	go run ./examples/maintenance [-svg staleness.svg]
//
// With -svg it also writes a chart of each task's staleness over time under both pickers
// (see chart.go for what staleness is read off the timeline).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

func main() {
	svg := flag.String("svg", "", "write an SVG chart of each task's staleness over time under both pickers to this path")
	flag.Parse()
	if err := report(os.Stdout, Incident()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *svg != "" {
		if err := writeChartFile(*svg, Incident()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// report simulates sc under both pickers and writes the comparison.
func report(out io.Writer, sc Scenario) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Backlog incident: rollup backlog %d batches (%d need compact first), %s simulated, polled every %s\n",
		sc.Backlog, sc.Overflow, dur(sc.Horizon), dur(sc.Poll))
	for _, p := range []Picker{Static, Rota} {
		res, err := Simulate(sc, p)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		writeResult(&b, sc, res)
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// writeResult writes one picker's part of the comparison.
func writeResult(b *strings.Builder, sc Scenario, res Result) {
	fmt.Fprintf(b, "\n%s:\n", res.Picker)
	fmt.Fprintf(b, "  %-24s %12s %6s\n", "task", "longest wait", "runs")
	worst, worstWait := "", time.Duration(-1)
	for _, t := range sc.Tasks {
		runs := 0
		for _, r := range res.Runs {
			if r.Task == t.Name {
				runs++
			}
		}
		note := ""
		if runs == 0 {
			note = "  never ran"
		}
		fmt.Fprintf(b, "  %-24s %12s %6d%s\n", t.Name, dur(res.LongestWait[t.Name]), runs, note)
		if res.LongestWait[t.Name] > worstWait {
			worst, worstWait = t.Name, res.LongestWait[t.Name]
		}
	}
	if res.Drained {
		fmt.Fprintf(b, "  chain drained to idle after %s\n", dur(res.DrainedAt))
	} else {
		fmt.Fprintf(b, "  chain never drained to idle in %s\n", dur(sc.Horizon))
	}
	switch {
	case len(res.NeverRan) > 0:
		fmt.Fprintf(b, "  starved: %s (never ran)\n", strings.Join(res.NeverRan, ", "))
	case worstWait > sc.Bound():
		fmt.Fprintf(b, "  starved: %s (waited %s, past the bound %s)\n", worst, dur(worstWait), dur(sc.Bound()))
	default:
		fmt.Fprintf(b, "  starved: none (longest wait %s, %s; bound %s)\n", dur(worstWait), worst, dur(sc.Bound()))
	}
}

// dur formats d to the minute: 45m, 16h05m.
func dur(d time.Duration) string {
	d = d.Round(time.Minute)
	h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
	if h == 0 {
		return fmt.Sprintf("%dm", m)
	}
	return fmt.Sprintf("%dh%02dm", h, m)
}
