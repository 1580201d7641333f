package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/duework"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func newMemory() duework.Index { return duework.NewMemory() }

var (
	defaultOnce sync.Once
	defaultRes  Result
	defaultErr  error
)

// defaultResult is the program's own run (seed 1), simulated once for every test that reads it.
func defaultResult(t *testing.T) Result {
	t.Helper()
	defaultOnce.Do(func() { defaultRes, defaultErr = Simulate(DefaultConfig(1, newMemory)) })
	if defaultErr != nil {
		t.Fatal(defaultErr)
	}
	return defaultRes
}

// The printed table is deterministic: seed 1 prints exactly the golden table.
func TestTableGolden(t *testing.T) {
	var got bytes.Buffer
	if err := WriteTable(&got, defaultResult(t)); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "table-seed1.golden")
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got.String() != string(want) {
		t.Errorf("table differs from %s:\n--- got\n%s--- want\n%s", golden, got.String(), want)
	}
}

// The scenario shows what the program claims: under rota every quiet item goes out within
// one cycle of coming due and every tenant gets its max-min fair share; under first come,
// first served quiet tenants queue behind the noisy backlog.
func TestRotaServesQuietTenantsWithinACycle(t *testing.T) {
	r := defaultResult(t)
	fcfs, rota := r.Policies[0], r.Policies[1]
	if fcfs.Name != "fcfs" || rota.Name != "rota" {
		t.Fatalf("policies %q, %q; want fcfs, rota", fcfs.Name, rota.Name)
	}
	if rota.QuietWaitMax > r.Config.Cycle {
		t.Errorf("rota: quiet wait max %v, want ≤ one cycle (%v)", rota.QuietWaitMax, r.Config.Cycle)
	}
	if fcfs.QuietWaitP50 < 10*time.Minute {
		t.Errorf("fcfs: quiet wait p50 %v; the noisy backlog should hold quiet items for over 10 minutes", fcfs.QuietWaitP50)
	}
	if math.Abs(rota.Jain-1) > 0.001 {
		t.Errorf("rota: Jain's index %.4f, want 1 within 0.001", rota.Jain)
	}
	if fcfs.Jain > 0.5 {
		t.Errorf("fcfs: Jain's index %.4f, want far below 1", fcfs.Jain)
	}
	// Both policies use the whole capacity: the system is overloaded for good.
	full := r.Config.Capacity * r.Config.Cycles
	for _, p := range r.Policies {
		if n := p.QuietServed + p.NoisyServed; n != full {
			t.Errorf("%s: %d dispatches, want the whole capacity %d", p.Name, n, full)
		}
	}
	// rota gives the quiet tenants what they need and the noisy one everything else.
	if rota.QuietServed <= fcfs.QuietServed || rota.NoisyServed >= fcfs.NoisyServed {
		t.Errorf("rota served quiet %d, noisy %d; fcfs quiet %d, noisy %d", rota.QuietServed, rota.NoisyServed, fcfs.QuietServed, fcfs.NoisyServed)
	}
}

// smallConfig is a scenario small enough to run many times.
func smallConfig(seed uint64) Config {
	return Config{
		Seed: seed, QuietTenants: 20, QuietSources: [2]int{1, 3}, NoisySources: 2000,
		Interval: 5 * time.Minute, Cycle: 10 * time.Second, Capacity: 40, Cycles: 120, BucketCycles: 6,
		NewIndex: newMemory,
	}
}

func table(t *testing.T, cfg Config) string {
	t.Helper()
	r, err := Simulate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The same seed gives the same table; another seed draws other tenants.
func TestSeedDeterminesTheRun(t *testing.T) {
	a, b := table(t, smallConfig(7)), table(t, smallConfig(7))
	if a != b {
		t.Errorf("two runs of seed 7 differ:\n%s\n%s", a, b)
	}
	c := table(t, smallConfig(8))
	if strings.Replace(c, "seed 8", "seed 7", 1) == a {
		t.Errorf("seeds 7 and 8 print the same numbers:\n%s", c)
	}
}

// The SVG is well-formed XML with an svg root, two axes with labels, one polyline per
// policy and statistic, and a legend naming each.
func TestSVG(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteSVG(&buf, defaultResult(t)); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&buf)
	var (
		root      string
		texts     []string
		polylines int
		groups    = map[string]bool{}
		inText    bool
	)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			switch tok.Name.Local {
			case "polyline":
				polylines++
			case "g":
				for _, a := range tok.Attr {
					if a.Name.Local == "id" {
						groups[a.Value] = true
					}
				}
			case "text":
				inText = true
				texts = append(texts, "")
			}
		case xml.EndElement:
			if tok.Name.Local == "text" {
				inText = false
			}
		case xml.CharData:
			if inText {
				texts[len(texts)-1] += string(tok)
			}
		}
	}
	if root != "svg" {
		t.Errorf("root element %q, want svg", root)
	}
	for _, g := range []string{"x-axis", "y-axis", "legend", "series"} {
		if !groups[g] {
			t.Errorf("no <g id=%q>", g)
		}
	}
	if polylines != 4 {
		t.Errorf("%d polylines, want 4 (two policies × p50, p99)", polylines)
	}
	for _, want := range []string{
		"simulated time (minutes)",
		"quiet tenants' wait, due to dispatched (log scale)",
		"first come, first served, p99", "first come, first served, p50", "rota, p99", "rota, p50",
		"0", "90", "1 s", "10 s", "1 min", "10 min",
	} {
		found := false
		for _, s := range texts {
			found = found || s == want
		}
		if !found {
			t.Errorf("no <text> %q in the SVG; texts: %q", want, texts)
		}
	}
}

// Water-filling gives each tenant min(due, level), the shares adding up to the capacity.
func TestAccrueFairShare(t *testing.T) {
	for _, tc := range []struct {
		name     string
		due      []int
		capacity int
		want     []float64
	}{
		{"demand fits", []int{1, 0, 3}, 10, []float64{1, 0, 3}},
		{"equal split", []int{5, 5}, 4, []float64{2, 2}},
		{"small demands first", []int{1, 100, 2}, 10, []float64{1, 7, 2}},
		{"fractional level", []int{3, 3, 3}, 4, []float64{4.0 / 3, 4.0 / 3, 4.0 / 3}},
		{"nobody due", []int{0, 0}, 5, []float64{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fair := make([]float64, len(tc.due))
			var scratch []int
			accrueFairShare(tc.due, tc.capacity, fair, &scratch)
			for i := range fair {
				if math.Abs(fair[i]-tc.want[i]) > 1e-9 {
					t.Fatalf("due %v capacity %d: shares %v, want %v", tc.due, tc.capacity, fair, tc.want)
				}
			}
		})
	}
}

// Jain's index is 1 for equal ratios and 1/n when one tenant has everything; tenants
// without a fair share are left out.
func TestJain(t *testing.T) {
	for _, tc := range []struct {
		served []int
		fair   []float64
		want   float64
	}{
		{[]int{2, 4, 6}, []float64{1, 2, 3}, 1},
		{[]int{9, 0, 0}, []float64{3, 3, 3}, 1.0 / 3},
		{[]int{1, 3}, []float64{1, 1}, 16.0 / 20},
		{[]int{5, 7}, []float64{5, 0}, 1},
		{[]int{0}, []float64{0}, 0},
	} {
		if got := jain(tc.served, tc.fair); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("jain(%v, %v) = %v, want %v", tc.served, tc.fair, got, tc.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	s := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for p, want := range map[int]time.Duration{50: 5, 99: 10, 100: 10, 10: 1, 0: 1} {
		if got := percentile(s, p); got != want {
			t.Errorf("percentile(1…10, %d) = %d, want %d", p, got, want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("percentile(empty) = %v, want 0", got)
	}
}

func TestNiceTicks(t *testing.T) {
	for _, tc := range []struct{ hi, step, top float64 }{
		{180, 20, 180}, {19.4, 2, 20}, {1, 0.1, 1}, {0, 1, 1}, {37, 5, 40},
	} {
		step, top := niceTicks(tc.hi)
		if math.Abs(step-tc.step) > 1e-9 || math.Abs(top-tc.top) > 1e-9 {
			t.Errorf("niceTicks(%v) = %v, %v; want %v, %v", tc.hi, step, top, tc.step, tc.top)
		}
	}
}

// A config that cannot be simulated is refused with an error naming the field.
func TestConfigValidate(t *testing.T) {
	for field, mutate := range map[string]func(*Config){
		"QuietTenants": func(c *Config) { c.QuietTenants = 0 },
		"QuietSources": func(c *Config) { c.QuietSources = [2]int{3, 2} },
		"NoisySources": func(c *Config) { c.NoisySources = 0 },
		"Cycle":        func(c *Config) { c.Cycle = 0 },
		"Interval":     func(c *Config) { c.Interval = time.Second },
		"Capacity":     func(c *Config) { c.Capacity = 0 },
		"Cycles":       func(c *Config) { c.Cycles = 0 },
		"BucketCycles": func(c *Config) { c.BucketCycles = 0 },
		"NewIndex":     func(c *Config) { c.NewIndex = nil },
	} {
		cfg := smallConfig(1)
		mutate(&cfg)
		_, err := Simulate(cfg)
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s broken: error %v, want one naming %s", field, err, field)
		}
	}
}
