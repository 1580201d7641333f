package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/golden"
	"github.com/rotaworks/rota/tenancy"
)

func newMemory() duework.Index { return duework.NewMemory() }

var (
	defaultOnce sync.Once
	defaultRes  results
	defaultErr  error
)

// defaultResults are the program's own runs (seed 1, no wall clock), simulated once for
// every test that reads them.
func defaultResults(t *testing.T) results {
	t.Helper()
	defaultOnce.Do(func() { defaultRes, defaultErr = simulateAll(options{seed: 1}) })
	if defaultErr != nil {
		t.Fatal(defaultErr)
	}
	return defaultRes
}

// The program's output and both charts are deterministic: seed 1 prints exactly the golden
// tables and writes exactly the golden charts.
func TestOutputGolden(t *testing.T) {
	dir := t.TempDir()
	opts := options{seed: 1, svg: filepath.Join(dir, "wait.svg"), costSVG: filepath.Join(dir, "cost.svg")}
	var out bytes.Buffer
	if err := report(&out, defaultResults(t), opts); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "output-seed1.golden"), bytes.ReplaceAll(out.Bytes(), []byte(dir), []byte("DIR")))
	for name, want := range map[string]string{"wait.svg": "wait-seed1.svg", "cost.svg": "cost.svg"} {
		chart, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", want), chart)
	}
}

// The fairness run shows what the program claims: under rota every quiet item goes out
// within one cycle of coming due, every tenant gets its max-min fair share and the alarm
// never fires; under first come, first served quiet tenants queue behind the noisy backlog
// and the alarm is on most of the run.
func TestRotaServesQuietTenantsWithinACycle(t *testing.T) {
	r := defaultResults(t).fairness
	fcfs, rota := r.Policies[0], r.Policies[1]
	if fcfs.Name != "fcfs" || rota.Name != "rota" {
		t.Fatalf("policies %q, %q; want fcfs, rota", fcfs.Name, rota.Name)
	}
	if rota.QuietWaitMax > r.Config.Cycle {
		t.Errorf("rota: quiet wait max %v, want ≤ one cycle (%v)", rota.QuietWaitMax, r.Config.Cycle)
	}
	if fcfs.QuietWaitP50 < 5*time.Minute {
		t.Errorf("fcfs: quiet wait p50 %v; the noisy backlog should hold quiet items for minutes", fcfs.QuietWaitP50)
	}
	if math.Abs(rota.Jain-1) > 0.001 {
		t.Errorf("rota: Jain's index %.4f, want 1 within 0.001", rota.Jain)
	}
	if fcfs.Jain > 0.5 {
		t.Errorf("fcfs: Jain's index %.4f, want far below 1", fcfs.Jain)
	}
	if rota.LongestWait > r.Config.Cycle || rota.AlarmCycles != 0 {
		t.Errorf("rota: longest wait %v, alarm on in %d cycles; want ≤ one cycle and never", rota.LongestWait, rota.AlarmCycles)
	}
	if fcfs.LongestWait < fcfs.QuietWaitP50 || fcfs.AlarmCycles < r.Config.Cycles/2 {
		t.Errorf("fcfs: longest wait %v, alarm on in %d of %d cycles; want at least the quiet p50 %v and most cycles",
			fcfs.LongestWait, fcfs.AlarmCycles, r.Config.Cycles, fcfs.QuietWaitP50)
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

// The cost run shows a cycle's cost staying flat: with 100 times as many tenants waiting,
// every cycle reads at most what it can hand out, and the largest figures of the two runs
// are the same.
func TestCycleCostIsFlat(t *testing.T) {
	r := defaultResults(t).cost
	c := r.Config
	if len(r.Runs) != 2 || r.Runs[0].QuietTenants != 1_000 || r.Runs[1].QuietTenants != 100_000 {
		t.Fatalf("runs %+v, want 1,000 and 100,000 quiet tenants", r.Runs)
	}
	type peak struct{ users, entries, calls, laneFor int }
	var peaks []peak
	for _, run := range r.Runs {
		if len(run.Cycles) != c.Cycles {
			t.Fatalf("%d quiet: %d cycles, want %d", run.QuietTenants, len(run.Cycles), c.Cycles)
		}
		if run.Cycles[0].DueTenants != run.QuietTenants+1 {
			t.Errorf("%d quiet: %d tenants with due work at the first cycle, want every one", run.QuietTenants, run.Cycles[0].DueTenants)
		}
		if run.Wall != 0 {
			t.Errorf("%d quiet: wall clock %v measured without being asked", run.QuietTenants, run.Wall)
		}
		var p peak
		for k, cc := range run.Cycles {
			if cc.Dispatched != c.Capacity {
				t.Errorf("%d quiet, cycle %d: %d dispatched, want a full batch of %d", run.QuietTenants, k+1, cc.Dispatched, c.Capacity)
			}
			// One lane: its users, each with at most PerUserLimit (the capacity) entries.
			if cc.UsersRead > c.Capacity || cc.EntriesRead > 2*c.Capacity || cc.LaneForCalls > c.Capacity {
				t.Errorf("%d quiet, cycle %d: read %d users and %d entries, %d LaneFor calls; want at most %d, %d, %d",
					run.QuietTenants, k+1, cc.UsersRead, cc.EntriesRead, cc.LaneForCalls, c.Capacity, 2*c.Capacity, c.Capacity)
			}
			p = peak{max(p.users, cc.UsersRead), max(p.entries, cc.EntriesRead), max(p.calls, cc.IndexCalls), max(p.laneFor, cc.LaneForCalls)}
		}
		peaks = append(peaks, p)
	}
	if peaks[0] != peaks[1] {
		t.Errorf("largest figures per cycle differ: 1,000 quiet %+v, 100,000 quiet %+v", peaks[0], peaks[1])
	}
	if due := r.Runs[1].Cycles[c.Cycles-1].DueTenants; due < 90_000 {
		t.Errorf("100,000 quiet: %d tenants with due work at the last cycle; the run should stay overloaded", due)
	}
}

// The wall clock is measured and printed only when asked for.
func TestWallClockOnlyOnRequest(t *testing.T) {
	cfg := DefaultCostConfig()
	cfg.QuietTenants, cfg.NoisySources, cfg.Cycles, cfg.Wall = []int{10}, 20, 2, true
	r, err := SimulateCost(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Runs[0].Wall <= 0 {
		t.Errorf("wall clock %v with Wall set, want > 0", r.Runs[0].Wall)
	}
	var b strings.Builder
	if err := WriteCostTable(&b, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "wall clock") {
		t.Errorf("the table lacks the wall-clock column:\n%s", b.String())
	}
	b.Reset()
	if err := WriteCostTable(&b, defaultResults(t).cost); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "wall") {
		t.Errorf("the default table has a wall-clock column:\n%s", b.String())
	}
}

// The counting Index counts every call and what Ready and DueBefore return, and passes
// each call on.
func TestCountingIndex(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	c := &countingIndex{inner: duework.NewMemory()}
	for _, user := range []string{"ann", "bob"} {
		tc, err := tenancy.NewContext(user)
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"a", "b", "c"} {
			if err := c.Schedule(ctx, tc, duework.Entry{UserID: user, WorkKey: key, DueAt: now}); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.reset()
	page, err := c.Ready(ctx, duework.ReadyQuery{Now: now, Users: 2, PerUser: 2})
	if err != nil || len(page.Heads) != 2 {
		t.Fatalf("Ready: %d heads, %v", len(page.Heads), err)
	}
	if c.calls != 1 || c.users != 2 || c.entries != 4 {
		t.Errorf("after Ready: calls %d, users %d, entries %d; want 1, 2, 4", c.calls, c.users, c.entries)
	}
	due, err := c.DueBefore(ctx, now, 5)
	if err != nil || len(due) != 5 {
		t.Fatalf("DueBefore: %d entries, %v", len(due), err)
	}
	if _, err := c.Groups(ctx, now); err != nil {
		t.Fatal(err)
	}
	if c.calls != 3 || c.users != 2 || c.entries != 9 {
		t.Errorf("after DueBefore and Groups: calls %d, users %d, entries %d; want 3, 2, 9", c.calls, c.users, c.entries)
	}
}

// smallConfig is a fairness scenario small enough to run many times.
func smallConfig(seed uint64) Config {
	return Config{
		Seed: seed, QuietTenants: 20, QuietSources: [2]int{1, 3}, NoisySources: 2000,
		Interval: 5 * time.Minute, Cycle: 10 * time.Second, Capacity: 40, Cycles: 120, BucketCycles: 6,
		AlarmAfter: 100 * time.Second, NewIndex: newMemory,
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

// svgTexts checks that an SVG is well-formed XML with an svg root and the groups every
// chart has, and returns its number of polylines and the contents of its <text> elements.
func svgTexts(t *testing.T, svg []byte) (polylines int, texts []string) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var root string
	groups := map[string]bool{}
	inText := false
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
	return polylines, texts
}

// Both charts have axes with labels, one polyline per series and a legend naming each.
func TestSVG(t *testing.T) {
	r := defaultResults(t)
	for _, tc := range []struct {
		name      string
		write     func(io.Writer) error
		polylines int
		texts     []string
	}{
		{"wait", func(w io.Writer) error { return WriteSVG(w, r.fairness) }, 4, []string{
			"simulated time (minutes)", "quiet tenants' wait, due to dispatched (log scale)",
			"first come, first served, p99", "first come, first served, p50", "rota, p99", "rota, p50",
			"0", "45", "1 s", "10 s", "1 min", "10 min",
		}},
		{"cost", func(w io.Writer) error { return WriteCostSVG(w, r.cost) }, 6, []string{
			"cycle", "per cycle (log scale)",
			"tenants with due work, 1,000 quiet", "tenants with due work, 100,000 quiet",
			"users read, 1,000 quiet", "users read, 100,000 quiet", "entries read, 1,000 quiet", "entries read, 100,000 quiet",
			"0", "30", "1", "100", "1k", "100k", "1M",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := tc.write(&buf); err != nil {
				t.Fatal(err)
			}
			polylines, texts := svgTexts(t, buf.Bytes())
			if polylines != tc.polylines {
				t.Errorf("%d polylines, want %d", polylines, tc.polylines)
			}
			for _, want := range tc.texts {
				found := false
				for _, s := range texts {
					found = found || s == want
				}
				if !found {
					t.Errorf("no <text> %q in the SVG; texts: %q", want, texts)
				}
			}
		})
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

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 100001: "100,001", 1234567: "1,234,567", -1000: "-1,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// A config that cannot be simulated is refused with an error naming every broken field.
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
		"AlarmAfter":   func(c *Config) { c.AlarmAfter = -time.Second },
		"NewIndex":     func(c *Config) { c.NewIndex = nil },
	} {
		cfg := smallConfig(1)
		mutate(&cfg)
		_, err := Simulate(cfg)
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s broken: error %v, want one naming %s", field, err, field)
		}
	}
	err := Config{}.Validate()
	for _, field := range []string{"QuietTenants", "NoisySources", "Capacity", "NewIndex"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("the zero Config: error %v, want one naming %s among the rest", err, field)
		}
	}
}

func TestCostConfigValidate(t *testing.T) {
	for field, mutate := range map[string]func(*CostConfig){
		"QuietTenants must name": func(c *CostConfig) { c.QuietTenants = nil },
		"QuietTenants[1]":        func(c *CostConfig) { c.QuietTenants = []int{5, 0} },
		"NoisySources":           func(c *CostConfig) { c.NoisySources = 0 },
		"Cycle":                  func(c *CostConfig) { c.Cycle = 0 },
		"Interval":               func(c *CostConfig) { c.Interval = time.Second },
		"Capacity":               func(c *CostConfig) { c.Capacity = 0 },
		"Cycles":                 func(c *CostConfig) { c.Cycles = 0 },
	} {
		cfg := DefaultCostConfig()
		mutate(&cfg)
		_, err := SimulateCost(cfg)
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s broken: error %v, want one naming it", field, err)
		}
	}
}

// failingWriter refuses every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// A write that fails is not lost: report returns it, for the output and for a chart.
func TestReportReturnsWriteErrors(t *testing.T) {
	r := defaultResults(t)
	if err := report(failingWriter{}, r, options{seed: 1}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("report to a failing writer: %v, want the write's error", err)
	}
	missing := filepath.Join(t.TempDir(), "no-such-dir", "wait.svg")
	if err := report(io.Discard, r, options{seed: 1, svg: missing}); err == nil {
		t.Errorf("report with a chart path that cannot be created returned no error")
	}
}
