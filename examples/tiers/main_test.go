package main

import (
	"errors"
	"os"
	"testing"
)

// Example pins what the program prints, so the walkthrough cannot drift from the presets.
func Example() {
	if err := run(os.Stdout); err != nil {
		panic(err)
	}
	// Output:
	// tier           next interval after each poll (m = miss, H = hit)
	// hot            start 5m → m 10m, m 20m, m 40m, m 1h, m 1h, m 1h, H 5m, m 10m
	// warm           start 30m → m 1h, m 2h, m 4h, m 6h, m 6h, m 6h, H 30m, m 1h
	// cold           start 4h → m 8h, m 16h, m 1d8h, m 2d, m 2d, m 2d, H 4h, m 8h
	// digest_weekly  start 7d → m 14d, m 28d, m 28d, m 28d, m 28d, m 28d, H 7d, m 14d
	// lookup no-such-tier: cadence: unknown tier: "no-such-tier"
}

// A writer that fails makes run return its error: the program exits non-zero instead of
// reporting success after printing nothing.
func TestRunReturnsWriteError(t *testing.T) {
	errFull := errors.New("device full")
	if err := run(failingWriter{errFull}); !errors.Is(err, errFull) {
		t.Fatalf("run = %v, want %v", err, errFull)
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }
