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

// Config is one fairness simulation: the tenants, their sources, the cadence and the
// capacity.
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
	AlarmAfter   time.Duration        // the wait past which a Runner raises its noisy-neighbour alarm
	NewIndex     func() duework.Index // a fresh, empty index for each policy
}

// DefaultConfig is the scenario the program runs without flags: 1,000 quiet tenants with 2
// to 4 sources each and one noisy tenant with 10,000, every source due every 15 minutes,
// 100 dispatches per 10-second cycle (600 a minute, while the sources ask for about 870),
// for 45 simulated minutes; the alarm threshold is a Runner's default, ten cycles.
// newIndex gives each policy a fresh index.
func DefaultConfig(seed uint64, newIndex func() duework.Index) Config {
	return Config{
		Seed:         seed,
		QuietTenants: 1000,
		QuietSources: [2]int{2, 4},
		NoisySources: 10_000,
		Interval:     15 * time.Minute,
		Cycle:        10 * time.Second,
		Capacity:     100,
		Cycles:       270,
		BucketCycles: 6,
		AlarmAfter:   10 * 10 * time.Second, // ten cycles, the Runner's default
		NewIndex:     newIndex,
	}
}

// Validate reports every field of c that cannot be simulated, joined.
func (c Config) Validate() error {
	var errs []error
	bad := func(broken bool, format string, args ...any) {
		if broken {
			errs = append(errs, fmt.Errorf("noisyneighbor: "+format, args...))
		}
	}
	bad(c.QuietTenants < 1, "QuietTenants must be ≥ 1, got %d", c.QuietTenants)
	bad(c.QuietSources[0] < 1 || c.QuietSources[1] < c.QuietSources[0], "QuietSources must be 1 ≤ min ≤ max, got %v", c.QuietSources)
	bad(c.NoisySources < 1, "NoisySources must be ≥ 1, got %d", c.NoisySources)
	bad(c.Cycle <= 0, "Cycle must be > 0, got %v", c.Cycle)
	bad(c.Interval < c.Cycle, "Interval must be ≥ Cycle, got %v", c.Interval)
	bad(c.Capacity < 1 || c.Capacity > duework.MaxLimit, "Capacity must be in [1, %d], got %d", duework.MaxLimit, c.Capacity)
	bad(c.Cycles < 1, "Cycles must be ≥ 1, got %d", c.Cycles)
	bad(c.BucketCycles < 1, "BucketCycles must be ≥ 1, got %d", c.BucketCycles)
	bad(c.AlarmAfter < 0, "AlarmAfter must be ≥ 0, got %v", c.AlarmAfter)
	bad(c.NewIndex == nil, "NewIndex must not be nil")
	return errors.Join(errs...)
}

// Result is what Simulate measured: one PolicyResult per policy, in the order of Policies.
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
	// LongestWait is the longest lane wait of the run: at each cycle, now − WaitingSince,
	// how long the longest-waiting ready tenant the cycle did not serve has waited for its
	// turn. AlarmCycles counts the cycles whose wait passed Config.AlarmAfter: the cycles
	// in which a Runner's noisy-neighbour alarm is on.
	LongestWait time.Duration
	AlarmCycles int
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

// picker hands out one cycle's items at now, claimed, and reports the cycle's lane wait:
// the Turn of the first ready tenant it left waiting, zero when none.
type picker func(ctx context.Context, now time.Time) (claims []duework.Claim, waitingSince time.Time, err error)

// Policies names the compared policies in the order Simulate runs and reports them.
var Policies = []string{"fcfs", "rota"}

// lane is the one lane of the simulated dispatcher.
const lane dispatch.Lane = "all"

// newRotaDispatcher returns rota's Dispatcher over idx with one lane whose per-user,
// per-lane and global limits are all capacity: round robin over the tenants in turn order.
func newRotaDispatcher(idx duework.Index, capacity int, claimFor time.Duration, laneFor dispatch.LaneFor) (*dispatch.Dispatcher, error) {
	return dispatch.New(idx, dispatch.Config{
		Lanes:            []dispatch.LaneCapacity{{Lane: lane, PerUserLimit: capacity, PerCycleLimit: capacity}},
		GlobalBatchLimit: capacity,
		LaneFor:          laneFor,
		ClaimFor:         claimFor,
	})
}

// allInOneLane is the LaneFor of the simulated dispatcher.
func allInOneLane(context.Context, string) (dispatch.Lane, error) { return lane, nil }

// newPicker returns the named policy over idx, with claims that last claimFor.
//
// "fcfs" is first come, first served: the capacity earliest-due entries, whoever they
// belong to (DueBefore's (DueAt, UserID, WorkKey) order), claimed. It has no lanes; its
// wait is read the same way, from the front of the index's turn queue after the claim.
//
// "rota" is rota's Dispatcher (see newRotaDispatcher); its wait is its LaneReport's.
func newPicker(name string, idx duework.Index, capacity int, claimFor time.Duration) (picker, error) {
	switch name {
	case "fcfs":
		return func(ctx context.Context, now time.Time) ([]duework.Claim, time.Time, error) {
			due, err := idx.DueBefore(ctx, now, capacity)
			if err != nil {
				return nil, time.Time{}, err
			}
			keys := make([]duework.Key, len(due))
			for i, e := range due {
				keys[i] = e.Key()
			}
			claims, err := idx.Claim(ctx, keys, now, now.Add(claimFor))
			if err != nil {
				return nil, time.Time{}, err
			}
			front, err := idx.Ready(ctx, duework.ReadyQuery{Now: now, Users: 1, PerUser: 1})
			if err != nil || len(front.Heads) == 0 || !front.Heads[0].Turn.Before(now) {
				return claims, time.Time{}, err // nobody waits: only tenants served now are ready
			}
			return claims, front.Heads[0].Turn, nil
		}, nil
	case "rota":
		d, err := newRotaDispatcher(idx, capacity, claimFor, allInOneLane)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, now time.Time) ([]duework.Claim, time.Time, error) {
			b, err := d.Dispatch(ctx, now)
			if err != nil {
				return nil, time.Time{}, err
			}
			out := make([]duework.Claim, len(b.Items))
			for i, it := range b.Items {
				out[i] = it.Claim
			}
			return out, b.Lanes[0].WaitingSince, nil
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
		tc, err := tenancy.NewContext(fmt.Sprintf("tenant-%06d", i))
		if err != nil {
			return nil, err
		}
		n := cfg.QuietSources[0] + rng.IntN(cfg.QuietSources[1]-cfg.QuietSources[0]+1)
		tenants = append(tenants, tenant{tc: tc, sources: n, quiet: true})
	}
	return tenants, nil
}

// sourceKey is the WorkKey of a tenant's source s.
func sourceKey(s int) string { return fmt.Sprintf("src-%06d", s) }

// calendar lists, per cycle, the tenants one of whose entries turns due at that cycle: the
// first cycle whose time is at or after the entry's DueAt. It mirrors the index for the
// fair-share accounting without reading it.
type calendar struct {
	cycle time.Duration
	due   [][]int32 // due[k]: one tenant index per entry turning due at cycle k
}

func newCalendar(cfg Config) *calendar {
	return &calendar{cycle: cfg.Cycle, due: make([][]int32, cfg.Cycles+1)}
}

// add notes that tenant t has an entry due at at.
func (c *calendar) add(t int, at time.Time) {
	k := max(int((at.Sub(start)+c.cycle-1)/c.cycle), 1)
	if k < len(c.due) {
		c.due[k] = append(c.due[k], int32(t))
	}
}

// scheduleSources schedules every tenant's sources on idx, their first due times drawn from
// seed uniformly over [start, start+spread), and notes them in cal.
func scheduleSources(ctx context.Context, idx duework.Index, tenants []tenant, seed uint64, spread time.Duration, cal *calendar) error {
	rng := rand.New(rand.NewPCG(seed, 2))
	for t, tn := range tenants {
		for s := range tn.sources {
			e := duework.Entry{
				UserID:  tn.tc.UserID(),
				WorkKey: sourceKey(s),
				Tier:    "fixed",
				DueAt:   start.Add(time.Duration(rng.Int64N(int64(spread)))),
			}
			if err := idx.Schedule(ctx, tn.tc, e); err != nil {
				return err
			}
			cal.add(t, e.DueAt)
		}
	}
	return nil
}

// completeAll completes every claim at once, as a hit, due again after the cadence and its
// jitter, in one CompleteMany, and notes the next due times in cal. ids maps a UserID to
// its tenant.
func completeAll(ctx context.Context, idx duework.Index, tenants []tenant, ids map[string]int, claims []duework.Claim, now time.Time, interval time.Duration, cal *calendar) error {
	policy := cadence.Backoff{Base: interval, Max: interval, Factor: 1}
	done := make([]duework.Done, len(claims))
	for i, c := range claims {
		t, ok := ids[c.Entry.UserID]
		if !ok {
			return fmt.Errorf("unknown user %q", c.Entry.UserID)
		}
		next := duework.Advance(c.Entry, policy, true, now)
		next.DueAt = next.DueAt.Add(cadence.Jitter(c.Entry.UserID+"/"+c.Entry.WorkKey, now, interval, jitterFraction))
		done[i] = duework.Done{Tenant: tenants[t].tc, Claim: c, Next: next}
		cal.add(t, next.DueAt)
	}
	errs, err := idx.CompleteMany(ctx, done)
	if err != nil {
		return err
	}
	return errors.Join(errs...)
}

// tenantIDs maps each tenant's UserID to its index in tenants.
func tenantIDs(tenants []tenant) map[string]int {
	ids := make(map[string]int, len(tenants))
	for t, tn := range tenants {
		ids[tn.tc.UserID()] = t
	}
	return ids
}

// simulatePolicy simulates one policy on idx.
func simulatePolicy(cfg Config, tenants []tenant, idx duework.Index, name string, pick picker) (PolicyResult, error) {
	ctx := context.Background()
	ids := tenantIDs(tenants)
	cal := newCalendar(cfg)
	// The same seed gives both policies the same first due times.
	if err := scheduleSources(ctx, idx, tenants, cfg.Seed, cfg.Interval, cal); err != nil {
		return PolicyResult{}, err
	}

	pr := PolicyResult{Name: name}
	dueCount := make([]int, len(tenants)) // due, unclaimed entries per tenant
	served := make([]int, len(tenants))
	fair := make([]float64, len(tenants))
	var quietWaits, bucket []time.Duration
	var demands []int
	for k := 1; k <= cfg.Cycles; k++ {
		now := start.Add(time.Duration(k) * cfg.Cycle)
		for _, t := range cal.due[k] {
			dueCount[t]++
		}
		cal.due[k] = nil
		accrueFairShare(dueCount, cfg.Capacity, fair, &demands)

		claims, waitingSince, err := pick(ctx, now)
		if err != nil {
			return PolicyResult{}, fmt.Errorf("cycle %d: %w", k, err)
		}
		if !waitingSince.IsZero() {
			wait := now.Sub(waitingSince)
			pr.LongestWait = max(pr.LongestWait, wait)
			if wait > cfg.AlarmAfter {
				pr.AlarmCycles++
			}
		}
		for _, c := range claims {
			t := ids[c.Entry.UserID]
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
		}
		if err := completeAll(ctx, idx, tenants, ids, claims, now, cfg.Interval, cal); err != nil {
			return PolicyResult{}, fmt.Errorf("cycle %d: %w", k, err)
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
