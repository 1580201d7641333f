package rota_test

// This file pins the contract of /work/shared/DESIGN.md ("The names and signatures below
// are the contract: host code, examples and outside checks are written against them"), so
// that the build breaks the moment a name, a parameter, a result or a field drifts from it.
//
// How each kind of promise is pinned:
//   - a function or method: assigned to a variable of its exact func type (a method
//     expression for methods, so the receiver kind is pinned too);
//   - an interface: each method by method expression, and the whole method set both ways
//     against an interface literal, so a method can be neither renamed nor added (adding
//     one breaks every host's own implementation);
//   - a struct: a keyed literal of every named field with a value of the field's exact
//     type, and a function that reads every field back into that type (so a field's type
//     can neither widen nor narrow);
//   - a sentinel error: assigned to an error variable; a constant: a const declaration of
//     its type (so it stays a constant).
//
// Where DESIGN.md names something without fixing its shape, the code's choice is pinned as
// well, under a comment that says "code's choice": changing it is allowed, but only on
// purpose, by editing this file. Value-level promises (tier names, preset order,
// StageAlreadySeen, the zero Context) are checked at run time by the tests at the end.

import (
	"context"
	"errors"
	"go/build"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/duework/indextest"
	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/maintenance/maintenancetest"
	"github.com/rotaworks/rota/tenancy"
)

// Values of the exact types that the struct literals below use, so that a field whose type
// changed (even to another type of the same kind) no longer accepts them.
var (
	aString   string
	anInt     int
	aFloat    float64
	aBool     bool
	aUint64   uint64
	aTime     time.Time
	aDuration time.Duration
	anError   error
	aLogger   *slog.Logger
)

// ---------------------------------------------------------------------------------------
// DESIGN.md § cadence
// ---------------------------------------------------------------------------------------

// `type Policy interface { NextInterval(missStreak int) time.Duration }`
var (
	_ func(cadence.Policy, int) time.Duration = cadence.Policy.NextInterval
	_ cadence.Policy                          = (interface{ NextInterval(int) time.Duration })(nil)
)

// `type Backoff struct { Base, Max time.Duration; Factor float64 }` implements Policy;
// `Validate() error`.
var (
	_ cadence.Policy                           = cadence.Backoff{}
	_ func(cadence.Backoff, int) time.Duration = cadence.Backoff.NextInterval
	_ func(cadence.Backoff) error              = cadence.Backoff.Validate
	_                                          = cadence.Backoff{Base: aDuration, Max: aDuration, Factor: aFloat}
	_                                          = func(b cadence.Backoff) (time.Duration, time.Duration, float64) { return b.Base, b.Max, b.Factor }
)

// Presets are package variables of type Backoff: TierHot, TierWarm, TierCold, DigestWeekly.
// (Taking their address pins that they are variables of exactly that type.)
var (
	_ *cadence.Backoff = &cadence.TierHot
	_ *cadence.Backoff = &cadence.TierWarm
	_ *cadence.Backoff = &cadence.TierCold
	_ *cadence.Backoff = &cadence.DigestWeekly
)

// `NewRegistry()`, `(*Registry).Register(name string, p Policy) error`,
// `(*Registry).Lookup(name string) (Policy, error)`; an unknown tier is ErrUnknownTier.
var (
	_ func() *cadence.Registry                                = cadence.NewRegistry
	_ func(*cadence.Registry, string, cadence.Policy) error   = (*cadence.Registry).Register
	_ func(*cadence.Registry, string) (cadence.Policy, error) = (*cadence.Registry).Lookup
	_ error                                                   = cadence.ErrUnknownTier
)

// `Jitter(key string, at time.Time, d time.Duration, fraction float64) time.Duration`
var _ func(string, time.Time, time.Duration, float64) time.Duration = cadence.Jitter

// ---------------------------------------------------------------------------------------
// DESIGN.md § tenancy
// ---------------------------------------------------------------------------------------

// `Context`; `NewContext(userID string) (Context, error)`; `(Context).UserID() string`;
// ErrNoTenant, ErrInvalidID. The zero Context is a value of the type (checked at run time
// below).
var (
	_ func(string) (tenancy.Context, error) = tenancy.NewContext
	_ func(tenancy.Context) string          = tenancy.Context.UserID
	_                                       = tenancy.Context{}
	_ error                                 = tenancy.ErrNoTenant
	_ error                                 = tenancy.ErrInvalidID
)

// Deny-by-default: another tenant's row is ErrNotFound; a Watchlist entry naming another
// user is ErrForbidden.
var (
	_ error = tenancy.ErrNotFound
	_ error = tenancy.ErrForbidden
)

// `Repository[T any]` interface: Put, Get, Delete, List; `NewMemoryRepository[T]()`.
// (Instantiated with int: the contract holds for every T.)
var (
	_ func(tenancy.Repository[int], context.Context, tenancy.Context, string, int) error   = tenancy.Repository[int].Put
	_ func(tenancy.Repository[int], context.Context, tenancy.Context, string) (int, error) = tenancy.Repository[int].Get
	_ func(tenancy.Repository[int], context.Context, tenancy.Context, string) error        = tenancy.Repository[int].Delete
	_ func(tenancy.Repository[int], context.Context, tenancy.Context) ([]int, error)       = tenancy.Repository[int].List
	_ tenancy.Repository[int]                                                              = repositoryMethods[int](nil)
	_ repositoryMethods[int]                                                               = tenancy.Repository[int](nil)
	_ tenancy.Repository[int]                                                              = (*tenancy.MemoryRepository[int])(nil)
	_ func() *tenancy.MemoryRepository[string]                                             = /* code's choice: the concrete pointer */ tenancy.NewMemoryRepository[string]
	_ tenancy.Repository[struct{ A, B string }]                                            = /* any T, not only comparable ones */ (*tenancy.MemoryRepository[struct{ A, B string }])(nil)
	_ tenancy.Repository[[]byte]                                                           = /* and non-comparable ones */ (*tenancy.MemoryRepository[[]byte])(nil)
)

type repositoryMethods[T any] interface {
	Put(ctx context.Context, tc tenancy.Context, id string, v T) error
	Get(ctx context.Context, tc tenancy.Context, id string) (T, error)
	Delete(ctx context.Context, tc tenancy.Context, id string) error
	List(ctx context.Context, tc tenancy.Context) ([]T, error)
}

// `WatchlistEntry{UserID, Slug, Tier string; AddedAt time.Time}`
var (
	_ = tenancy.WatchlistEntry{UserID: aString, Slug: aString, Tier: aString, AddedAt: aTime}
	_ = func(e tenancy.WatchlistEntry) (string, string, string, time.Time) {
		return e.UserID, e.Slug, e.Tier, e.AddedAt
	}
)

// `Watchlist` interface: Add, Remove, Get, List; `NewMemoryWatchlist()`.
var (
	_ func(tenancy.Watchlist, context.Context, tenancy.Context, tenancy.WatchlistEntry) error           = tenancy.Watchlist.Add
	_ func(tenancy.Watchlist, context.Context, tenancy.Context, string) error                           = tenancy.Watchlist.Remove
	_ func(tenancy.Watchlist, context.Context, tenancy.Context, string) (tenancy.WatchlistEntry, error) = tenancy.Watchlist.Get
	_ func(tenancy.Watchlist, context.Context, tenancy.Context) ([]tenancy.WatchlistEntry, error)       = tenancy.Watchlist.List
	_ tenancy.Watchlist                                                                                 = watchlistMethods(nil)
	_ watchlistMethods                                                                                  = tenancy.Watchlist(nil)
	_ tenancy.Watchlist                                                                                 = (*tenancy.MemoryWatchlist)(nil)
	_ func() *tenancy.MemoryWatchlist                                                                   = /* code's choice: the concrete pointer */ tenancy.NewMemoryWatchlist
)

type watchlistMethods interface {
	Add(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) error
	Remove(ctx context.Context, tc tenancy.Context, slug string) error
	Get(ctx context.Context, tc tenancy.Context, slug string) (tenancy.WatchlistEntry, error)
	List(ctx context.Context, tc tenancy.Context) ([]tenancy.WatchlistEntry, error)
}

// Plans: `PlanID` (`PlanFree`, `PlanPlus`, `PlanPro`); `Entitlements` interface
// `Plan(ctx, Context) (PlanID, error)`; `NewMemoryEntitlements()`.
const (
	_ tenancy.PlanID = tenancy.PlanFree
	_ tenancy.PlanID = tenancy.PlanPlus
	_ tenancy.PlanID = tenancy.PlanPro
	// Code's choice: PlanID is a string type (its values are stored by hosts).
	_ tenancy.PlanID = ""
)

var (
	_ func(tenancy.Entitlements, context.Context, tenancy.Context) (tenancy.PlanID, error) = tenancy.Entitlements.Plan
	_ tenancy.Entitlements                                                                 = (interface {
		Plan(context.Context, tenancy.Context) (tenancy.PlanID, error)
	})(nil)
	_ tenancy.Entitlements               = (*tenancy.MemoryEntitlements)(nil)
	_ func() *tenancy.MemoryEntitlements = /* code's choice: the concrete pointer */ tenancy.NewMemoryEntitlements
)

// ---------------------------------------------------------------------------------------
// DESIGN.md § duework
// ---------------------------------------------------------------------------------------

// `Entry{UserID, WorkKey, Tier string; DueAt, LastRunAt time.Time; MissStreak int}` — "a
// fixed row ... It has no payload field and must never grow one". The conversion from the
// exact struct type pins every field, its type and order, and that there are no others:
// adding a field of any kind breaks this line.
var (
	_ = duework.Entry{UserID: aString, WorkKey: aString, Tier: aString, DueAt: aTime, LastRunAt: aTime, MissStreak: anInt}
	_ = duework.Entry(struct {
		UserID, WorkKey, Tier string
		DueAt, LastRunAt      time.Time
		MissStreak            int
	}{})
)

// `Key{UserID, WorkKey string}`; `Claim{Entry Entry; Token uint64; Until time.Time}`;
// `Head{UserID string; LastServed, Turn time.Time; Due []Entry; More bool}`.
var (
	_ = duework.Key{UserID: aString, WorkKey: aString}
	_ = func(k duework.Key) (string, string) { return k.UserID, k.WorkKey }
	_ = duework.Claim{Entry: duework.Entry{}, Token: aUint64, Until: aTime}
	_ = func(c duework.Claim) (duework.Entry, uint64, time.Time) { return c.Entry, c.Token, c.Until }
	_ = duework.Head{UserID: aString, LastServed: aTime, Turn: aTime, Due: []duework.Entry(nil), More: aBool}
	_ = func(h duework.Head) (string, time.Time, time.Time, []duework.Entry, bool) {
		return h.UserID, h.LastServed, h.Turn, h.Due, h.More
	}
)

// `Done{Tenant tenancy.Context; Claim Claim; Next Entry}`; `Route{UserID, Group string}`;
// `ReadyQuery{Group string; Now time.Time; Users, PerUser int; Hold time.Duration}`;
// `ReadyPage{Heads []Head; Next time.Time}`.
var (
	_ = duework.Done{Tenant: tenancy.Context{}, Claim: duework.Claim{}, Next: duework.Entry{}}
	_ = func(d duework.Done) (tenancy.Context, duework.Claim, duework.Entry) { return d.Tenant, d.Claim, d.Next }
	_ = duework.Route{UserID: aString, Group: aString}
	_ = func(r duework.Route) (string, string) { return r.UserID, r.Group }
	_ = duework.ReadyQuery{Group: aString, Now: aTime, Users: anInt, PerUser: anInt, Hold: aDuration}
	_ = func(q duework.ReadyQuery) (string, time.Time, int, int, time.Duration) {
		return q.Group, q.Now, q.Users, q.PerUser, q.Hold
	}
	_ = duework.ReadyPage{Heads: []duework.Head(nil), Next: aTime}
	_ = func(p duework.ReadyPage) ([]duework.Head, time.Time) { return p.Heads, p.Next }
)

// `Advance(e Entry, p cadence.Policy, hit bool, now time.Time) Entry` — pure.
var _ func(duework.Entry, cadence.Policy, bool, time.Time) duework.Entry = duework.Advance

// duework's own sentinels: ErrNotFound, ErrClaimLost, ErrInvalid.
var (
	_ error = duework.ErrNotFound
	_ error = duework.ErrClaimLost
	_ error = duework.ErrInvalid
)

// The Index contract, method by method, and exactly these eleven methods.
var (
	_ func(duework.Index, context.Context, tenancy.Context, duework.Entry) error                         = duework.Index.Schedule
	_ func(duework.Index, context.Context, tenancy.Context, string) error                                = duework.Index.Unschedule
	_ func(duework.Index, context.Context, tenancy.Context, string) (duework.Entry, error)               = duework.Index.Get
	_ func(duework.Index, context.Context, tenancy.Context, duework.Claim, duework.Entry) error          = duework.Index.Complete
	_ func(duework.Index, context.Context, []duework.Done) ([]error, error)                              = duework.Index.CompleteMany
	_ func(duework.Index, context.Context, time.Time, int) ([]duework.Entry, error)                      = duework.Index.DueBefore
	_ func(duework.Index, context.Context, duework.ReadyQuery) (duework.ReadyPage, error)                = duework.Index.Ready
	_ func(duework.Index, context.Context, []duework.Route) error                                        = duework.Index.Route
	_ func(duework.Index, context.Context, time.Time) ([]string, error)                                  = duework.Index.Groups
	_ func(duework.Index, context.Context, []string, time.Time) error                                    = duework.Index.Release
	_ func(duework.Index, context.Context, []duework.Key, time.Time, time.Time) ([]duework.Claim, error) = duework.Index.Claim
	_ duework.Index                                                                                      = indexMethods(nil)
	_ indexMethods                                                                                       = duework.Index(nil)
)

type indexMethods interface {
	Schedule(ctx context.Context, tc tenancy.Context, e duework.Entry) error
	Unschedule(ctx context.Context, tc tenancy.Context, workKey string) error
	Get(ctx context.Context, tc tenancy.Context, workKey string) (duework.Entry, error)
	Complete(ctx context.Context, tc tenancy.Context, c duework.Claim, next duework.Entry) error
	CompleteMany(ctx context.Context, done []duework.Done) (errs []error, err error)
	DueBefore(ctx context.Context, now time.Time, limit int) ([]duework.Entry, error)
	Ready(ctx context.Context, q duework.ReadyQuery) (duework.ReadyPage, error)
	Route(ctx context.Context, routes []duework.Route) error
	Groups(ctx context.Context, now time.Time) ([]string, error)
	Release(ctx context.Context, userIDs []string, heldUntil time.Time) error
	Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error)
}

// The optional capabilities the code adds where the contract leaves syncing and claim
// checks open; Memory and the reference Model have both.
var (
	_ duework.MissingScheduler = (*duework.Memory)(nil)
	_ duework.ClaimGuard       = (*duework.Memory)(nil)
	_ duework.MissingScheduler = (*indextest.Model)(nil)
	_ duework.ClaimGuard       = (*indextest.Model)(nil)
)

// `NewMemory() *Memory`: the embedded default.
var (
	_ func() *duework.Memory = duework.NewMemory
	_ duework.Index          = (*duework.Memory)(nil)
)

// `duework/indextest`: `Run(t *testing.T, newIndex func(t *testing.T) duework.Index)`.
var _ func(*testing.T, func(*testing.T) duework.Index) = indextest.Run

// ---------------------------------------------------------------------------------------
// DESIGN.md § dispatch
// ---------------------------------------------------------------------------------------

// `type Lane string`; `LaneCapacity{Lane Lane; PerUserLimit, PerCycleLimit, MinShare int}`;
// `type LaneFor func(ctx context.Context, userID string) (Lane, error)`.
const _ dispatch.Lane = ""

var (
	_ = dispatch.LaneCapacity{Lane: dispatch.Lane(""), PerUserLimit: anInt, PerCycleLimit: anInt, MinShare: anInt}
	_ = func(c dispatch.LaneCapacity) (dispatch.Lane, int, int, int) {
		return c.Lane, c.PerUserLimit, c.PerCycleLimit, c.MinShare
	}
	_ func(context.Context, string) (dispatch.Lane, error) = dispatch.LaneFor(nil)
)

// `Config{Lanes []LaneCapacity; GlobalBatchLimit int; LaneFor LaneFor; ClaimFor, HoldFor, RetryAfter time.Duration; RouteLimit int}`;
// `New(idx duework.Index, cfg Config) (*Dispatcher, error)`.
var (
	_ = dispatch.Config{Lanes: []dispatch.LaneCapacity(nil), GlobalBatchLimit: anInt, LaneFor: dispatch.LaneFor(nil),
		ClaimFor: aDuration, HoldFor: aDuration, RetryAfter: aDuration, RouteLimit: anInt}
	_ = func(c dispatch.Config) ([]dispatch.LaneCapacity, int, dispatch.LaneFor, time.Duration, time.Duration, time.Duration, int) {
		return c.Lanes, c.GlobalBatchLimit, c.LaneFor, c.ClaimFor, c.HoldFor, c.RetryAfter, c.RouteLimit
	}
	_ func(duework.Index, dispatch.Config) (*dispatch.Dispatcher, error) = dispatch.New
)

// `(*Dispatcher).Reroute(ctx, userIDs ...string) error`.
var _ func(*dispatch.Dispatcher, context.Context, ...string) error = (*dispatch.Dispatcher).Reroute

// `(*Dispatcher).Dispatch(ctx, now) (Batch, error)`;
// `Batch{Items []Item; ShedUserIDs []string; Unrouted []Unrouted; Lanes []LaneReport}`;
// `Item{Claim duework.Claim; Lane Lane}`.
var (
	_ func(*dispatch.Dispatcher, context.Context, time.Time) (dispatch.Batch, error) = (*dispatch.Dispatcher).Dispatch
	_                                                                                = dispatch.Batch{Items: []dispatch.Item(nil), ShedUserIDs: []string(nil), Unrouted: []dispatch.Unrouted(nil), Lanes: []dispatch.LaneReport(nil)}
	_                                                                                = func(b dispatch.Batch) ([]dispatch.Item, []string, []dispatch.Unrouted, []dispatch.LaneReport) {
		return b.Items, b.ShedUserIDs, b.Unrouted, b.Lanes
	}
	_ = dispatch.Item{Claim: duework.Claim{}, Lane: dispatch.Lane("")}
	_ = func(i dispatch.Item) (duework.Claim, dispatch.Lane) { return i.Claim, i.Lane }
)

// `Select(in SelectInput) Selection` is pure:
// `SelectInput{Heads []duework.Head; LaneOf map[string]Lane; Lanes []LaneCapacity; GlobalBatchLimit int}`
// → `Selection{Items []Selected; ShedUserIDs []string}` with `Selected{Entry duework.Entry; Lane Lane}`.
var (
	_ func(dispatch.SelectInput) dispatch.Selection = dispatch.Select
	_                                               = dispatch.SelectInput{Heads: []duework.Head(nil), LaneOf: map[string]dispatch.Lane(nil), Lanes: []dispatch.LaneCapacity(nil), GlobalBatchLimit: anInt}
	_                                               = func(in dispatch.SelectInput) ([]duework.Head, map[string]dispatch.Lane, []dispatch.LaneCapacity, int) {
		return in.Heads, in.LaneOf, in.Lanes, in.GlobalBatchLimit
	}
	_ = dispatch.Selection{Items: []dispatch.Selected(nil), ShedUserIDs: []string(nil)}
	_ = func(s dispatch.Selection) ([]dispatch.Selected, []string) { return s.Items, s.ShedUserIDs }
	_ = dispatch.Selected{Entry: duework.Entry{}, Lane: dispatch.Lane("")}
	_ = func(s dispatch.Selected) (duework.Entry, dispatch.Lane) { return s.Entry, s.Lane }
)

// `LaneReport{Lane Lane; Users, Dispatched, Shed, LostClaims int; WaitingSince time.Time}`;
// `Unrouted{UserID string; Err error}`.
var (
	_ = dispatch.LaneReport{Lane: dispatch.Lane(""), Users: anInt, Dispatched: anInt, Shed: anInt, LostClaims: anInt, WaitingSince: time.Time{}}
	_ = func(r dispatch.LaneReport) (dispatch.Lane, int, int, int, int, time.Time) {
		return r.Lane, r.Users, r.Dispatched, r.Shed, r.LostClaims, r.WaitingSince
	}
	_ = dispatch.Unrouted{UserID: aString, Err: anError}
	_ = func(u dispatch.Unrouted) (string, error) { return u.UserID, u.Err }
)

// ---------------------------------------------------------------------------------------
// DESIGN.md § bridge
// ---------------------------------------------------------------------------------------

// `Pipeline` interface: `Run(ctx, tenancy.Context, tenancy.WatchlistEntry) (Result, error)`;
// `Result{Outcomes []Outcome}`; `Outcome{ID string; Stage Stage}`;
// `StageAlreadySeen Stage = "already_seen"`; `(Result).FoundNew() bool`.
var (
	_ func(bridge.Pipeline, context.Context, tenancy.Context, tenancy.WatchlistEntry) (bridge.Result, error) = bridge.Pipeline.Run
	_ bridge.Pipeline                                                                                        = (interface {
		Run(context.Context, tenancy.Context, tenancy.WatchlistEntry) (bridge.Result, error)
	})(nil)
	_ = bridge.Result{Outcomes: []bridge.Outcome(nil)}
	_ = func(r bridge.Result) []bridge.Outcome { return r.Outcomes }
	_ = bridge.Outcome{ID: aString, Stage: bridge.Stage("")}
	_ = func(o bridge.Outcome) (string, bridge.Stage) { return o.ID, o.Stage }

	_ func(bridge.Result) bool = bridge.Result.FoundNew
)

const (
	_ bridge.Stage = bridge.StageAlreadySeen
	_ bridge.Stage = "" // Stage is a string type: hosts name their own stages.
)

// `Bridge{Index duework.Index; Watchlist tenancy.Watchlist; Pipeline Pipeline; Tiers *cadence.Registry; RetryDelay time.Duration}`
// with `(*Bridge).SyncWatchlist(ctx, tc tenancy.Context, now time.Time) (added int, err error)`
// and `(*Bridge).RunDueItem(ctx, item dispatch.Item, now time.Time) (*Result, error)`.
var (
	_ = bridge.Bridge{Index: duework.Index(nil), Watchlist: tenancy.Watchlist(nil), Pipeline: bridge.Pipeline(nil), Tiers: (*cadence.Registry)(nil), RetryDelay: aDuration}
	_ = func(b bridge.Bridge) (duework.Index, tenancy.Watchlist, bridge.Pipeline, *cadence.Registry, time.Duration) {
		return b.Index, b.Watchlist, b.Pipeline, b.Tiers, b.RetryDelay
	}
	_ func(*bridge.Bridge, context.Context, tenancy.Context, time.Time) (int, error)          = (*bridge.Bridge).SyncWatchlist
	_ func(*bridge.Bridge, context.Context, dispatch.Item, time.Time) (*bridge.Result, error) = (*bridge.Bridge).RunDueItem
)

// `PlanLanes`: the wiring from `tenancy.Entitlements` to a `dispatch.LaneFor`. DESIGN.md
// leaves its shape open; code's choice: a table from plan to lane, validated once against
// the lanes of the dispatch.Config it is for, so the result and a constructor error.
var _ func(tenancy.Entitlements, map[tenancy.PlanID]dispatch.Lane, []dispatch.LaneCapacity) (dispatch.LaneFor, error) = bridge.PlanLanes

// `NewRunner(b *Bridge, d *dispatch.Dispatcher, cfg RunnerConfig) (*Runner, error)` with
// `RunnerConfig{Interval time.Duration; Workers int; Clock Clock; Logger *slog.Logger}`.
var (
	_ func(*bridge.Bridge, *dispatch.Dispatcher, bridge.RunnerConfig) (*bridge.Runner, error) = bridge.NewRunner
	_                                                                                         = bridge.RunnerConfig{Interval: aDuration, Workers: anInt, Clock: bridge.Clock(nil), Logger: aLogger}
	_                                                                                         = func(c bridge.RunnerConfig) (time.Duration, int, bridge.Clock, *slog.Logger) {
		return c.Interval, c.Workers, c.Clock, c.Logger
	}
)

// Code's choice: the Clock a test passes in is the narrowest a loop needs, the method set
// of maintenance.Clock.
var _ bridge.Clock = (interface {
	Now() time.Time
	NewTicker(d time.Duration) (<-chan time.Time, func())
	AfterFunc(d time.Duration, f func()) func() bool
})(nil)

// `Runner`: `Cycle(ctx, now)` runs exactly one cycle and returns its report; `Run(ctx)`
// loops until ctx ends. Code's choice: Cycle also returns the report's failures joined as
// an error, and Run returns nil after a clean stop.
var (
	_ func(*bridge.Runner, context.Context, time.Time) (bridge.CycleReport, error) = (*bridge.Runner).Cycle
	_ func(*bridge.Runner, context.Context) error                                  = (*bridge.Runner).Run
)

// "the report carries dispatched, hits, misses, removed, errors, shed and unrouted" —
// code's choice of the field names and types.
var _ = func(r bridge.CycleReport) (int, int, int, int, int, []string, []dispatch.Unrouted) {
	return r.Dispatched, r.Hits, r.Misses, r.Removed, r.Errors, r.Shed, r.Unrouted
}

// ---------------------------------------------------------------------------------------
// DESIGN.md § maintenance
// ---------------------------------------------------------------------------------------

// `Task{Name string; Class Class; Cadence time.Duration; DataSafety, Bootstrap bool;
// DependsOn []string; Gates []Gate; Due DueFunc; Run RunFunc}`.
var (
	_ = maintenance.Task{
		Name: aString, Class: maintenance.Heavy, Cadence: aDuration, DataSafety: aBool, Bootstrap: aBool,
		DependsOn: []string(nil), Gates: []maintenance.Gate(nil), Due: maintenance.DueFunc(nil), Run: maintenance.RunFunc(nil),
	}
	_ = func(t maintenance.Task) (string, maintenance.Class, time.Duration, bool, bool, []string, []maintenance.Gate, maintenance.DueFunc, maintenance.RunFunc) {
		return t.Name, t.Class, t.Cadence, t.DataSafety, t.Bootstrap, t.DependsOn, t.Gates, t.Due, t.Run
	}
)

// `Class` is `Heavy` (contends for the lease) or `OffLease` (never takes it).
const (
	_ maintenance.Class = maintenance.Heavy
	_ maintenance.Class = maintenance.OffLease
)

// `type DueFunc func(ctx context.Context, now time.Time, st TaskState) (bool, error)`;
// `type RunFunc func(ctx context.Context) error`.
var (
	_ func(context.Context, time.Time, maintenance.TaskState) (bool, error) = maintenance.DueFunc(nil)
	_ func(context.Context) error                                           = maintenance.RunFunc(nil)
)

// `Candidate{Task Task; LastRunAt, WaitingSince time.Time}`.
var (
	_ = maintenance.Candidate{Task: maintenance.Task{}, LastRunAt: aTime, WaitingSince: aTime}
	_ = func(c maintenance.Candidate) (maintenance.Task, time.Time, time.Time) {
		return c.Task, c.LastRunAt, c.WaitingSince
	}
)

// `Pick(in PickInput) Selection` with
// `PickInput{Candidates []Candidate; Running []Task; Now time.Time; YieldAfter time.Duration}`
// and `Selection{Winner *Candidate; Considered []Consideration}`;
// `Consideration{Name string; Ratio float64; Reason string}`.
var (
	_ func(maintenance.PickInput) maintenance.Selection = maintenance.Pick
	_                                                   = maintenance.PickInput{Candidates: []maintenance.Candidate(nil), Running: []maintenance.Task(nil), Now: aTime, YieldAfter: aDuration}
	_                                                   = func(in maintenance.PickInput) ([]maintenance.Candidate, []maintenance.Task, time.Time, time.Duration) {
		return in.Candidates, in.Running, in.Now, in.YieldAfter
	}
	_ = maintenance.Selection{Winner: (*maintenance.Candidate)(nil), Considered: []maintenance.Consideration(nil)}
	_ = func(s maintenance.Selection) (*maintenance.Candidate, []maintenance.Consideration) {
		return s.Winner, s.Considered
	}
	_ = maintenance.Consideration{Name: aString, Ratio: aFloat, Reason: aString}
	_ = func(c maintenance.Consideration) (string, float64, string) { return c.Name, c.Ratio, c.Reason }
)

// `(*Scheduler).Poll(ctx, now) (PollResult, error)`:
// `PollResult{Winner *Candidate; AlsoDispatched []Candidate; Deferred []Deferral; Gauge Gauge}`.
// A winner that finds the lease held becomes a deferral with `ReasonLeaseHeld`.
var (
	_ func(*maintenance.Scheduler, context.Context, time.Time) (maintenance.PollResult, error) = (*maintenance.Scheduler).Poll
	_                                                                                          = maintenance.PollResult{Winner: (*maintenance.Candidate)(nil), AlsoDispatched: []maintenance.Candidate(nil), Deferred: []maintenance.Deferral(nil), Gauge: maintenance.Gauge{}}
	_                                                                                          = func(r maintenance.PollResult) (*maintenance.Candidate, []maintenance.Candidate, []maintenance.Deferral, maintenance.Gauge) {
		return r.Winner, r.AlsoDispatched, r.Deferred, r.Gauge
	}
)

// Code's choice: the reason codes are constants of the string type Reason (Deferral.Reason
// is a Reason).
const _ maintenance.Reason = maintenance.ReasonLeaseHeld

// Soft gates: `Gate{Producer string}`. `Deferral{Task, Reason, Blocker string; Since time.Time}`.
var (
	_ = maintenance.Gate{Producer: aString}
	_ = func(g maintenance.Gate) string { return g.Producer }
	_ = maintenance.Deferral{Task: aString, Reason: maintenance.Reason(aString), Blocker: aString, Since: aTime}
	_ = func(d maintenance.Deferral) (string, maintenance.Reason, string, time.Time) {
		return d.Task, d.Reason, d.Blocker, d.Since
	}
)

// `Lease` interface, every grant a `Grant{Holder string; Token uint64; AcquiredAt, ExpiresAt time.Time}`:
// Acquire, Renew, Release, Current; ErrLeaseHeld, ErrNotHolder, ErrHoldExceeded.
var (
	_ = maintenance.Grant{Holder: aString, Token: aUint64, AcquiredAt: aTime, ExpiresAt: aTime}
	_ = func(g maintenance.Grant) (string, uint64, time.Time, time.Time) {
		return g.Holder, g.Token, g.AcquiredAt, g.ExpiresAt
	}
	_ func(maintenance.Lease, context.Context, string, time.Duration, time.Time) (maintenance.Grant, error)            = maintenance.Lease.Acquire
	_ func(maintenance.Lease, context.Context, maintenance.Grant, time.Duration, time.Time) (maintenance.Grant, error) = maintenance.Lease.Renew
	_ func(maintenance.Lease, context.Context, maintenance.Grant) error                                                = maintenance.Lease.Release
	_ func(maintenance.Lease, context.Context, time.Time) (maintenance.Grant, bool, error)                             = maintenance.Lease.Current
	_ maintenance.Lease                                                                                                = leaseMethods(nil)
	_ leaseMethods                                                                                                     = maintenance.Lease(nil)
	_ error                                                                                                            = maintenance.ErrLeaseHeld
	_ error                                                                                                            = maintenance.ErrNotHolder
	_ error                                                                                                            = maintenance.ErrHoldExceeded
)

type leaseMethods interface {
	Acquire(ctx context.Context, holder string, ttl time.Duration, now time.Time) (maintenance.Grant, error)
	Renew(ctx context.Context, g maintenance.Grant, ttl time.Duration, now time.Time) (maintenance.Grant, error)
	Release(ctx context.Context, g maintenance.Grant) error
	Current(ctx context.Context, now time.Time) (maintenance.Grant, bool, error)
}

// `StateStore` keeps each task's `TaskState`: "last run, outcome, running flag, deferral
// streak start and last reason", fenced by the lease token. Code's choice: the method set
// (Load a Snapshot, Save fenced by a token) and the TaskState field names; the postgres
// module implements them.
var (
	_ func(maintenance.StateStore, context.Context) (maintenance.Snapshot, error)           = maintenance.StateStore.Load
	_ func(maintenance.StateStore, context.Context, uint64, ...maintenance.TaskState) error = maintenance.StateStore.Save
	_ maintenance.StateStore                                                                = (interface {
		Load(context.Context) (maintenance.Snapshot, error)
		Save(context.Context, uint64, ...maintenance.TaskState) error
	})(nil)
	_ = func(s maintenance.TaskState) (string, time.Time, maintenance.Outcome, bool, time.Time, maintenance.Reason) {
		return s.Name, s.LastRunAt, s.LastOutcome, s.Running, s.DeferredSince, s.DeferReason
	}
)

// `Gauge`: "lease holder and held-for, each waiter and how long, deferral chain depth, and
// a posture (`Healthy`, `Degraded` ...; `Unknown`; `Disabled`)". The postures are pinned by
// DESIGN.md; code's choice: they carry the prefix Posture. The Gauge's field names are the
// code's choice.
const (
	_ maintenance.Posture = maintenance.PostureHealthy
	_ maintenance.Posture = maintenance.PostureDegraded
	_ maintenance.Posture = maintenance.PostureUnknown
	_ maintenance.Posture = maintenance.PostureDisabled
)

var _ = func(g maintenance.Gauge) (maintenance.Posture, string, time.Duration, []maintenance.Waiter, int) {
	return g.Posture, g.Holder, g.HeldFor, g.Waiters, g.ChainDepth
}

// `(*Scheduler).Run(ctx)` polls every interval until ctx ends. Code's choice: it returns an
// error (ErrRunning when it is already running).
var _ func(*maintenance.Scheduler, context.Context) error = (*maintenance.Scheduler).Run

// `NewScheduler(tasks []Task, cfg Config) (*Scheduler, error)`; `Config` holds the Lease,
// the StateStore, the holder name, LeaseTTL, MaxHold, YieldAfter, DegradeAfter,
// AlsoDispatchLimit and the poll interval. Code's choice: the holder name is Holder and the
// poll interval PollInterval.
var (
	_ func([]maintenance.Task, maintenance.Config) (*maintenance.Scheduler, error) = maintenance.NewScheduler
	_                                                                              = maintenance.Config{
		Lease: maintenance.Lease(nil), StateStore: maintenance.StateStore(nil), Holder: aString,
		LeaseTTL: aDuration, MaxHold: aDuration, YieldAfter: aDuration, DegradeAfter: aDuration,
		AlsoDispatchLimit: anInt, PollInterval: aDuration,
	}
	_ = func(c maintenance.Config) (maintenance.Lease, maintenance.StateStore, string, time.Duration, time.Duration, time.Duration, time.Duration, int, time.Duration) {
		return c.Lease, c.StateStore, c.Holder, c.LeaseTTL, c.MaxHold, c.YieldAfter, c.DegradeAfter, c.AlsoDispatchLimit, c.PollInterval
	}
)

// `NewMemoryLease(maxHold time.Duration)` and `NewMemoryStateStore()`. Code's choice: they
// return the concrete pointers.
var (
	_ func(time.Duration) *maintenance.MemoryLease = maintenance.NewMemoryLease
	_ maintenance.Lease                            = (*maintenance.MemoryLease)(nil)
	_ func() *maintenance.MemoryStateStore         = maintenance.NewMemoryStateStore
	_ maintenance.StateStore                       = (*maintenance.MemoryStateStore)(nil)
)

// `maintenancetest` suites that any Lease or StateStore adapter runs. Code's choice: in
// the manner of indextest.Run; the lease factory gets the MaxHold the rule needs, and the
// store factory returns the store with the lease whose grants fence it.
var (
	_ func(*testing.T, func(*testing.T, time.Duration) maintenance.Lease)            = maintenancetest.RunLease
	_ func(*testing.T, func(*testing.T) (maintenance.StateStore, maintenance.Lease)) = maintenancetest.RunStateStore
)

// ---------------------------------------------------------------------------------------
// Value-level promises
// ---------------------------------------------------------------------------------------

// DESIGN.md § cadence: the presets "are addressable by the tier names "hot", "warm",
// "cold", "digest_weekly" through a Registry: NewRegistry() holds the presets"; "with Base
// ordered hot < warm < cold < weekly"; "An unknown tier is ErrUnknownTier, never a default".
func TestContractTierNames(t *testing.T) {
	reg := cadence.NewRegistry()
	presets := []struct {
		name string
		want cadence.Backoff
	}{
		{"hot", cadence.TierHot},
		{"warm", cadence.TierWarm},
		{"cold", cadence.TierCold},
		{"digest_weekly", cadence.DigestWeekly},
	}
	for i, p := range presets {
		got, err := reg.Lookup(p.name)
		if err != nil {
			t.Fatalf("Lookup(%q): %v; DESIGN.md: the tier names resolve through NewRegistry()", p.name, err)
		}
		if b, ok := got.(cadence.Backoff); !ok || b != p.want {
			t.Errorf("Lookup(%q) = %#v, want the preset %#v", p.name, got, p.want)
		}
		if err := p.want.Validate(); err != nil {
			t.Errorf("preset %q does not validate: %v", p.name, err)
		}
		if i > 0 && !(presets[i-1].want.Base < p.want.Base) {
			t.Errorf("preset Base %q = %v is not below %q = %v; DESIGN.md: hot < warm < cold < weekly",
				presets[i-1].name, presets[i-1].want.Base, p.name, p.want.Base)
		}
	}
	if _, err := reg.Lookup("lukewarm"); !errors.Is(err, cadence.ErrUnknownTier) {
		t.Errorf("Lookup of an unknown tier: err = %v, want ErrUnknownTier, never a default", err)
	}
	// Code's choice: the names are also exported as constants.
	for got, want := range map[string]string{
		cadence.NameHot: "hot", cadence.NameWarm: "warm", cadence.NameCold: "cold", cadence.NameDigestWeekly: "digest_weekly",
	} {
		if got != want {
			t.Errorf("tier name constant = %q, want %q", got, want)
		}
	}
}

// DESIGN.md § bridge: `StageAlreadySeen Stage = "already_seen"`.
func TestContractStageAlreadySeen(t *testing.T) {
	if bridge.StageAlreadySeen != "already_seen" {
		t.Errorf("StageAlreadySeen = %q, want %q", bridge.StageAlreadySeen, "already_seen")
	}
}

// DESIGN.md § tenancy: "The zero Context is invalid and every call that takes one refuses
// it with ErrNoTenant." One call of every method that takes a Context, each through its
// interface, on the in-memory implementations (and Bridge.SyncWatchlist).
func TestContractZeroContextIsErrNoTenant(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	var zero tenancy.Context

	var repo tenancy.Repository[string] = tenancy.NewMemoryRepository[string]()
	var wl tenancy.Watchlist = tenancy.NewMemoryWatchlist()
	var ent tenancy.Entitlements = tenancy.NewMemoryEntitlements()
	var idx duework.Index = duework.NewMemory()
	b := &bridge.Bridge{Index: idx, Watchlist: wl, Pipeline: bridge.PipelineFunc(
		func(context.Context, tenancy.Context, tenancy.WatchlistEntry) (bridge.Result, error) {
			return bridge.Result{}, nil
		})}
	entry := duework.Entry{UserID: "alice", WorkKey: "feed", Tier: "hot", DueAt: now}

	calls := []struct {
		name string
		call func() error
	}{
		{"Repository.Put", func() error { return repo.Put(ctx, zero, "id", "v") }},
		{"Repository.Get", func() error { _, err := repo.Get(ctx, zero, "id"); return err }},
		{"Repository.Delete", func() error { return repo.Delete(ctx, zero, "id") }},
		{"Repository.List", func() error { _, err := repo.List(ctx, zero); return err }},
		{"Watchlist.Add", func() error {
			return wl.Add(ctx, zero, tenancy.WatchlistEntry{UserID: "alice", Slug: "feed", Tier: "hot", AddedAt: now})
		}},
		{"Watchlist.Remove", func() error { return wl.Remove(ctx, zero, "feed") }},
		{"Watchlist.Get", func() error { _, err := wl.Get(ctx, zero, "feed"); return err }},
		{"Watchlist.List", func() error { _, err := wl.List(ctx, zero); return err }},
		{"Entitlements.Plan", func() error { _, err := ent.Plan(ctx, zero); return err }},
		{"Index.Schedule", func() error { return idx.Schedule(ctx, zero, entry) }},
		{"Index.Unschedule", func() error { return idx.Unschedule(ctx, zero, "feed") }},
		{"Index.Get", func() error { _, err := idx.Get(ctx, zero, "feed"); return err }},
		{"Index.Complete", func() error {
			return idx.Complete(ctx, zero, duework.Claim{Entry: entry, Token: 1, Until: now.Add(time.Minute)}, entry)
		}},
		{"Bridge.SyncWatchlist", func() error { _, err := b.SyncWatchlist(ctx, zero, now); return err }},
	}
	for _, c := range calls {
		if err := c.call(); !errors.Is(err, tenancy.ErrNoTenant) {
			t.Errorf("%s with the zero Context: err = %v, want ErrNoTenant", c.name, err)
		}
	}
	// Nothing was written on anyone's behalf.
	alice, err := tenancy.NewContext("alice")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := wl.List(ctx, alice); err != nil || len(got) != 0 {
		t.Errorf("after the refused calls, alice's watchlist = %v, %v; want empty", got, err)
	}
	if _, err := idx.Get(ctx, alice, "feed"); !errors.Is(err, duework.ErrNotFound) {
		t.Errorf("after the refused calls, Index.Get(alice, feed): err = %v, want ErrNotFound", err)
	}
}

// DESIGN.md § Layout: "runtime packages import only the standard library";
// "Imports point one way: cadence and tenancy import nothing of rota; duework imports them;
// dispatch imports duework; bridge imports all four; maintenance imports none of them.
// Nothing imports bridge." (Within the core: examples and the nested otel module do import
// bridge; "nothing" is read as no other core package.) The examples are standard library
// only too. Read from the non-test source files with go/build.
func TestContractLayering(t *testing.T) {
	const mod = "github.com/rotaworks/rota/"
	// may lists, for each runtime package, the rota packages it may import: those DESIGN.md
	// puts below it. (dispatch may also reach cadence and tenancy directly: the rule fixes the
	// direction, and that keeps it.)
	may := map[string][]string{
		"cadence":     nil,
		"tenancy":     nil,
		"duework":     {"cadence", "tenancy"},
		"dispatch":    {"cadence", "tenancy", "duework"},
		"bridge":      {"cadence", "tenancy", "duework", "dispatch"},
		"maintenance": nil,
	}
	examples, err := filepath.Glob("examples/*")
	if err != nil {
		t.Fatal(err)
	}
	dirs := []string{"cadence", "tenancy", "duework", "dispatch", "bridge", "maintenance"}
	for _, ex := range examples {
		if fi, err := os.Stat(ex); err == nil && fi.IsDir() {
			dirs = append(dirs, filepath.ToSlash(ex))
		}
	}
	for _, dir := range dirs {
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Errorf("%s: %v", dir, err)
			continue
		}
		for _, imp := range pkg.Imports {
			first, _, _ := strings.Cut(imp, "/")
			switch {
			case strings.HasPrefix(imp, mod):
				rel := strings.TrimPrefix(imp, mod)
				if allowed, core := may[dir]; core && !slices.Contains(allowed, rel) {
					t.Errorf("%s imports %s; DESIGN.md allows it only %v", dir, imp, allowed)
				}
			case strings.Contains(first, "."):
				t.Errorf("%s imports %s at run time; runtime packages import only the standard library", dir, imp)
			}
		}
	}
	// The direction as DESIGN.md states it: bridge imports all four.
	pkg, err := build.ImportDir("bridge", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range may["bridge"] {
		if !slices.Contains(pkg.Imports, mod+want) {
			t.Errorf("bridge does not import %s; DESIGN.md: bridge imports all four", want)
		}
	}
}
