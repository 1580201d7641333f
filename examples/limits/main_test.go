package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rotaworks/rota/internal/golden"
)

// The program prints exactly the golden output: the simulation is deterministic. After an
// intended change: go test ./examples/limits -update.
func TestLimitsOutput(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatalf("run: %v", err)
	}
	golden.Check(t, filepath.Join("testdata", "limits.golden"), out.Bytes())
	var again bytes.Buffer
	if err := run(&again); err != nil || again.String() != out.String() {
		t.Errorf("a second run printed something else: %v", err)
	}
}

// Scene 1 shows what it says, whatever the golden file holds: acme never has more than
// MaxInFlight running, gets exactly what its rate allows over the scene (it always has
// work), is never shed, and its neighbours get their whole per-cycle share.
func TestCapAndRate(t *testing.T) {
	st, err := capAndRate(context.Background(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if st.MaxRunning != 2 {
		t.Errorf("acme ran %d at once, want its MaxInFlight 2 reached and never passed", st.MaxRunning)
	}
	// Cycles at 0:00, 0:30, …, 9:30: a window of 9m30s, so Burst 3 + floor(9.5) = 12.
	if st.Started["acme"] != 12 {
		t.Errorf("acme started %d, want 12: Burst 3 + one a minute over 9m30s", st.Started["acme"])
	}
	if st.Shed["acme"] != 0 {
		t.Errorf("acme was shed in %d cycles; a tenant held back by its own limits is not shed", st.Shed["acme"])
	}
	if len(st.LimitedAt) == 0 {
		t.Error("no cycle counted acme as limited")
	}
	for _, u := range []string{"beta", "cara"} {
		if st.Started[u] != 40 {
			t.Errorf("%s started %d of its 40 sources", u, st.Started[u])
		}
	}
}

// Scene 2: over the run each tenant's share is within 10 % of its weight's share.
func TestWeightedShares(t *testing.T) {
	st, err := weighted(context.Background(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	total, items := 0, 0
	for u, w := range st.Weights {
		total += w
		items += st.Served[u]
	}
	if items != 2*st.Cycles {
		t.Fatalf("%d items in %d cycles, want 2 a cycle", items, st.Cycles)
	}
	for u, w := range st.Weights {
		share, want := float64(st.Served[u])/float64(items), float64(w)/float64(total)
		if math.Abs(share-want) > 0.1*want {
			t.Errorf("%s (weight %d): share %.3f, want within 10%% of %.3f", u, w, share, want)
		}
	}
}

// Scene 3: without PerUserBurst the lone tenant gets PerUserLimit a cycle and the rest of
// the lane sits idle; with it the tenant takes up to PerUserBurst, the newcomer still gets
// its fair part the cycle it has work, and nothing sits idle while both have work.
func TestBurstIntoIdleLane(t *testing.T) {
	st, err := burst(context.Background(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range st.Without {
		if c["lone"] != 2 {
			t.Errorf("without burst, cycle %d: lone got %d, want PerUserLimit 2", i, c["lone"])
		}
	}
	for i, c := range st.With[:2] {
		if c["lone"] != 8 || c["newco"] != 0 {
			t.Errorf("with burst, cycle %d: lone %d, newco %d; want lone at PerUserBurst 8", i, c["lone"], c["newco"])
		}
	}
	for i, c := range st.With[2:4] {
		if c["newco"] < 2 || c["lone"]+c["newco"] != 10 {
			t.Errorf("with burst, cycle %d: lone %d, newco %d; want newco's fair part and a full lane", i+2, c["lone"], c["newco"])
		}
	}
}

// failingWriter refuses every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// A write that fails is not lost: run returns it.
func TestLimitsReportsWriteErrors(t *testing.T) {
	if err := run(failingWriter{}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("run on a failing writer: %v, want the write's error", err)
	}
}
