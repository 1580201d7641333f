package clock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rotaworks/rota/internal/clock"
	"github.com/rotaworks/rota/internal/fakeclock"
)

// A context that ends at an instant on whichever clock a loop was given: on a fake one,
// it ends when the test advances the clock there, and has no Deadline.
func ExampleContextAt() {
	fc := fakeclock.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	errClaimEnded := errors.New("claim ended")
	ctx, cancel := clock.ContextAt(context.Background(), fc, fc.Now().Add(time.Minute), errClaimEnded)
	defer cancel()
	_, hasDeadline := ctx.Deadline()
	fmt.Println("deadline:", hasDeadline)
	fc.Advance(time.Minute)
	fmt.Println("cause:", context.Cause(ctx))
	// Output:
	// deadline: false
	// cause: claim ended
}
