package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// CostConfig is the cost simulation: rota's Dispatcher over the same noisy tenant and
// capacity, once per entry of QuietTenants, with every source due from the start.
type CostConfig struct {
	QuietTenants []int         // one run per entry: the number of quiet tenants, one source each
	NoisySources int           // sources of the one noisy tenant
	Interval     time.Duration // a source is due again Interval after it ran
	Cycle        time.Duration // simulated time between two dispatch cycles
	Capacity     int           // items dispatched per cycle
	Cycles       int           // cycles simulated per run
	Wall         bool          // also measure each Dispatch on the wall clock (not deterministic)
}

// DefaultCostConfig is the cost run the program makes: 1,000 and then 100,000 quiet tenants
// with one source each beside the noisy tenant with 10,000, all due within the first
// cycle, 100 dispatches per 10-second cycle, for 30 cycles.
func DefaultCostConfig() CostConfig {
	return CostConfig{
		QuietTenants: []int{1_000, 100_000},
		NoisySources: 10_000,
		Interval:     time.Minute,
		Cycle:        10 * time.Second,
		Capacity:     100,
		Cycles:       30,
	}
}

// Validate reports every field of c that cannot be simulated, joined.
func (c CostConfig) Validate() error {
	var errs []error
	bad := func(broken bool, format string, args ...any) {
		if broken {
			errs = append(errs, fmt.Errorf("noisyneighbor: cost: "+format, args...))
		}
	}
	bad(len(c.QuietTenants) == 0, "QuietTenants must name at least one run")
	for i, n := range c.QuietTenants {
		bad(n < 1, "QuietTenants[%d] must be ≥ 1, got %d", i, n)
	}
	bad(c.NoisySources < 1, "NoisySources must be ≥ 1, got %d", c.NoisySources)
	bad(c.Cycle <= 0, "Cycle must be > 0, got %v", c.Cycle)
	bad(c.Interval < c.Cycle, "Interval must be ≥ Cycle, got %v", c.Interval)
	bad(c.Capacity < 1 || c.Capacity > duework.MaxLimit, "Capacity must be in [1, %d], got %d", duework.MaxLimit, c.Capacity)
	bad(c.Cycles < 1, "Cycles must be ≥ 1, got %d", c.Cycles)
	return errors.Join(errs...)
}

// CostResult is what SimulateCost measured: one CostRun per entry of QuietTenants.
type CostResult struct {
	Config CostConfig
	Runs   []CostRun
}

// CostRun is one run of the cost simulation.
type CostRun struct {
	QuietTenants int
	Cycles       []CycleCost // one per cycle, in order
	// Wall is the mean wall-clock time of one Dispatch, when CostConfig.Wall is set.
	Wall time.Duration
}

// CycleCost is what one Dispatch cost, counted at the Index, and what a cycle that ranked
// every tenant with due work would have had to read.
type CycleCost struct {
	DueTenants   int // tenants with due work at the cycle's start
	UsersRead    int // users the cycle's Index.Ready calls returned
	EntriesRead  int // entries those users carried, plus any DueBefore returned
	IndexCalls   int // calls of every Index method
	LaneForCalls int // calls of the LaneFor
	Dispatched   int // items claimed
}

// SimulateCost runs cfg: for each entry of QuietTenants, a fresh duework.Memory holding
// that many quiet tenants with one source each and the noisy tenant, every tenant already
// routed to the one lane (as in a service that has run a while), every source due within
// the first cycle, and Cycles dispatches by rota's Dispatcher over an Index that counts
// what each one reads. Every dispatched item is completed at once, due again after
// Interval. The counts are deterministic; the wall-clock figure, when asked for, is not.
func SimulateCost(cfg CostConfig) (CostResult, error) {
	if err := cfg.Validate(); err != nil {
		return CostResult{}, err
	}
	res := CostResult{Config: cfg}
	for _, quiet := range cfg.QuietTenants {
		run, err := simulateCostRun(cfg, quiet)
		if err != nil {
			return CostResult{}, fmt.Errorf("noisyneighbor: cost with %d quiet tenants: %w", quiet, err)
		}
		res.Runs = append(res.Runs, run)
	}
	return res, nil
}

// simulateCostRun makes one run of SimulateCost.
func simulateCostRun(cfg CostConfig, quiet int) (CostRun, error) {
	ctx := context.Background()
	tenants, err := makeTenants(Config{QuietTenants: quiet, QuietSources: [2]int{1, 1}, NoisySources: cfg.NoisySources})
	if err != nil {
		return CostRun{}, err
	}
	idx := duework.NewMemory()
	cal := &calendar{cycle: cfg.Cycle, due: make([][]int32, cfg.Cycles+1)}
	if err := scheduleSources(ctx, idx, tenants, 1, cfg.Cycle, cal); err != nil {
		return CostRun{}, err
	}
	routes := make([]duework.Route, len(tenants))
	for t, tn := range tenants {
		routes[t] = duework.Route{UserID: tn.tc.UserID(), Group: string(lane)}
	}
	if err := idx.Route(ctx, routes); err != nil {
		return CostRun{}, err
	}

	counted := &countingIndex{inner: idx}
	laneForCalls := 0
	d, err := newRotaDispatcher(counted, cfg.Capacity, cfg.Cycle, func(ctx context.Context, userID string) (dispatch.Lane, error) {
		laneForCalls++
		return allInOneLane(ctx, userID)
	})
	if err != nil {
		return CostRun{}, err
	}
	ids := tenantIDs(tenants)
	dueCount := make([]int, len(tenants))
	dueTenants := 0
	run := CostRun{QuietTenants: quiet}
	var wall time.Duration
	for k := 1; k <= cfg.Cycles; k++ {
		now := start.Add(time.Duration(k) * cfg.Cycle)
		for _, t := range cal.due[k] {
			if dueCount[t] == 0 {
				dueTenants++
			}
			dueCount[t]++
		}
		cal.due[k] = nil
		counted.reset()
		laneForCalls = 0
		began := time.Now()
		b, err := d.Dispatch(ctx, now)
		if cfg.Wall {
			wall += time.Since(began)
		}
		if err != nil {
			return CostRun{}, fmt.Errorf("cycle %d: %w", k, err)
		}
		run.Cycles = append(run.Cycles, CycleCost{
			DueTenants:   dueTenants,
			UsersRead:    counted.users,
			EntriesRead:  counted.entries,
			IndexCalls:   counted.calls,
			LaneForCalls: laneForCalls,
			Dispatched:   len(b.Items),
		})
		claims := make([]duework.Claim, len(b.Items))
		for i, it := range b.Items {
			claims[i] = it.Claim
			t := ids[it.Claim.Entry.UserID]
			if dueCount[t]--; dueCount[t] == 0 {
				dueTenants--
			}
		}
		if err := completeAll(ctx, idx, tenants, ids, claims, now, cfg.Interval, cal); err != nil {
			return CostRun{}, fmt.Errorf("cycle %d: %w", k, err)
		}
	}
	if cfg.Wall {
		run.Wall = wall / time.Duration(cfg.Cycles)
	}
	return run, nil
}

// countingIndex is a duework.Index that counts the calls made through it and what they
// read, and passes each on to the Index it wraps. It is not safe for concurrent use; a
// Dispatcher calls its Index from one goroutine.
type countingIndex struct {
	inner                 duework.Index
	calls, users, entries int
}

var _ duework.Index = (*countingIndex)(nil)

func (c *countingIndex) reset() { c.calls, c.users, c.entries = 0, 0, 0 }

func (c *countingIndex) Schedule(ctx context.Context, tc tenancy.Context, e duework.Entry) error {
	c.calls++
	return c.inner.Schedule(ctx, tc, e)
}

func (c *countingIndex) Unschedule(ctx context.Context, tc tenancy.Context, workKey string) error {
	c.calls++
	return c.inner.Unschedule(ctx, tc, workKey)
}

func (c *countingIndex) Get(ctx context.Context, tc tenancy.Context, workKey string) (duework.Entry, error) {
	c.calls++
	e, err := c.inner.Get(ctx, tc, workKey)
	if err == nil {
		c.entries++
	}
	return e, err
}

func (c *countingIndex) Complete(ctx context.Context, tc tenancy.Context, cl duework.Claim, next duework.Entry) error {
	c.calls++
	return c.inner.Complete(ctx, tc, cl, next)
}

func (c *countingIndex) CompleteMany(ctx context.Context, done []duework.Done) ([]error, error) {
	c.calls++
	return c.inner.CompleteMany(ctx, done)
}

func (c *countingIndex) DueBefore(ctx context.Context, now time.Time, limit int) ([]duework.Entry, error) {
	c.calls++
	es, err := c.inner.DueBefore(ctx, now, limit)
	c.entries += len(es)
	return es, err
}

func (c *countingIndex) Ready(ctx context.Context, q duework.ReadyQuery) (duework.ReadyPage, error) {
	c.calls++
	p, err := c.inner.Ready(ctx, q)
	c.users += len(p.Heads)
	for _, h := range p.Heads {
		c.entries += len(h.Due)
	}
	return p, err
}

func (c *countingIndex) Route(ctx context.Context, routes []duework.Route) error {
	c.calls++
	return c.inner.Route(ctx, routes)
}

func (c *countingIndex) Groups(ctx context.Context, now time.Time) ([]string, error) {
	c.calls++
	return c.inner.Groups(ctx, now)
}

func (c *countingIndex) Release(ctx context.Context, userIDs []string, heldUntil time.Time) error {
	c.calls++
	return c.inner.Release(ctx, userIDs, heldUntil)
}

func (c *countingIndex) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	c.calls++
	return c.inner.Claim(ctx, keys, now, until)
}

func (c *countingIndex) ScheduleMissing(ctx context.Context, tc tenancy.Context, entries []duework.Entry) (int, error) {
	c.calls++
	return c.inner.ScheduleMissing(ctx, tc, entries)
}

func (c *countingIndex) UnscheduleClaimed(ctx context.Context, tc tenancy.Context, cl duework.Claim) error {
	c.calls++
	return c.inner.UnscheduleClaimed(ctx, tc, cl)
}

func (c *countingIndex) Unclaim(ctx context.Context, claims []duework.Unclaim) ([]error, error) {
	c.calls++
	return c.inner.Unclaim(ctx, claims)
}

func (c *countingIndex) User(ctx context.Context, userID string, now time.Time) (duework.UserState, error) {
	c.calls++
	s, err := c.inner.User(ctx, userID, now)
	if err == nil {
		c.users++
	}
	return s, err
}

func (c *countingIndex) Entries(ctx context.Context, userID, after string, limit int) ([]duework.EntryState, error) {
	c.calls++
	es, err := c.inner.Entries(ctx, userID, after, limit)
	c.entries += len(es)
	return es, err
}

func (c *countingIndex) StartClaims(ctx context.Context, claims []duework.Unclaim) ([]error, error) {
	c.calls++
	return c.inner.StartClaims(ctx, claims)
}

func (c *countingIndex) Pause(ctx context.Context, tc tenancy.Context, until time.Time, reason string) error {
	c.calls++
	return c.inner.Pause(ctx, tc, until, reason)
}

func (c *countingIndex) Resume(ctx context.Context, tc tenancy.Context) error {
	c.calls++
	return c.inner.Resume(ctx, tc)
}

func (c *countingIndex) Paused(ctx context.Context, now time.Time, after string, limit int) ([]duework.UserPause, error) {
	c.calls++
	ps, err := c.inner.Paused(ctx, now, after, limit)
	c.users += len(ps)
	return ps, err
}
