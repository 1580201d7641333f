// Command tiers prints how rota's cadence presets move: each poll that finds nothing new
// (a miss) backs the interval off by the tier's factor up to its cap, and one poll that finds
// something new (a hit) snaps it back to the tier's base interval.
//
//	go run ./examples/tiers
//
// It uses only the cadence package and the standard library; the tiers are resolved by name
// through a Registry, the way a host resolves a watch-list entry's Tier.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rotaworks/rota/cadence"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tiers:", err)
		os.Exit(1)
	}
}

// polls is one source's poll outcomes in order: false for a miss, true for a hit.
var polls = []bool{false, false, false, false, false, false, true, false}

func run(w io.Writer) error {
	reg := cadence.NewRegistry()
	names := []string{cadence.NameHot, cadence.NameWarm, cadence.NameCold, cadence.NameDigestWeekly}

	fmt.Fprintf(w, "%-14s %s\n", "tier", "next interval after each poll (m = miss, H = hit)")
	for _, name := range names {
		p, err := reg.Lookup(name)
		if err != nil {
			return err
		}
		streak := 0
		steps := make([]string, 0, len(polls))
		for _, hit := range polls {
			mark := "m"
			if hit {
				streak, mark = 0, "H"
			} else {
				streak++
			}
			steps = append(steps, mark+" "+short(p.NextInterval(streak)))
		}
		fmt.Fprintf(w, "%-14s start %s → %s\n", name, short(p.NextInterval(0)), strings.Join(steps, ", "))
	}

	// An unknown tier is an error, never a silent default.
	if _, err := reg.Lookup("lukewarm"); err != nil {
		fmt.Fprintln(w, "lookup lukewarm:", err)
	}
	return nil
}

// short formats d as days, hours, minutes and seconds, leaving out zero units: 5m, 1h30m, 7d.
func short(d time.Duration) string {
	units := []struct {
		size time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}}
	var b strings.Builder
	for _, u := range units {
		if n := d / u.size; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.name)
			d -= n * u.size
		}
	}
	if b.Len() == 0 {
		return "0s"
	}
	return b.String()
}
