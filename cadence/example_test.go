package cadence_test

import (
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/rotaworks/rota/cadence"
)

// A source on the hot tier backs off while its polls find nothing and snaps back to the
// base interval on the first hit.
func ExampleBackoff_NextInterval() {
	p := cadence.TierHot
	for _, streak := range []int{0, 1, 2, 3, 4, 1000} {
		fmt.Printf("after %4d misses: %v\n", streak, p.NextInterval(streak))
	}
	// Output:
	// after    0 misses: 5m0s
	// after    1 misses: 10m0s
	// after    2 misses: 20m0s
	// after    3 misses: 40m0s
	// after    4 misses: 1h0m0s
	// after 1000 misses: 1h0m0s
}

// A host resolves a watch-list entry's tier by name and adds tiers of its own.
func ExampleRegistry() {
	tiers := cadence.NewRegistry()
	err := tiers.Register("realtime", cadence.Backoff{Base: time.Minute, Max: 15 * time.Minute, Factor: 1.5})
	fmt.Println("register realtime:", err)

	p, err := tiers.Lookup("realtime")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("realtime after 2 misses:", p.NextInterval(2))

	_, err = tiers.Lookup("lukewarm")
	fmt.Println(errors.Is(err, cadence.ErrUnknownTier), err)

	err = tiers.Register("broken", cadence.Backoff{Base: time.Hour, Max: time.Minute, Factor: 2})
	fmt.Println(err)
	// Output:
	// register realtime: <nil>
	// realtime after 2 misses: 2m15s
	// true cadence: unknown tier: "lukewarm"
	// cadence: invalid policy: tier "broken": Max (1m0s) must be at least Base (1h0m0s)
}

// Sources added together come due spread over the window, the same on every replica.
func ExampleJitter() {
	now := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	base := cadence.TierHot.NextInterval(0)
	for _, key := range []string{"ana/jobs", "ana/blog", "ben/news"} {
		due := now.Add(cadence.Jitter(key, now, base, 1))
		fmt.Println(key, "first due at", due.Format("15:04:05.000"))
	}
	// Output:
	// ana/jobs first due at 09:01:02.761
	// ana/blog first due at 09:03:36.117
	// ben/news first due at 09:02:56.503
}
