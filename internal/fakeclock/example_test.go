package fakeclock_test

import (
	"fmt"
	"time"

	"github.com/rotaworks/rota/internal/fakeclock"
)

// A loop polls on a ticker; the test waits until the loop has started its ticker, then
// steps the clock and sees each tick at its own instant.
func Example() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := fakeclock.New(start)
	polls := make(chan time.Duration)
	go func() {
		ticks, stop := clk.NewTicker(time.Minute)
		defer stop()
		for range 2 {
			polls <- (<-ticks).Sub(start)
		}
	}()
	clk.Wait(1, 0) // the loop's ticker runs
	clk.AfterFunc(90*time.Second, func() { fmt.Println("timer at", clk.Now().Sub(start)) })
	for range 2 {
		clk.Advance(time.Minute)
		fmt.Println("poll at", <-polls)
	}
	// Output:
	// poll at 1m0s
	// timer at 1m30s
	// poll at 2m0s
}
