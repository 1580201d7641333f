package main

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/rotaworks/rota/internal/golden"
)

// TestOutput pins the printed comparison, so the example cannot rot: any change to the
// scheduler's decisions shows up here. Run with -update to accept a deliberate change.
func TestOutput(t *testing.T) {
	var buf bytes.Buffer
	if err := report(&buf, Incident()); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/output.golden", buf.Bytes())
}

// TestIncidentClaims checks what the output claims, independently of its wording.
func TestIncidentClaims(t *testing.T) {
	sc := Incident()
	static, err := Simulate(sc, Static)
	if err != nil {
		t.Fatal(err)
	}
	if static.Drained || !slices.Contains(static.NeverRan, "compact") || !slices.Contains(static.NeverRan, "snapshot") {
		t.Fatalf("static picker: rollup should starve its producer and the snapshot: drained %v, never ran %v", static.Drained, static.NeverRan)
	}
	rota, err := Simulate(sc, Rota)
	if err != nil {
		t.Fatal(err)
	}
	if !rota.Drained || len(rota.NeverRan) > 0 {
		t.Fatalf("rota: the chain drains to idle: drained %v at %v, never ran %v", rota.Drained, rota.DrainedAt, rota.NeverRan)
	}
	for name, wait := range rota.LongestWait {
		if wait > sc.Bound() {
			t.Errorf("rota: %s waited %v, past the bound %v", name, wait, sc.Bound())
		}
	}
	// The timeline never has two heavy runs at once, and verify runs beside them.
	beside := false
	for i, a := range rota.Runs {
		for _, b := range rota.Runs[i+1:] {
			if b.Start >= a.End {
				continue
			}
			if a.Task != "verify" && b.Task != "verify" {
				t.Fatalf("rota: heavy runs overlap: %+v and %+v", a, b)
			}
			beside = true
		}
	}
	if !beside {
		t.Error("rota: verify should run off the lease beside a heavy run at least once")
	}
	if last := rota.Runs[len(rota.Runs)-1]; last.End > sc.Horizon+sc.MaxHold || rota.DrainedAt > 24*time.Hour {
		t.Errorf("rota: drained at %v, last run %+v", rota.DrainedAt, last)
	}
}
