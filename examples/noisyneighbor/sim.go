package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// Config is one simulation: the tenants, their sources, the cadence and the capacity.
type Config struct {
	Seed         uint64               // seeds the quiet tenants' source counts and every source's first due time
	QuietTenants int                  // tenants with a few sources each
	QuietSources [2]int               // each quiet tenant has between [0] and [1] sources, inclusive
	NoisySources int                  // sources of the one noisy tenant
	Interval     time.Duration        // a source is due again Interval after it ran
	Cycle        time.Duration        // simulated time between two dispatch cycles
	Capacity     int                  // items dispatched per cycle, under both policies
	Cycles       int                  // cycles simulated
	BucketCycles int                  // cycles per point of the chart's series
	NewIndex     func() duework.Index // a fresh, empty index for each policy
}

// DefaultConfig is the scenario the program runs without flags: 1,000 quiet tenants with 2
// to 4 sources each and one noisy tenant with 100,000, every source due every 15 minutes,
// 500 dispatches per 10-second cycle (3,000 per minute, while the sources ask for nearly
// 7,000), for 90 simulated minutes. newIndex gives each policy a fresh index.
func DefaultConfig(seed uint64, newIndex func() duework.Index) Config {
	return Config{
		Seed:         seed,
		QuietTenants: 1000,
		QuietSources: [2]int{2, 4},
		NoisySources: 100_000,
		Interval:     15 * time.Minute,
		Cycle:        10 * time.Second,
		Capacity:     500,
		Cycles:       540,
		BucketCycles: 6,
		NewIndex:     newIndex,
	}
}

// Validate names the first field of c that cannot be simulated.
func (c Config) Validate() error {
	switch {
	case c.QuietTenants < 1:
		return fmt.Errorf("noisyneighbor: QuietTenants must be ≥ 1, got %d", c.QuietTenants)
	case c.QuietSources[0] < 1 || c.QuietSources[1] < c.QuietSources[0]:
		return fmt.Errorf("noisyneighbor: QuietSources must be 1 ≤ min ≤ max, got %v", c.QuietSources)
	case c.NoisySources < 1:
		return fmt.Errorf("noisyneighbor: NoisySources must be ≥ 1, got %d", c.NoisySources)
	case c.Cycle <= 0:
		return fmt.Errorf("noisyneighbor: Cycle must be > 0, got %v", c.Cycle)
	case c.Interval < c.Cycle:
		return fmt.Errorf("noisyneighbor: Interval must be ≥ Cycle, got %v", c.Interval)
	case c.Capacity < 1:
		return fmt.Errorf("noisyneighbor: Capacity must be ≥ 1, got %d", c.Capacity)
	case c.Cycles < 1:
		return fmt.Errorf("noisyneighbor: Cycles must be ≥ 1, got %d", c.Cycles)
	case c.BucketCycles < 1:
		return fmt.Errorf("noisyneighbor: BucketCycles must be ≥ 1, got %d", c.BucketCycles)
	case c.NewIndex == nil:
		return errors.New("noisyneighbor: NewIndex must not be nil")
	}
	return nil
}

// Result is what Simulate measured: one PolicyResult per policy, first-come-first-served
// first.
type Result struct {
	Config   Config
	Policies []PolicyResult
}

// PolicyResult is one policy's run.
type PolicyResult struct {
	Name string
	// QuietWaitP50, QuietWaitP99 and QuietWaitMax are over every dispatch of a quiet
	// tenant's source in the run; a wait is the dispatching cycle's time minus the entry's
	// DueAt.
	QuietWaitP50, QuietWaitP99, QuietWaitMax time.Duration
	QuietServed                              int     // dispatches of quiet tenants' sources
	NoisyServed                              int     // dispatches of the noisy tenant's sources
	NoisyPerHour                             float64 // NoisyServed per simulated hour
	Jain                                     float64 // see the package doc, "Fairness"
	// Series is the quiet tenants' wait over time: one point per BucketCycles cycles.
	Series []Point
}

// Point is one bucket of the chart: the quiet tenants' dispatches in the cycles ending at At
// (time since the start of the run).
type Point struct {
	At       time.Duration
	P50, P99 time.Duration
	N        int // quiet dispatches in the bucket; P50 and P99 are zero when N is 0
}

// picker hands out one cycle's items at now, claimed.
type picker func(ctx context.Context, now time.Time) ([]duework.Claim, error)

// Policies names the compared policies in the order Simulate runs and reports them.
var Policies = []string{"fcfs", "rota"}

// newPicker returns the named policy over idx, with claims that last claimFor.
//
// "fcfs" is first come, first served: the capacity earliest-due entries, whoever they
// belong to (DueBefore's (DueAt, UserID, WorkKey) order), claimed.
//
// "rota" is rota's Dispatcher with one lane whose every limit is the capacity: round robin
// over the tenants with due work, least recently served first.
func newPicker(name string, idx duework.Index, capacity int, claimFor time.Duration) (picker, error) {
	switch name {
	case "fcfs":
		return func(ctx context.Context, now time.Time) ([]duework.Claim, error) {
			due, err := idx.DueBefore(ctx, now, capacity)
			if err != nil || len(due) == 0 {
				return nil, err
			}
			keys := make([]duework.Key, len(due))
			for i, e := range due {
				keys[i] = e.Key()
			}
			return idx.Claim(ctx, keys, now, now.Add(claimFor))
		}, nil
	case "rota":
		d, err := dispatch.New(idx, dispatch.Config{
			Lanes:            []dispatch.LaneCapacity{{Lane: "all", PerUserLimit: capacity, PerCycleLimit: capacity}},
			GlobalBatchLimit: capacity,
			LaneFor:          func(context.Context, string) (dispatch.Lane, error) { return "all", nil },
			ClaimFor:         claimFor,
		})
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, now time.Time) ([]duework.Claim, error) {
			b, err := d.Dispatch(ctx, now)
			if err != nil {
				return nil, err
			}
			out := make([]duework.Claim, len(b.Items))
			for i, it := range b.Items {
				out[i] = it.Claim
			}
			return out, nil
		}, nil
	}
	return nil, fmt.Errorf("noisyneighbor: unknown policy %q", name)
}

// jitterFraction spreads each rescheduled source over up to a tenth of the interval after its
// cadence, with cadence.Jitter, as a host would.
const jitterFraction = 0.1

// start is the simulated clock's origin.
var start = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// tenant is one simulated tenant.
type tenant struct {
	tc      tenancy.Context
	sources int
	quiet   bool
}

// Simulate runs cfg under first-come-first-served and under rota's Dispatcher, each on a
// fresh index holding the same entries, and returns what each did. It is deterministic: the
// same cfg gives the same Result.
//
// Every cycle k (k = 1…Cycles, at start + k·Cycle) hands out at most Capacity due entries
// and completes each one at once — the work itself takes no simulated time — rescheduling
// it with duework.Advance (a hit) under a fixed cadence of Interval plus cadence.Jitter of up
// to a tenth of Interval, so it is due again between Interval and 1.1·Interval after the
// cycle that ran it.
func Simulate(cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	tenants, err := makeTenants(cfg)
	if err != nil {
		return Result{}, err
	}
	res := Result{Config: cfg}
	for _, name := range Policies {
		idx := cfg.NewIndex()
		pick, err := newPicker(name, idx, cfg.Capacity, cfg.Cycle)
		if err != nil {
			return Result{}, err
		}
		pr, err := simulatePolicy(cfg, tenants, idx, name, pick)
		if err != nil {
			return Result{}, fmt.Errorf("noisyneighbor: policy %s: %w", name, err)
		}
		res.Policies = append(res.Policies, pr)
	}
	return res, nil
}

// makeTenants draws the quiet tenants' source counts from the seed. Tenant 0 is the noisy
// one; its ID sorts after every quiet tenant's, so that ties in DueAt do not favour it.
func makeTenants(cfg Config) ([]tenant, error) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 1))
	tenants := make([]tenant, 0, cfg.QuietTenants+1)
	tc, err := tenancy.NewContext("tenant-noisy")
	if err != nil {
		return nil, err
	}
	tenants = append(tenants, tenant{tc: tc, sources: cfg.NoisySources})
	for i := range cfg.QuietTenants {
		tc, err := tenancy.NewContext(fmt.Sprintf("tenant-%04d", i))
		if err != nil {
			return nil, err
		}
		n := cfg.QuietSources[0] + rng.IntN(cfg.QuietSources[1]-cfg.QuietSources[0]+1)
		tenants = append(tenants, tenant{tc: tc, sources: n, quiet: true})
	}
	return tenants, nil
}

// simulatePolicy simulates one policy on idx.
func simulatePolicy(cfg Config, tenants []tenant, idx duework.Index, name string, pick picker) (PolicyResult, error) {
	ctx := context.Background()
	cadencePolicy := cadence.Backoff{Base: cfg.Interval, Max: cfg.Interval, Factor: 1}
	ids := make(map[string]int, len(tenants))
	for t, tn := range tenants {
		ids[tn.tc.UserID()] = t
	}

	// becomesDue[k] lists, once per entry, the tenants whose entry turns due at cycle k: the
	// first cycle whose time is at or after its DueAt. dueCount mirrors the index's due,
	// unclaimed entries per tenant for the fair-share accounting.
	becomesDue := make([][]int32, cfg.Cycles+1)
	cycleOf := func(at time.Time) int {
		k := int((at.Sub(start) + cfg.Cycle - 1) / cfg.Cycle)
		return max(k, 1)
	}
	addDue := func(t int, at time.Time) {
		if k := cycleOf(at); k <= cfg.Cycles {
			becomesDue[k] = append(becomesDue[k], int32(t))
		}
	}

	// The same seed gives both policies the same first due times.
	rng := rand.New(rand.NewPCG(cfg.Seed, 2))
	for t, tn := range tenants {
		for s := range tn.sources {
			e := duework.Entry{
				UserID:  tn.tc.UserID(),
				WorkKey: fmt.Sprintf("src-%06d", s),
				Tier:    "fixed",
				DueAt:   start.Add(time.Duration(rng.Int64N(int64(cfg.Interval)))),
			}
			if err := idx.Schedule(ctx, tn.tc, e); err != nil {
				return PolicyResult{}, err
			}
			addDue(t, e.DueAt)
		}
	}

	pr := PolicyResult{Name: name}
	dueCount := make([]int, len(tenants))
	served := make([]int, len(tenants))
	fair := make([]float64, len(tenants))
	var quietWaits, bucket []time.Duration
	var demands []int
	for k := 1; k <= cfg.Cycles; k++ {
		now := start.Add(time.Duration(k) * cfg.Cycle)
		for _, t := range becomesDue[k] {
			dueCount[t]++
		}
		becomesDue[k] = nil
		accrueFairShare(dueCount, cfg.Capacity, fair, &demands)

		claims, err := pick(ctx, now)
		if err != nil {
			return PolicyResult{}, fmt.Errorf("cycle %d: %w", k, err)
		}
		for _, c := range claims {
			t, ok := ids[c.Entry.UserID]
			if !ok {
				return PolicyResult{}, fmt.Errorf("cycle %d: unknown user %q", k, c.Entry.UserID)
			}
			dueCount[t]--
			served[t]++
			if tenants[t].quiet {
				w := now.Sub(c.Entry.DueAt)
				quietWaits = append(quietWaits, w)
				bucket = append(bucket, w)
				pr.QuietServed++
			} else {
				pr.NoisyServed++
			}
			next := duework.Advance(c.Entry, cadencePolicy, true, now)
			next.DueAt = next.DueAt.Add(cadence.Jitter(c.Entry.UserID+"/"+c.Entry.WorkKey, now, cfg.Interval, jitterFraction))
			if err := idx.Complete(ctx, tenants[t].tc, c, next); err != nil {
				return PolicyResult{}, fmt.Errorf("cycle %d: %w", k, err)
			}
			addDue(t, next.DueAt)
		}
		if k%cfg.BucketCycles == 0 || k == cfg.Cycles {
			slices.Sort(bucket)
			pr.Series = append(pr.Series, Point{
				At:  time.Duration(k) * cfg.Cycle,
				P50: percentile(bucket, 50),
				P99: percentile(bucket, 99),
				N:   len(bucket),
			})
			bucket = bucket[:0]
		}
	}

	slices.Sort(quietWaits)
	pr.QuietWaitP50 = percentile(quietWaits, 50)
	pr.QuietWaitP99 = percentile(quietWaits, 99)
	pr.QuietWaitMax = percentile(quietWaits, 100)
	hours := (time.Duration(cfg.Cycles) * cfg.Cycle).Hours()
	pr.NoisyPerHour = float64(pr.NoisyServed) / hours
	pr.Jain = jain(served, fair)
	return pr, nil
}

// accrueFairShare adds to fair each tenant's max-min fair share of one cycle's capacity,
// given the tenants' due counts: water-filling, every tenant with due work gets
// min(due, level), the level chosen so that the shares add up to min(capacity, total due).
// demands is scratch space.
func accrueFairShare(dueCount []int, capacity int, fair []float64, demands *[]int) {
	d := (*demands)[:0]
	for _, n := range dueCount {
		if n > 0 {
			d = append(d, n)
		}
	}
	*demands = d
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	level := math.Inf(1)
	left := float64(capacity)
	for i, n := range d {
		rest := float64(len(d) - i)
		if float64(n)*rest > left {
			level = left / rest
			break
		}
		left -= float64(n)
	}
	for t, n := range dueCount {
		if n > 0 {
			fair[t] += math.Min(float64(n), level)
		}
	}
}

// jain is Jain's fairness index (Σx)² / (n·Σx²) over x_t = served_t / fair_t for the n
// tenants with a positive fair share: 1 when every tenant got exactly its max-min fair share
// of the run, 1/n when one tenant got everything.
func jain(served []int, fair []float64) float64 {
	var sum, sumSq float64
	n := 0
	for t, f := range fair {
		if f <= 0 {
			continue
		}
		x := float64(served[t]) / f
		sum += x
		sumSq += x * x
		n++
	}
	if n == 0 || sumSq == 0 {
		return 0
	}
	return sum * sum / (float64(n) * sumSq)
}

// percentile returns the p-th percentile (nearest rank) of sorted, zero when it is empty;
// p = 100 is the maximum.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 · n)
	return sorted[max(rank, 1)-1]
}
