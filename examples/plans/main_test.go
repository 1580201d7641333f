package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rotaworks/rota/internal/golden"
)

// The program prints exactly the golden output: the simulation is deterministic. After an
// intended change: go test ./examples/plans -update.
func TestPlansOutput(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatalf("run: %v", err)
	}
	golden.Check(t, filepath.Join("testdata", "plans.golden"), out.Bytes())
}

// The story the program tells is in its output, whatever the golden file says.
func TestPlansShowsLanesAndCadence(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"cycle 12:",                             // a dozen cycles
		"pro  noisy:",                           // the lanes
		"plus ben:",                             //
		"free ana:",                             //
		"shed: noisy",                           // the noisy tenant is shed
		"hit +5m",                               // a hit snaps back to the hot base
		"miss×2 +20m",                           // misses back off
		"miss×3 +40m",                           //
		`ana adds "careers" (sync scheduled 1)`, // sync adds only the new source
		"podcast removed",                       // a removed source is unscheduled
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, "pro  noisy:") && strings.Count(line, ",")+1 > 4 {
			t.Errorf("noisy got more than its per-user limit of 4: %s", line)
		}
	}
	var again bytes.Buffer
	if err := run(&again); err != nil || again.String() != s {
		t.Errorf("a second run printed something else: %v", err)
	}
}

// failingWriter refuses every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// A write that fails is not lost: run returns it.
func TestPlansReportsWriteErrors(t *testing.T) {
	if err := run(failingWriter{}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("run on a failing writer: %v, want the write's error", err)
	}
}
