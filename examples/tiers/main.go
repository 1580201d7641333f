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
	"bufio"
	"errors"
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

// pollFoundNew is one source's polls in order: true for a hit, false for a miss.
var pollFoundNew = []bool{false, false, false, false, false, false, true, false}

// run writes one line per preset tier, then what looking up an unknown tier returns.
func run(w io.Writer) error {
	// A bufio.Writer keeps the first write error and returns it from Flush, so one check
	// covers every line.
	out := bufio.NewWriter(w)
	registry := cadence.NewRegistry()
	tierNames := []string{"hot", "warm", "cold", "digest_weekly"}

	fmt.Fprintf(out, "%-14s %s\n", "tier", "next interval after each poll (m = miss, H = hit)")
	for _, name := range tierNames {
		policy, err := registry.Lookup(name)
		if err != nil {
			return err
		}
		missStreak := 0
		intervals := make([]string, 0, len(pollFoundNew))
		for _, hit := range pollFoundNew {
			label := "m"
			if hit {
				missStreak, label = 0, "H"
			} else {
				missStreak++
			}
			intervals = append(intervals, label+" "+compactDuration(policy.NextInterval(missStreak)))
		}
		fmt.Fprintf(out, "%-14s start %s → %s\n", name, compactDuration(policy.NextInterval(0)), strings.Join(intervals, ", "))
	}

	// An unknown tier is an error, never a silent default.
	const unknown = "no-such-tier"
	_, err := registry.Lookup(unknown)
	if !errors.Is(err, cadence.ErrUnknownTier) {
		return fmt.Errorf("lookup %q: got %v, want cadence.ErrUnknownTier", unknown, err)
	}
	fmt.Fprintf(out, "lookup %s: %v\n", unknown, err)
	return out.Flush()
}

// compactDuration formats d as days, hours, minutes and seconds, leaving out zero units:
// 5m, 1h30m, 7d.
func compactDuration(d time.Duration) string {
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
