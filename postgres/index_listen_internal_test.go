package postgres

import (
	"context"
	"testing"
)

// A burst of signals while wake runs makes exactly one more call, and wake is never
// called concurrently with itself.
func TestWakerCoalesces(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newWaker()
	calls := make(chan int, 10)
	release := make(chan struct{})
	n := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(ctx, func() {
			n++
			calls <- n
			if n == 1 {
				<-release
			}
		})
	}()
	w.signal()
	if got := <-calls; got != 1 {
		t.Fatalf("first call %d", got)
	}
	for range 100 {
		w.signal() // while the first call runs
	}
	close(release)
	if got := <-calls; got != 2 {
		t.Fatalf("second call %d", got)
	}
	// Nothing is left pending: the next signal makes the third call, no earlier one.
	w.signal()
	if got := <-calls; got != 3 {
		t.Fatalf("after the burst and one more signal, call %d; want 3: the burst made one call", got)
	}
	cancel()
	<-done
}
