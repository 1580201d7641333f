package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

// Staleness is read off the timeline: it grows by 1 per cadence and drops to 0 when a run
// starts; before the first run it counts from LastRunAgo, or from one cadence before the
// start for a task that had never run.
func TestStaleness(t *testing.T) {
	sc := Scenario{Horizon: 3 * time.Hour}
	res := Result{Runs: []Run{
		{Task: "a", Start: 2 * time.Hour, End: 2*time.Hour + 10*time.Minute},
		{Task: "b", Start: 30 * time.Minute, End: 40 * time.Minute},
	}}
	at := func(pts []stalenessPoint, d time.Duration) []float64 {
		var out []float64
		for _, p := range pts {
			if p.at == d {
				out = append(out, p.ratio)
			}
		}
		return out
	}
	a := staleness(sc, res, TaskSpec{Name: "a", Cadence: time.Hour, LastRunAgo: 30 * time.Minute}, time.Hour)
	for _, c := range []struct {
		at   time.Duration
		want []float64
	}{
		{0, []float64{0.5}},
		{time.Hour, []float64{1.5}},
		{2 * time.Hour, []float64{2.5, 0, 0}}, // just before the run, at its start, the sample
		{3 * time.Hour, []float64{1}},
	} {
		if got := at(a, c.at); !equalFloats(got, c.want) {
			t.Errorf("a at %v: %v, want %v", c.at, got, c.want)
		}
	}
	never := staleness(sc, res, TaskSpec{Name: "b", Cadence: 2 * time.Hour}, time.Hour)
	if got := at(never, 0); !equalFloats(got, []float64{1}) {
		t.Errorf("never-run b at 0: %v, want [1] (due at the start)", got)
	}
	if got := at(never, 30*time.Minute); !equalFloats(got, []float64{1.25, 0}) {
		t.Errorf("b at its run: %v, want [1.25 0]", got)
	}
	if last := never[len(never)-1]; last.at != sc.Horizon || math.Abs(last.ratio-1.25) > 1e-9 {
		t.Errorf("b ends at %+v, want 1.25 at the horizon", last)
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9 {
			return false
		}
	}
	return true
}

// The chart is well-formed XML: an svg root, one panel per picker with its title, axis
// labels and one polyline per task, and a legend naming every task.
func TestChart(t *testing.T) {
	sc := Incident()
	var results []Result
	for _, p := range []Picker{Static, Rota} {
		res, err := Simulate(sc, p)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, res)
	}
	var buf bytes.Buffer
	if err := writeChart(&buf, sc, results); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&buf)
	var (
		root      string
		texts     []string
		polylines int
		inText    bool
	)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("chart is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			switch tok.Name.Local {
			case "polyline":
				polylines++
			case "text":
				inText = true
				texts = append(texts, "")
			}
		case xml.EndElement:
			inText = inText && tok.Name.Local != "text"
		case xml.CharData:
			if inText {
				texts[len(texts)-1] += string(tok)
			}
		}
	}
	if root != "svg" {
		t.Errorf("root element %q, want svg", root)
	}
	if want := len(results) * len(sc.Tasks); polylines != want {
		t.Errorf("%d polylines, want %d (a task per panel)", polylines, want)
	}
	count := func(s string) int {
		n := 0
		for _, t := range texts {
			if t == s {
				n++
			}
		}
		return n
	}
	for s, want := range map[string]int{
		string(Static): 1, string(Rota): 1,
		"simulated time (hours)": 2, "staleness ratio (log scale)": 2,
		"0": 2, "48": 2, "1": 2, "1000": 2,
	} {
		if got := count(s); got != want {
			t.Errorf("<text> %q appears %d times, want %d", s, got, want)
		}
	}
	for _, task := range sc.Tasks {
		if count(task.Name) != 1 {
			t.Errorf("legend does not name %q once", task.Name)
		}
	}
	if !strings.Contains(strings.Join(texts, "\n"), "ratio 1: due") {
		t.Error("legend does not explain the due line")
	}
}
