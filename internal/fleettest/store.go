package fleettest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// FastTier is the cadence of every source a [Store] watches: due again 200 ms after each
// run, hit or miss.
const FastTier = "fast"

// Lanes are the lanes of a [Store]'s dispatch configuration: paid users first, two items
// each and twenty a cycle per lane. Plan "pro" and "plus" users go to "paid", the free
// plan's to "free tier".
var Lanes = []dispatch.LaneCapacity{
	{Lane: "paid", PerUserLimit: 2, PerCycleLimit: 20},
	{Lane: "free tier", PerUserLimit: 2, PerCycleLimit: 20},
}

// Plans is where a [Store] sets each tenant's plan: tenancy.MemoryEntitlements, or an
// adapter's.
type Plans interface {
	tenancy.Entitlements
	SetPlan(ctx context.Context, tc tenancy.Context, p tenancy.PlanID) error
}

// Store is the state a fleet's dispatcher and workers share — the index, the watchlist
// and the plans — and the tenants and the sources they watch. Its methods fail the test on
// any error.
type Store struct {
	Index     duework.Index
	Watchlist tenancy.Watchlist
	Plans     Plans
	Tiers     *cadence.Registry // FastTier, and what a test registers
	Tenants   map[string]tenancy.Context
	Sources   map[duework.Key]bool
	// MaxClockSkew is the dispatch configuration's; zero means dispatch's default.
	MaxClockSkew time.Duration
	// EndedClaimsStay lets CheckNothingLost pass an ended claim left on an entry: a
	// consumer that drops the message of an ended claim without handing the claim back
	// leaves one.
	EndedClaimsStay bool

	t testing.TB
}

// NewStore returns a Store over idx, wl and plans with no tenants, FastTier registered.
func NewStore(t testing.TB, idx duework.Index, wl tenancy.Watchlist, plans Plans) *Store {
	t.Helper()
	s := &Store{Index: idx, Watchlist: wl, Plans: plans, Tiers: cadence.NewRegistry(),
		Tenants: map[string]tenancy.Context{}, Sources: map[duework.Key]bool{}, t: t}
	if err := s.Tiers.Register(FastTier, cadence.Backoff{Base: 200 * time.Millisecond, Max: 200 * time.Millisecond, Factor: 1}); err != nil {
		t.Fatal(err)
	}
	return s
}

// Watch puts user on plan and has it watch n sources s000, s001, … on FastTier, due at
// once.
func (s *Store) Watch(user string, plan tenancy.PlanID, n int) {
	s.t.Helper()
	ctx := context.Background()
	tc, err := tenancy.NewContext(user)
	if err != nil {
		s.t.Fatal(err)
	}
	s.Tenants[user] = tc
	if err := s.Plans.SetPlan(ctx, tc, plan); err != nil {
		s.t.Fatal(err)
	}
	entries := make([]tenancy.WatchlistEntry, n)
	due := make([]duework.Entry, n)
	now := time.Now()
	for j := range n {
		entries[j] = tenancy.WatchlistEntry{UserID: user, Slug: fmt.Sprintf("s%03d", j), Tier: FastTier, AddedAt: now}
		due[j] = duework.Entry{UserID: user, WorkKey: entries[j].Slug, Tier: FastTier, DueAt: now}
		s.Sources[duework.Key{UserID: user, WorkKey: entries[j].Slug}] = true
	}
	if err := s.Watchlist.AddMany(ctx, tc, entries); err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.Index.ScheduleMissing(ctx, tc, due); err != nil {
		s.t.Fatal(err)
	}
}

// WatchMix has paid tenants paid00, paid01, … on plan "pro" and free tenants free00,
// free01, … on the free plan watch two sources each, and one free tenant, noisy, watch
// noisySources.
func (s *Store) WatchMix(paid, free, noisySources int) {
	s.t.Helper()
	for i := range paid {
		s.Watch(fmt.Sprintf("paid%02d", i), "pro", 2)
	}
	for i := range free {
		s.Watch(fmt.Sprintf("free%02d", i), tenancy.PlanFree, 2)
	}
	s.Watch("noisy", tenancy.PlanFree, noisySources)
}

// DispatchConfig is the dispatch configuration a fleet's dispatcher and workers share:
// Lanes, users routed by plan, claims of claimFor, a global batch of 30.
func (s *Store) DispatchConfig(claimFor time.Duration) dispatch.Config {
	s.t.Helper()
	laneFor, err := bridge.PlanLanes(s.Plans, map[tenancy.PlanID]dispatch.Lane{
		tenancy.PlanFree: "free tier", "plus": "paid", "pro": "paid",
	}, Lanes)
	if err != nil {
		s.t.Fatal(err)
	}
	return dispatch.Config{Lanes: Lanes, GlobalBatchLimit: 30, LaneFor: laneFor, ClaimFor: claimFor, MaxClockSkew: s.MaxClockSkew}
}

// Dispatcher returns a Dispatcher over the store's index with dc.
func (s *Store) Dispatcher(dc dispatch.Config) *dispatch.Dispatcher {
	s.t.Helper()
	d, err := dispatch.New(s.Index, dc)
	if err != nil {
		s.t.Fatal(err)
	}
	return d
}

// Claimed claims user's entry key until until and returns it as an item of lane.
func (s *Store) Claimed(lane dispatch.Lane, user, key string, until time.Time) dispatch.Item {
	s.t.Helper()
	cs, err := s.Index.Claim(context.Background(), []duework.Key{{UserID: user, WorkKey: key}}, time.Now(), until)
	if err != nil || len(cs) != 1 {
		s.t.Fatalf("claim %s/%s: %v, %v", user, key, cs, err)
	}
	return dispatch.Item{Lane: lane, Claim: cs[0]}
}

// State reads user's entry key: the Until of its claim, ended or not (zero when it has
// none), and the entry. It fails the test when the entry is not scheduled.
func (s *Store) State(user, key string) (claimedUntil time.Time, e duework.Entry) {
	s.t.Helper()
	st, ok := s.states(user)[key]
	if !ok {
		s.t.Fatalf("%s/%s is not scheduled", user, key)
	}
	return st.ClaimedUntil, st.Entry
}

// states reads user's entries by work key.
func (s *Store) states(user string) map[string]duework.EntryState {
	s.t.Helper()
	states, err := s.Index.Entries(context.Background(), user, "", duework.MaxLimit)
	if err != nil {
		s.t.Fatal(err)
	}
	byKey := make(map[string]duework.EntryState, len(states))
	for _, st := range states {
		byKey[st.Entry.WorkKey] = st
	}
	return byKey
}

// CheckNothingLost checks each source after a clean stop: it is scheduled, unclaimed
// (with EndedClaimsStay, holds no claim that has not ended), and, every run being a miss,
// its streak is the number of its runs whose completion was written.
func (s *Store) CheckNothingLost(written map[duework.Key]int) {
	s.t.Helper()
	now := time.Now()
	byUser := map[string]map[string]duework.EntryState{}
	for _, k := range sortedKeys(s.Sources) {
		if byUser[k.UserID] == nil {
			byUser[k.UserID] = s.states(k.UserID)
		}
		st, ok := byUser[k.UserID][k.WorkKey]
		if !ok {
			s.t.Errorf("%s/%s is not scheduled after a clean stop", k.UserID, k.WorkKey)
			continue
		}
		claimed := !st.ClaimedUntil.IsZero()
		if s.EndedClaimsStay {
			claimed = st.ClaimedUntil.After(now)
		}
		if claimed {
			s.t.Errorf("%s/%s still claimed until %v after a clean stop", k.UserID, k.WorkKey, st.ClaimedUntil)
		}
		if st.Entry.MissStreak != written[k] {
			s.t.Errorf("%s/%s: streak %d after %d written runs", k.UserID, k.WorkKey, st.Entry.MissStreak, written[k])
		}
	}
}
