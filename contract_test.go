package rota_test

// This file pins rota's contract: the names and signatures that host code, the examples,
// the adapter modules and outside checks are written against, so that the build breaks the
// moment a name, a parameter, a result or a field drifts from it. Each pin's comment states
// the rule it holds; what each name does is in its package's doc.
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
// Where the contract names something without fixing its shape, the code's choice is pinned
// as well, under a comment that says "code's choice": changing it is allowed, but only on
// purpose, by editing this file. Value-level promises (tier names, preset order, limits'
// bounds, defaults, the wire form, the zero Context, the import layering) are checked at
// run time by the tests at the end.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/build"
	"log/slog"
	"net/http"
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
	"github.com/rotaworks/rota/inspect"
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
// § cadence
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
// § tenancy
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

// `Watchlist` interface: `Add(ctx, tc Context, e WatchlistEntry) error` (an entry whose
// UserID is not the Context's is ErrForbidden, never rewritten), `AddMany(ctx, tc,
// entries []WatchlistEntry) error` (all or nothing), `Remove(ctx, tc, slug string) error`,
// `Get(ctx, tc, slug) (WatchlistEntry, error)` (ErrNotFound), `GetMany(ctx, []Lookup)
// (entries []WatchlistEntry, errs []error, err error)` (each lookup under its own
// Context), `List(ctx, tc) ([]WatchlistEntry, error)`, and the operator's read of IDs only,
// `Tenants(ctx, after string, limit int) ([]string, error)`; `NewMemoryWatchlist()`. The
// watch-list slug is the due-work WorkKey.
var (
	_ func(tenancy.Watchlist, context.Context, tenancy.Context, tenancy.WatchlistEntry) error               = tenancy.Watchlist.Add
	_ func(tenancy.Watchlist, context.Context, tenancy.Context, []tenancy.WatchlistEntry) error             = tenancy.Watchlist.AddMany
	_ func(tenancy.Watchlist, context.Context, tenancy.Context, string) error                               = tenancy.Watchlist.Remove
	_ func(tenancy.Watchlist, context.Context, tenancy.Context, string) (tenancy.WatchlistEntry, error)     = tenancy.Watchlist.Get
	_ func(tenancy.Watchlist, context.Context, []tenancy.Lookup) ([]tenancy.WatchlistEntry, []error, error) = tenancy.Watchlist.GetMany
	_ func(tenancy.Watchlist, context.Context, tenancy.Context) ([]tenancy.WatchlistEntry, error)           = tenancy.Watchlist.List
	_ func(tenancy.Watchlist, context.Context, string, int) ([]string, error)                               = tenancy.Watchlist.Tenants
	_ func(tenancy.Watchlist, context.Context, []tenancy.WatchlistEntry) error                              = /* code's choice: seeding */ tenancy.Watchlist.AddAll
	_ tenancy.Watchlist                                                                                     = watchlistMethods(nil)
	_ watchlistMethods                                                                                      = tenancy.Watchlist(nil)
	_ tenancy.Watchlist                                                                                     = (*tenancy.MemoryWatchlist)(nil)
	_ func() *tenancy.MemoryWatchlist                                                                       = /* code's choice: the concrete pointer */ tenancy.NewMemoryWatchlist
)

type watchlistMethods interface {
	Add(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) error
	AddMany(ctx context.Context, tc tenancy.Context, entries []tenancy.WatchlistEntry) error
	AddAll(ctx context.Context, entries []tenancy.WatchlistEntry) error
	Remove(ctx context.Context, tc tenancy.Context, slug string) error
	Get(ctx context.Context, tc tenancy.Context, slug string) (tenancy.WatchlistEntry, error)
	GetMany(ctx context.Context, lookups []tenancy.Lookup) (entries []tenancy.WatchlistEntry, errs []error, err error)
	List(ctx context.Context, tc tenancy.Context) ([]tenancy.WatchlistEntry, error)
	Tenants(ctx context.Context, after string, limit int) ([]string, error)
}

// Code's choice: a GetMany lookup is `Lookup{Tenant Context; Slug string}`, and a Tenants
// page holds at most MaxTenantsPage IDs.
var (
	_ = tenancy.Lookup{Tenant: tenancy.Context{}, Slug: aString}
	_ = func(l tenancy.Lookup) (tenancy.Context, string) { return l.Tenant, l.Slug }
)

const _ int = tenancy.MaxTenantsPage

// Plans: `PlanID` (`PlanFree`, the plan of a tenant never given one; the other plans are
// the host's); `Entitlements` interface `Plan(ctx, Context) (PlanID, error)`;
// `NewMemoryEntitlements()`.
const (
	_ tenancy.PlanID = tenancy.PlanFree
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
// § duework
// ---------------------------------------------------------------------------------------

// `Entry{UserID, WorkKey, Tier string; DueAt, LastRunAt time.Time; MissStreak,
// ErrorStreak int}` — a fixed row of scheduling metadata, with no payload field, and it must never grow one:
// posting content, credentials and settings cannot travel through the index by
// construction. The conversion from the exact struct type pins every field, its type and
// order, and that there are no others: adding a field of any kind breaks this line.
var (
	_ = duework.Entry{UserID: aString, WorkKey: aString, Tier: aString, DueAt: aTime, LastRunAt: aTime, MissStreak: anInt, ErrorStreak: anInt}
	_ = duework.Entry(struct {
		UserID, WorkKey, Tier string
		DueAt, LastRunAt      time.Time
		MissStreak            int
		ErrorStreak           int
	}{})
)

// `Key{UserID, WorkKey string}`; `Claim{Entry Entry; Token uint64; Until time.Time}`;
// `Head{UserID string; LastServed, Turn time.Time; Due []Entry; More bool; Limits Limits;
// InFlight int}`: a head carries the user's stored limits and its in-flight count at the
// read's now.
var (
	_ = duework.Key{UserID: aString, WorkKey: aString}
	_ = func(k duework.Key) (string, string) { return k.UserID, k.WorkKey }
	_ = duework.Claim{Entry: duework.Entry{}, Token: aUint64, Until: aTime}
	_ = func(c duework.Claim) (duework.Entry, uint64, time.Time) { return c.Entry, c.Token, c.Until }
	_ = duework.Head{UserID: aString, LastServed: aTime, Turn: aTime, Due: []duework.Entry(nil), More: aBool,
		Limits: duework.Limits{}, InFlight: anInt}
	_ = func(h duework.Head) (string, time.Time, time.Time, []duework.Entry, bool, duework.Limits, int) {
		return h.UserID, h.LastServed, h.Turn, h.Due, h.More, h.Limits, h.InFlight
	}
)

// `Done{Tenant tenancy.Context; Claim Claim; Next Entry}`; `Route{UserID, Group string;
// Limits Limits}` (routing writes a user's limits with its group);
// `ReadyQuery{Group string; Now time.Time; Users, PerUser int; Hold time.Duration}`;
// `ReadyPage{Heads []Head; Next time.Time}`; `Unclaim{Tenant tenancy.Context; Claim
// Claim}`, one claim for Unclaim and StartClaims.
var (
	_ = duework.Done{Tenant: tenancy.Context{}, Claim: duework.Claim{}, Next: duework.Entry{}}
	_ = func(d duework.Done) (tenancy.Context, duework.Claim, duework.Entry) { return d.Tenant, d.Claim, d.Next }
	_ = duework.Route{UserID: aString, Group: aString, Limits: duework.Limits{}}
	_ = func(r duework.Route) (string, string, duework.Limits) { return r.UserID, r.Group, r.Limits }
	_ = duework.ReadyQuery{Group: aString, Now: aTime, Users: anInt, PerUser: anInt, Hold: aDuration}
	_ = func(q duework.ReadyQuery) (string, time.Time, int, int, time.Duration) {
		return q.Group, q.Now, q.Users, q.PerUser, q.Hold
	}
	_ = duework.ReadyPage{Heads: []duework.Head(nil), Next: aTime}
	_ = func(p duework.ReadyPage) ([]duework.Head, time.Time) { return p.Heads, p.Next }
	_ = duework.Unclaim{Tenant: tenancy.Context{}, Claim: duework.Claim{}}
	_ = func(u duework.Unclaim) (tenancy.Context, duework.Claim) { return u.Tenant, u.Claim }
)

// Flow control: `Limits{Weight, MaxInFlight int; Every time.Duration; Burst int}`, the
// zero value meaning weight 1, no cap and no rate; `(Limits).Validate() error` (Weight in
// [0, MaxWeight], MaxInFlight and Burst in [0, MaxLimit], Every ≥ 0, else ErrInvalid
// naming the field); `(Limits).EffectiveWeight() int`; the constant `MaxWeight` = 1,000
// (its value and the bounds are checked at run time below).
var (
	_ = duework.Limits{Weight: anInt, MaxInFlight: anInt, Every: aDuration, Burst: anInt}
	_ = func(l duework.Limits) (int, int, time.Duration, int) {
		return l.Weight, l.MaxInFlight, l.Every, l.Burst
	}

	_ func(duework.Limits) error = duework.Limits.Validate
	_ func(duework.Limits) int   = duework.Limits.EffectiveWeight
)

const (
	_ int = duework.MaxWeight
	_ int = duework.MaxLimit // code's choice: the bound of limits, Users and PerUser
)

// The operator's reads: `UserState{Group string; Limits Limits; LastServed, Turn,
// HeldUntil time.Time; InFlight int; PausedUntil time.Time; PauseReason string}`,
// `EntryState{Entry Entry; ClaimedUntil time.Time}` (ClaimedUntil zero when unclaimed) and
// `UserPause{UserID, Reason string; Until time.Time}`.
var (
	_ = duework.UserState{Group: aString, Limits: duework.Limits{}, LastServed: aTime, Turn: aTime, HeldUntil: aTime, InFlight: anInt,
		PausedUntil: aTime, PauseReason: aString}
	_ = func(u duework.UserState) (string, duework.Limits, time.Time, time.Time, time.Time, int, time.Time, string) {
		return u.Group, u.Limits, u.LastServed, u.Turn, u.HeldUntil, u.InFlight, u.PausedUntil, u.PauseReason
	}
	_ = duework.UserPause{UserID: aString, Reason: aString, Until: aTime}
	_ = func(p duework.UserPause) (string, string, time.Time) { return p.UserID, p.Reason, p.Until }
	_ = duework.EntryState{Entry: duework.Entry{}, ClaimedUntil: aTime}
	_ = func(e duework.EntryState) (duework.Entry, time.Time) { return e.Entry, e.ClaimedUntil }
)

// `Advance(e Entry, p cadence.Policy, hit bool, now time.Time) Entry` — pure: a hit
// resets the streak and schedules now + p.NextInterval(0); a miss increments it and backs
// off; the next due time counts from now, never from the old DueAt.
var _ func(duework.Entry, cadence.Policy, bool, time.Time) duework.Entry = duework.Advance

// `Fail(e Entry, p cadence.Policy, now time.Time) Entry` — pure, beside Advance: the error
// streak grows and the entry is due at now + p.NextInterval(streak − 1).
var _ func(duework.Entry, cadence.Policy, time.Time) duework.Entry = duework.Fail

// duework's own sentinels: ErrNotFound, ErrClaimLost, ErrClaimStarted (a claim started
// already), and ErrInvalid for bad input.
var (
	_ error = duework.ErrNotFound
	_ error = duework.ErrClaimLost
	_ error = duework.ErrClaimStarted
	_ error = duework.ErrInvalid
)

// The Index contract (v2.3), method by method, and exactly these twenty methods: every
// capability is in the one interface, so a host's own adapter meets one contract and
// indextest checks all of it.
//
// Tenant-scoped (tc must be valid and an entry's UserID must be tc's): Schedule (insert or
// replace), ScheduleMissing (insert only the absent ones), Unschedule (absent is not an
// error), Get (ErrNotFound), Complete (ErrClaimLost), CompleteMany (each item under its
// own Context; errs[i] per item when err is nil), StartClaims (mark current claims
// started, each once: ErrClaimStarted after, ErrClaimLost for one no longer current),
// UnscheduleClaimed (remove while the claim is current), Unclaim (hand unstarted claims
// back unrun, the entry left as it is), Pause and Resume (keep a tenant from being served
// until an instant, and end that).
//
// The dispatcher's cross-tenant calls, the narrow, documented exception: DueBefore, Ready,
// Route, Groups, Release, Claim. The operator's reads, the same exception: User, Entries
// and Paused.
var (
	_ func(duework.Index, context.Context, tenancy.Context, duework.Entry) error                         = duework.Index.Schedule
	_ func(duework.Index, context.Context, tenancy.Context, []duework.Entry) (int, error)                = duework.Index.ScheduleMissing
	_ func(duework.Index, context.Context, tenancy.Context, string) error                                = duework.Index.Unschedule
	_ func(duework.Index, context.Context, tenancy.Context, string) (duework.Entry, error)               = duework.Index.Get
	_ func(duework.Index, context.Context, tenancy.Context, duework.Claim, duework.Entry) error          = duework.Index.Complete
	_ func(duework.Index, context.Context, []duework.Done) ([]error, error)                              = duework.Index.CompleteMany
	_ func(duework.Index, context.Context, []duework.Unclaim) ([]error, error)                           = duework.Index.StartClaims
	_ func(duework.Index, context.Context, tenancy.Context, duework.Claim) error                         = duework.Index.UnscheduleClaimed
	_ func(duework.Index, context.Context, []duework.Unclaim) ([]error, error)                           = duework.Index.Unclaim
	_ func(duework.Index, context.Context, time.Time, int) ([]duework.Entry, error)                      = duework.Index.DueBefore
	_ func(duework.Index, context.Context, duework.ReadyQuery) (duework.ReadyPage, error)                = duework.Index.Ready
	_ func(duework.Index, context.Context, []duework.Route) error                                        = duework.Index.Route
	_ func(duework.Index, context.Context, time.Time) ([]string, error)                                  = duework.Index.Groups
	_ func(duework.Index, context.Context, []string, time.Time) error                                    = duework.Index.Release
	_ func(duework.Index, context.Context, []duework.Key, time.Time, time.Time) ([]duework.Claim, error) = duework.Index.Claim
	_ func(duework.Index, context.Context, string, time.Time) (duework.UserState, error)                 = duework.Index.User
	_ func(duework.Index, context.Context, string, string, int) ([]duework.EntryState, error)            = duework.Index.Entries
	_ func(duework.Index, context.Context, tenancy.Context, time.Time, string) error                     = duework.Index.Pause
	_ func(duework.Index, context.Context, tenancy.Context) error                                        = duework.Index.Resume
	_ func(duework.Index, context.Context, time.Time, string, int) ([]duework.UserPause, error)          = duework.Index.Paused
	_ duework.Index                                                                                      = indexMethods(nil)
	_ indexMethods                                                                                       = duework.Index(nil)
)

type indexMethods interface {
	Schedule(ctx context.Context, tc tenancy.Context, e duework.Entry) error
	ScheduleMissing(ctx context.Context, tc tenancy.Context, entries []duework.Entry) (added int, err error)
	Unschedule(ctx context.Context, tc tenancy.Context, workKey string) error
	Get(ctx context.Context, tc tenancy.Context, workKey string) (duework.Entry, error)
	Complete(ctx context.Context, tc tenancy.Context, c duework.Claim, next duework.Entry) error
	CompleteMany(ctx context.Context, done []duework.Done) (errs []error, err error)
	StartClaims(ctx context.Context, claims []duework.Unclaim) (errs []error, err error)
	UnscheduleClaimed(ctx context.Context, tc tenancy.Context, c duework.Claim) error
	Unclaim(ctx context.Context, claims []duework.Unclaim) (errs []error, err error)
	DueBefore(ctx context.Context, now time.Time, limit int) ([]duework.Entry, error)
	Ready(ctx context.Context, q duework.ReadyQuery) (duework.ReadyPage, error)
	Route(ctx context.Context, routes []duework.Route) error
	Groups(ctx context.Context, now time.Time) ([]string, error)
	Release(ctx context.Context, userIDs []string, heldUntil time.Time) error
	Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error)
	User(ctx context.Context, userID string, now time.Time) (duework.UserState, error)
	Entries(ctx context.Context, userID, after string, limit int) ([]duework.EntryState, error)
	Pause(ctx context.Context, tc tenancy.Context, until time.Time, reason string) error
	Resume(ctx context.Context, tc tenancy.Context) error
	Paused(ctx context.Context, now time.Time, after string, limit int) ([]duework.UserPause, error)
}

// `NewMemory() *Memory`: the embedded default, safe for concurrent use.
var (
	_ func() *duework.Memory = duework.NewMemory
	_ duework.Index          = (*duework.Memory)(nil)
)

// `duework/indextest`: `Run(t *testing.T, newIndex func(t *testing.T) duework.Index)`
// checks the whole contract, flow control included, on any Index. Code's choice: the
// reference model it compares against is exported as Model, itself an Index, for tests of
// code built on an Index.
var (
	_ func(*testing.T, func(*testing.T) duework.Index) = indextest.Run
	_ func() *indextest.Model                          = indextest.NewModel
	_ duework.Index                                    = (*indextest.Model)(nil)
)

// ---------------------------------------------------------------------------------------
// § dispatch
// ---------------------------------------------------------------------------------------

// `type Lane string`; `LaneCapacity{Lane Lane; PerUserLimit, PerCycleLimit, MinShare,
// PerUserBurst int}` (PerUserBurst: 0 means PerUserLimit; New refuses a positive value
// below PerUserLimit); `type LaneFor func(ctx context.Context, userID string) (Lane,
// error)`; `type LimitsFor func(ctx context.Context, userID string) (duework.Limits,
// error)`, called right after each LaneFor call that resolved a configured lane and at no
// other time.
const _ dispatch.Lane = ""

var (
	_ = dispatch.LaneCapacity{Lane: dispatch.Lane(""), PerUserLimit: anInt, PerCycleLimit: anInt, MinShare: anInt, PerUserBurst: anInt}
	_ = func(c dispatch.LaneCapacity) (dispatch.Lane, int, int, int, int) {
		return c.Lane, c.PerUserLimit, c.PerCycleLimit, c.MinShare, c.PerUserBurst
	}
	_ func(context.Context, string) (dispatch.Lane, error)  = dispatch.LaneFor(nil)
	_ func(context.Context, string) (duework.Limits, error) = dispatch.LimitsFor(nil)
)

// `Config{Lanes []LaneCapacity /* highest priority first */; GlobalBatchLimit int; LaneFor
// LaneFor; LimitsFor LimitsFor; ClaimFor, HoldFor, MaxClockSkew, RetryAfter time.Duration;
// RouteLimit int}` (zero HoldFor, MaxClockSkew, RetryAfter, RouteLimit: documented
// defaults, DefaultMaxClockSkew among them; nil LimitsFor: every user zero limits);
// `New(idx duework.Index, cfg Config) (*Dispatcher, error)`. Code's choice: the Config
// also carries the Observer told about every cycle.
var (
	_ = dispatch.Config{Lanes: []dispatch.LaneCapacity(nil), GlobalBatchLimit: anInt, LaneFor: dispatch.LaneFor(nil),
		LimitsFor: dispatch.LimitsFor(nil), ClaimFor: aDuration, HoldFor: aDuration, MaxClockSkew: aDuration,
		RetryAfter: aDuration, RouteLimit: anInt, Observer: dispatch.Observer(nil)}
	_ = func(c dispatch.Config) ([]dispatch.LaneCapacity, int, dispatch.LaneFor, dispatch.LimitsFor, time.Duration, time.Duration, time.Duration, time.Duration, int, dispatch.Observer) {
		return c.Lanes, c.GlobalBatchLimit, c.LaneFor, c.LimitsFor, c.ClaimFor, c.HoldFor, c.MaxClockSkew, c.RetryAfter, c.RouteLimit, c.Observer
	}
	_ func(duework.Index, dispatch.Config) (*dispatch.Dispatcher, error) = dispatch.New
)

const (
	_ time.Duration = dispatch.DefaultMaxClockSkew
	_ time.Duration = dispatch.DefaultHoldFor // code's choice: the other defaults are named too
)

// Code's choice: a Config that breaks a rule is refused with ErrInvalidConfig.
var _ error = dispatch.ErrInvalidConfig

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

// Backpressure: `(*Dispatcher).DispatchAtMost(ctx, now, t Take) (Batch, error)` with
// `Take{Total int; PerLane map[Lane]int}` is Dispatch with GlobalBatchLimit =
// min(GlobalBatchLimit, Total) and each lane's PerCycleLimit = min(PerCycleLimit,
// PerLane[lane]), a lane absent from PerLane having no extra cap.
var (
	_ func(*dispatch.Dispatcher, context.Context, time.Time, dispatch.Take) (dispatch.Batch, error) = (*dispatch.Dispatcher).DispatchAtMost
	_                                                                                               = dispatch.Take{Total: anInt, PerLane: map[dispatch.Lane]int(nil)}
	_                                                                                               = func(t dispatch.Take) (int, map[dispatch.Lane]int) { return t.Total, t.PerLane }
)

// `Select(in SelectInput) Selection` is pure and does all the fairness work:
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

// `LaneReport{Lane Lane; Users, Dispatched, Shed, LostClaims int; WaitingSince time.Time;
// Limited int; OldestDue time.Time; Overdue []Overdue}`: Users the users the lane's Ready
// returned; now − WaitingSince how long the lane keeps someone waiting on its neighbours;
// Limited the users read whose own limits held back visible work; now − OldestDue how
// late the lane's most overdue work is (zero: none); Overdue names at most ten of those
// users. `Unrouted{UserID string; Err error}`. Code's choice: `Overdue{UserID
// string; DueAt time.Time}`.
var (
	_ = dispatch.LaneReport{Lane: dispatch.Lane(""), Users: anInt, Dispatched: anInt, Shed: anInt, LostClaims: anInt, WaitingSince: aTime,
		Limited: anInt, OldestDue: aTime, Overdue: []dispatch.Overdue(nil)}
	_ = func(r dispatch.LaneReport) (dispatch.Lane, int, int, int, int, time.Time, int, time.Time, []dispatch.Overdue) {
		return r.Lane, r.Users, r.Dispatched, r.Shed, r.LostClaims, r.WaitingSince, r.Limited, r.OldestDue, r.Overdue
	}
	_ = dispatch.Overdue{UserID: aString, DueAt: aTime}
	_ = func(o dispatch.Overdue) (string, time.Time) { return o.UserID, o.DueAt }
	_ = dispatch.Unrouted{UserID: aString, Err: anError}
	_ = func(u dispatch.Unrouted) (string, error) { return u.UserID, u.Err }
)

// Observing: `dispatch.Observer`, which inspect.Inspector implements. Code's choice:
// `ObserveDispatch(CycleInfo)` with `CycleInfo{Now time.Time; Batch Batch; Err error}`.
var (
	_ func(dispatch.Observer, dispatch.CycleInfo) = dispatch.Observer.ObserveDispatch
	_ dispatch.Observer                           = (interface{ ObserveDispatch(dispatch.CycleInfo) })(nil)
	_                                             = dispatch.CycleInfo{Now: aTime, Batch: dispatch.Batch{}, Err: anError}
	_                                             = func(c dispatch.CycleInfo) (time.Time, dispatch.Batch, error) { return c.Now, c.Batch, c.Err }
)

// ---------------------------------------------------------------------------------------
// § bridge
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

// `Bridge{Index duework.Index; Watchlist tenancy.Watchlist; Pipeline Pipeline; Tiers
// *cadence.Registry; Retry cadence.Policy}` (v2.3: nil Retry means `DefaultRetry`,
// `cadence.Backoff{Base: time.Minute, Max: 6 * time.Hour, Factor: 2}`) with `(*Bridge).SyncWatchlist(ctx, tc
// tenancy.Context, now time.Time) (added int, err error)` and `(*Bridge).RunDueItem(ctx,
// item dispatch.Item, now time.Time) (*Result, error)`. RunDueItem takes now as the item's
// start: when the claim ends within the margin (DefaultClaimMargin, 5 s) it runs nothing,
// hands the claim back and returns an error wrapping ErrClaimEnded. Code's choice: the one
// claim-margin setting is WorkerConfig.ClaimMargin (RunDueItem is a Worker of one item
// with the default WorkerConfig). Code's choice: `SyncAll(ctx, now)` syncs every tenant listed by
// Watchlist.Tenants, and `Watch(ctx, tc, entries, now)` adds and schedules in one step,
// checking each tier against Tiers.
var (
	_ = bridge.Bridge{Index: duework.Index(nil), Watchlist: tenancy.Watchlist(nil), Pipeline: bridge.Pipeline(nil), Tiers: (*cadence.Registry)(nil),
		Retry: cadence.Policy(nil)}
	_ = func(b bridge.Bridge) (duework.Index, tenancy.Watchlist, bridge.Pipeline, *cadence.Registry, cadence.Policy) {
		return b.Index, b.Watchlist, b.Pipeline, b.Tiers, b.Retry
	}
	_ cadence.Backoff                                                                                          = bridge.DefaultRetry
	_ func(*bridge.Bridge, context.Context, tenancy.Context, time.Time) (int, error)                           = (*bridge.Bridge).SyncWatchlist
	_ func(*bridge.Bridge, context.Context, dispatch.Item, time.Time) (*bridge.Result, error)                  = (*bridge.Bridge).RunDueItem
	_ func(*bridge.Bridge, context.Context, time.Time) (int, error)                                            = (*bridge.Bridge).SyncAll
	_ func(*bridge.Bridge, context.Context, tenancy.Context, []tenancy.WatchlistEntry, time.Time) (int, error) = (*bridge.Bridge).Watch
	_ error                                                                                                    = bridge.ErrClaimEnded
)

const _ time.Duration = bridge.DefaultClaimMargin

// `PlanLanes`: the wiring from `tenancy.Entitlements` to a `dispatch.LaneFor`. Its shape is
// open; code's choice: a table from plan to lane, validated once against the lanes of the
// dispatch.Config it is for, so the result and a constructor error.
// `PlanLimits(plans tenancy.Entitlements, table map[tenancy.PlanID]duework.Limits)
// (dispatch.LimitsFor, error)` is the plan wiring of limits beside it: it refuses a nil
// Entitlements, an empty table and invalid limits, and a tenant whose plan the table lacks
// gets an error from the LimitsFor.
var (
	_ func(tenancy.Entitlements, map[tenancy.PlanID]dispatch.Lane, []dispatch.LaneCapacity) (dispatch.LaneFor, error) = bridge.PlanLanes
	_ func(tenancy.Entitlements, map[tenancy.PlanID]duework.Limits) (dispatch.LimitsFor, error)                       = bridge.PlanLimits
)

// Wire form, for a host's own queue: `EncodeItem(it dispatch.Item) ([]byte, error)` and
// `DecodeItem(b []byte) (dispatch.Item, error)` (the format is checked at run time below).
var (
	_ func(dispatch.Item) ([]byte, error) = bridge.EncodeItem
	_ func([]byte) (dispatch.Item, error) = bridge.DecodeItem
)

// `NewWorker(b *Bridge, cfg WorkerConfig) (*Worker, error)`, `WorkerConfig{Workers,
// FlushItems int; FlushInterval, ClaimMargin time.Duration; Clock Clock; Logger
// *slog.Logger}` (zero values: the Runner's defaults); `(*Worker).Do(ctx, item
// dispatch.Item, now time.Time) ItemReport` runs one item on the bounded pool and returns
// once its completion write has returned or finally failed; `Stop(ctx)` refuses new items,
// waits for those running and flushes (code's choice: it returns an error).
var (
	_ func(*bridge.Bridge, bridge.WorkerConfig) (*bridge.Worker, error) = bridge.NewWorker
	_                                                                   = bridge.WorkerConfig{Workers: anInt, FlushItems: anInt, FlushInterval: aDuration, ClaimMargin: aDuration, Clock: bridge.Clock(nil), Logger: aLogger}
	_                                                                   = func(c bridge.WorkerConfig) (int, int, time.Duration, time.Duration, bridge.Clock, *slog.Logger) {
		return c.Workers, c.FlushItems, c.FlushInterval, c.ClaimMargin, c.Clock, c.Logger
	}
	_ func(*bridge.Worker, context.Context, dispatch.Item, time.Time) bridge.ItemReport = (*bridge.Worker).Do
	_ func(*bridge.Worker, context.Context) error                                       = (*bridge.Worker).Stop
)

// `ItemReport` holds the item, its `ItemStatus`, the pipeline's result, the error, and
// `Written bool`; late items are handed back unstarted with StatusLate. Code's choice: the
// field names, Next (the entry as written back), and the other statuses.
var (
	_ = bridge.ItemReport{Item: dispatch.Item{}, Status: bridge.ItemStatus(0), Result: (*bridge.Result)(nil), Next: duework.Entry{}, Err: anError, Written: aBool}
	_ = func(r bridge.ItemReport) (dispatch.Item, bridge.ItemStatus, *bridge.Result, duework.Entry, error, bool) {
		return r.Item, r.Status, r.Result, r.Next, r.Err, r.Written
	}
)

const (
	_ bridge.ItemStatus = bridge.StatusLate
	_ bridge.ItemStatus = bridge.StatusError
	_ bridge.ItemStatus = bridge.StatusHit
	_ bridge.ItemStatus = bridge.StatusMiss
	_ bridge.ItemStatus = bridge.StatusRemoved
	_ bridge.ItemStatus = bridge.StatusLostClaim
	_ bridge.ItemStatus = bridge.StatusReleased
	_ bridge.ItemStatus = bridge.StatusDuplicate
	_ bridge.ItemStatus = bridge.StatusPaused
)

// Upstream pushback (v2.3): `bridge.Pushback{After time.Duration; Reason string; Err
// error}` is an error (`Error`, `Unwrap`) a Pipeline returns when the tenant's upstream
// asks it to stop; `AlarmAfterErrors` in WorkerConfig and RunnerConfig (default 5,
// negative off). Code's choice: the default is the constant DefaultAlarmAfterErrors.
var (
	_       = bridge.Pushback{After: aDuration, Reason: aString, Err: anError}
	_ error = (*bridge.Pushback)(nil)
	_       = func(p *bridge.Pushback) error { return p.Unwrap() }
	_       = bridge.WorkerConfig{AlarmAfterErrors: anInt}
	_       = bridge.RunnerConfig{AlarmAfterErrors: anInt}
)

const _ = bridge.DefaultAlarmAfterErrors

// Backpressure: `type Sink interface { Room(ctx) (dispatch.Take, error); Send(ctx, lane
// dispatch.Lane, items []dispatch.Item) error }`, and `NewFeeder(d *dispatch.Dispatcher,
// sink Sink, cfg FeederConfig) (*Feeder, error)` with `FeederConfig{Interval
// time.Duration; Clock Clock; Logger *slog.Logger}`, whose `Run(ctx)` asks Room before
// each dispatch, sends each lane's items and hands back with Unclaim what a Send fails
// (code's choice: Run returns an error).
var (
	_ func(bridge.Sink, context.Context) (dispatch.Take, error)                            = bridge.Sink.Room
	_ func(bridge.Sink, context.Context, dispatch.Lane, []dispatch.Item) error             = bridge.Sink.Send
	_ bridge.Sink                                                                          = sinkMethods(nil)
	_ sinkMethods                                                                          = bridge.Sink(nil)
	_ func(*dispatch.Dispatcher, bridge.Sink, bridge.FeederConfig) (*bridge.Feeder, error) = bridge.NewFeeder
	_                                                                                      = bridge.FeederConfig{Interval: aDuration, Clock: bridge.Clock(nil), Logger: aLogger}
	_                                                                                      = func(c bridge.FeederConfig) (time.Duration, bridge.Clock, *slog.Logger) {
		return c.Interval, c.Clock, c.Logger
	}
	_ func(*bridge.Feeder, context.Context) error = (*bridge.Feeder).Run
)

type sinkMethods interface {
	Room(ctx context.Context) (dispatch.Take, error)
	Send(ctx context.Context, lane dispatch.Lane, items []dispatch.Item) error
}

// `NewRunner(b *Bridge, d *dispatch.Dispatcher, cfg RunnerConfig) (*Runner, error)` with
// `RunnerConfig{Interval time.Duration; Workers int; Clock Clock; Logger *slog.Logger}`
// (zero values: documented defaults, the real clock, the default logger), and the knobs of
// flow control: MinInterval (the least time between cycles when a backlog drains or Wake
// is called) and AlarmAfter (how late a tenant's work may be before a Warn line names it).
// Code's choice: the Worker's knobs (FlushItems, FlushInterval, ClaimMargin), a
// ShutdownTimeout, and the Observer told about every cycle.
var (
	_ func(*bridge.Bridge, *dispatch.Dispatcher, bridge.RunnerConfig) (*bridge.Runner, error) = bridge.NewRunner
	_                                                                                         = bridge.RunnerConfig{
		Interval: aDuration, MinInterval: aDuration, Workers: anInt, FlushItems: anInt, FlushInterval: aDuration,
		ClaimMargin: aDuration, ShutdownTimeout: aDuration, AlarmAfter: aDuration, Clock: bridge.Clock(nil), Logger: aLogger,
		Observer: bridge.Observer(nil),
	}
	_ = func(c bridge.RunnerConfig) (time.Duration, time.Duration, int, int, time.Duration, time.Duration, time.Duration, time.Duration, bridge.Clock, *slog.Logger, bridge.Observer) {
		return c.Interval, c.MinInterval, c.Workers, c.FlushItems, c.FlushInterval, c.ClaimMargin, c.ShutdownTimeout, c.AlarmAfter, c.Clock, c.Logger, c.Observer
	}
)

// Code's choice: the Clock a test passes in is the narrowest a loop needs, and bridge's
// Clock and maintenance.Config's Clock field have one and the same method set, so one
// fake serves both.
var (
	_ bridge.Clock = (interface {
		Now() time.Time
		NewTicker(d time.Duration) (<-chan time.Time, func())
		AfterFunc(d time.Duration, f func()) func() bool
	})(nil)
	_ = maintenance.Config{Clock: bridge.Clock(nil)}
	_ = func(c maintenance.Config) bridge.Clock { return c.Clock }
)

// `Runner`: `Cycle(ctx, now)` runs exactly one cycle and returns its report; `Run(ctx)`
// loops until ctx ends; `Wake()` starts the next cycle early (a host calls it after
// scheduling work due now). Code's choice: Cycle also returns the report's failures joined
// as an error, and Run returns nil after a clean stop.
var (
	_ func(*bridge.Runner, context.Context, time.Time) (bridge.CycleReport, error) = (*bridge.Runner).Cycle
	_ func(*bridge.Runner, context.Context) error                                  = (*bridge.Runner).Run
	_ func(*bridge.Runner)                                                         = (*bridge.Runner).Wake
)

// The report carries dispatched, hits, misses, removed, errors, shed and unrouted, and each
// lane's report (its lateness among them) — code's choice of the field names and types,
// and of the late-work alarms it lists.
var (
	_ = func(r bridge.CycleReport) (int, int, int, int, int, []string, []dispatch.Unrouted, []dispatch.LaneReport, []bridge.LateAlarm) {
		return r.Dispatched, r.Hits, r.Misses, r.Removed, r.Errors, r.Shed, r.Unrouted, r.Lanes, r.LateAlarms
	}
	_ = func(a bridge.LateAlarm) (dispatch.Lane, string, time.Duration) { return a.Lane, a.UserID, a.Late }
)

// Observing: `bridge.Observer`, which inspect.Inspector implements. Code's choice:
// `ObserveCycle(CycleReport)`.
var (
	_ func(bridge.Observer, bridge.CycleReport) = bridge.Observer.ObserveCycle
	_ bridge.Observer                           = (interface{ ObserveCycle(bridge.CycleReport) })(nil)
)

// ---------------------------------------------------------------------------------------
// § maintenance
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

// `StateStore` keeps, durably and fenced by the lease token (a write carrying an older
// token than the store has seen is refused, ErrStaleToken), each task's `TaskState`: last
// run, outcome, running flag, deferral streak start and last reason. Code's choice: the
// method set — Load a Snapshot, Save fenced by a token (tools and tests seed state with
// it), and Update, the atomic read-modify-write every Scheduler write goes through, so that
// schedulers sharing a store claim a task for one run across the fleet and never overwrite
// each other's deferrals — with `type UpdateFunc func(fence uint64, states []TaskState)
// (writes []TaskState, raise uint64, err error)`, the Snapshot and the TaskState field
// names; the postgres module implements them and maintenancetest checks every adapter.
var (
	_ func(maintenance.StateStore, context.Context) (maintenance.Snapshot, error)           = maintenance.StateStore.Load
	_ func(maintenance.StateStore, context.Context, uint64, ...maintenance.TaskState) error = maintenance.StateStore.Save
	_ func(maintenance.StateStore, context.Context, []string, maintenance.UpdateFunc) error = maintenance.StateStore.Update
	_ maintenance.StateStore                                                                = stateStoreMethods(nil)
	_ stateStoreMethods                                                                     = maintenance.StateStore(nil)
	_ func(uint64, []maintenance.TaskState) ([]maintenance.TaskState, uint64, error)        = maintenance.UpdateFunc(nil)
	_                                                                                       = maintenance.Snapshot{Token: aUint64, States: []maintenance.TaskState(nil)}
	_                                                                                       = func(s maintenance.Snapshot) (uint64, []maintenance.TaskState) { return s.Token, s.States }
	_                                                                                       = func(s maintenance.TaskState) (string, time.Time, maintenance.Outcome, bool, time.Time, maintenance.Reason) {
		return s.Name, s.LastRunAt, s.LastOutcome, s.Running, s.DeferredSince, s.DeferReason
	}
	_ error = maintenance.ErrStaleToken
)

type stateStoreMethods interface {
	Load(ctx context.Context) (maintenance.Snapshot, error)
	Save(ctx context.Context, token uint64, states ...maintenance.TaskState) error
	Update(ctx context.Context, names []string, f maintenance.UpdateFunc) error
}

// `Gauge` is computed from the StateStore at every poll: lease holder and held-for, each
// waiter and how long, deferral chain depth, and a posture (`Healthy`, `Degraded` once a
// waiter exceeds DegradeAfter; `Unknown`; `Disabled`), so a stall survives a restart and is
// visible. Code's choice: the postures carry the prefix Posture, the Gauge's field names,
// and `ReadGauge(ctx, store StateStore, lease Lease, now time.Time, degradeAfter
// time.Duration) (Gauge, error)`, which reads the gauge from the StateStore (and the
// Lease) alone, with no task list, as the inspector's maintenance page does.
const (
	_ maintenance.Posture = maintenance.PostureHealthy
	_ maintenance.Posture = maintenance.PostureDegraded
	_ maintenance.Posture = maintenance.PostureUnknown
	_ maintenance.Posture = maintenance.PostureDisabled
)

var (
	_ = func(g maintenance.Gauge) (maintenance.Posture, string, time.Duration, []maintenance.Waiter, int) {
		return g.Posture, g.Holder, g.HeldFor, g.Waiters, g.ChainDepth
	}
	_ func(context.Context, maintenance.StateStore, maintenance.Lease, time.Time, time.Duration) (maintenance.Gauge, error) = maintenance.ReadGauge
)

// Observing: `maintenance.Observer`, which inspect.Inspector implements. Code's choice:
// `ObservePoll(PollReport)`, and the Config's Observer field (below).
var (
	_ func(maintenance.Observer, maintenance.PollReport) = maintenance.Observer.ObservePoll
	_ maintenance.Observer                               = (interface{ ObservePoll(maintenance.PollReport) })(nil)
)

// `(*Scheduler).Run(ctx)` polls every interval until ctx ends. Code's choice: it returns an
// error (one when it is already running).
var _ func(*maintenance.Scheduler, context.Context) error = (*maintenance.Scheduler).Run

// `NewScheduler(tasks []Task, cfg Config) (*Scheduler, error)`; `Config` holds the Lease,
// the StateStore, the holder name, LeaseTTL, MaxHold, YieldAfter, DegradeAfter,
// AlsoDispatchLimit and the poll interval, zero values meaning documented defaults. Code's
// choice: the holder name is Holder, the poll interval PollInterval, and the Observer told
// about every poll.
var (
	_ func([]maintenance.Task, maintenance.Config) (*maintenance.Scheduler, error) = maintenance.NewScheduler
	_                                                                              = maintenance.Config{
		Lease: maintenance.Lease(nil), StateStore: maintenance.StateStore(nil), Holder: aString,
		LeaseTTL: aDuration, MaxHold: aDuration, YieldAfter: aDuration, DegradeAfter: aDuration,
		AlsoDispatchLimit: anInt, PollInterval: aDuration, Observer: maintenance.Observer(nil),
	}
	_ = func(c maintenance.Config) (maintenance.Lease, maintenance.StateStore, string, time.Duration, time.Duration, time.Duration, time.Duration, int, time.Duration, maintenance.Observer) {
		return c.Lease, c.StateStore, c.Holder, c.LeaseTTL, c.MaxHold, c.YieldAfter, c.DegradeAfter, c.AlsoDispatchLimit, c.PollInterval, c.Observer
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
// § inspect
// ---------------------------------------------------------------------------------------

// `inspect.New(cfg Config) (*Inspector, error)` with `Config{Index duework.Index; Lanes
// []dispatch.LaneCapacity; Dispatcher *dispatch.Dispatcher; StateStore
// maintenance.StateStore; Clock interface{ Now() time.Time }; Logger *slog.Logger; History
// int /* reports kept, 0: 60 */; Actions bool}`; New refuses a nil Index, no Lanes, and
// Actions without a Dispatcher (checked at run time below). `*Inspector` is an
// `http.Handler` the host mounts behind its own authentication, and also a
// `dispatch.Observer`, a `bridge.Observer` and a `maintenance.Observer`. Code's choice:
// New's errors wrap ErrInvalidConfig, and History's default keeps 60 reports.
var (
	_ func(inspect.Config) (*inspect.Inspector, error) = inspect.New
	_                                                  = inspect.Config{
		Index: duework.Index(nil), Lanes: []dispatch.LaneCapacity(nil), Dispatcher: (*dispatch.Dispatcher)(nil),
		StateStore: maintenance.StateStore(nil), Clock: (interface{ Now() time.Time })(nil), Logger: aLogger,
		History: anInt, Actions: aBool,
	}
	_ = func(c inspect.Config) (duework.Index, []dispatch.LaneCapacity, *dispatch.Dispatcher, maintenance.StateStore, interface{ Now() time.Time }, *slog.Logger, int, bool) {
		return c.Index, c.Lanes, c.Dispatcher, c.StateStore, c.Clock, c.Logger, c.History, c.Actions
	}
	_ http.Handler         = (*inspect.Inspector)(nil)
	_ dispatch.Observer    = (*inspect.Inspector)(nil)
	_ bridge.Observer      = (*inspect.Inspector)(nil)
	_ maintenance.Observer = (*inspect.Inspector)(nil)
	_ error                = inspect.ErrInvalidConfig
)

// ---------------------------------------------------------------------------------------
// Value-level promises
// ---------------------------------------------------------------------------------------

// § cadence: the presets are addressable by the tier names "hot", "warm", "cold" and
// "digest_weekly" through a Registry (NewRegistry() holds them), with Base ordered hot <
// warm < cold < weekly; an unknown tier is ErrUnknownTier, never a default.
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
			t.Fatalf("Lookup(%q): %v; the tier names resolve through NewRegistry()", p.name, err)
		}
		if b, ok := got.(cadence.Backoff); !ok || b != p.want {
			t.Errorf("Lookup(%q) = %#v, want the preset %#v", p.name, got, p.want)
		}
		if err := p.want.Validate(); err != nil {
			t.Errorf("preset %q does not validate: %v", p.name, err)
		}
		if i > 0 && !(presets[i-1].want.Base < p.want.Base) {
			t.Errorf("preset Base %q = %v is not below %q = %v; the order is hot < warm < cold < weekly",
				presets[i-1].name, presets[i-1].want.Base, p.name, p.want.Base)
		}
	}
	if _, err := reg.Lookup("lukewarm"); !errors.Is(err, cadence.ErrUnknownTier) {
		t.Errorf("Lookup of an unknown tier: err = %v, want ErrUnknownTier, never a default", err)
	}
	// Code's choice: the names are also exported as constants.
	for got, want := range map[string]string{
		"hot": "hot", "warm": "warm", "cold": "cold", "digest_weekly": "digest_weekly",
	} {
		if got != want {
			t.Errorf("tier name constant = %q, want %q", got, want)
		}
	}
}

// § bridge: `StageAlreadySeen Stage = "already_seen"`.
func TestContractStageAlreadySeen(t *testing.T) {
	if bridge.StageAlreadySeen != "already_seen" {
		t.Errorf("StageAlreadySeen = %q, want %q", bridge.StageAlreadySeen, "already_seen")
	}
}

// § tenancy: the zero Context is invalid and every call that takes one refuses it with
// ErrNoTenant. One call of every method that takes a Context, each through its
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
	claim := duework.Claim{Entry: entry, Token: 1, Until: now.Add(time.Minute)}
	watched := tenancy.WatchlistEntry{UserID: "alice", Slug: "feed", Tier: "hot", AddedAt: now}
	// only is the outcome of a batch of one item: the call's error, or the item's.
	only := func(errs []error, err error) error {
		if err != nil {
			return err
		}
		if len(errs) != 1 {
			return fmt.Errorf("%d outcomes for one item", len(errs))
		}
		return errs[0]
	}

	calls := []struct {
		name string
		call func() error
	}{
		{"Repository.Put", func() error { return repo.Put(ctx, zero, "id", "v") }},
		{"Repository.Get", func() error { _, err := repo.Get(ctx, zero, "id"); return err }},
		{"Repository.Delete", func() error { return repo.Delete(ctx, zero, "id") }},
		{"Repository.List", func() error { _, err := repo.List(ctx, zero); return err }},
		{"Watchlist.Add", func() error { return wl.Add(ctx, zero, watched) }},
		{"Watchlist.Remove", func() error { return wl.Remove(ctx, zero, "feed") }},
		{"Watchlist.Get", func() error { _, err := wl.Get(ctx, zero, "feed"); return err }},
		{"Watchlist.List", func() error { _, err := wl.List(ctx, zero); return err }},
		{"Entitlements.Plan", func() error { _, err := ent.Plan(ctx, zero); return err }},
		{"Index.Schedule", func() error { return idx.Schedule(ctx, zero, entry) }},
		{"Index.Unschedule", func() error { return idx.Unschedule(ctx, zero, "feed") }},
		{"Index.Get", func() error { _, err := idx.Get(ctx, zero, "feed"); return err }},
		{"Index.Complete", func() error { return idx.Complete(ctx, zero, claim, entry) }},
		{"Index.ScheduleMissing", func() error { _, err := idx.ScheduleMissing(ctx, zero, []duework.Entry{entry}); return err }},
		{"Index.UnscheduleClaimed", func() error { return idx.UnscheduleClaimed(ctx, zero, claim) }},
		// The batched calls carry a Context per item and answer each item on its own.
		{"Index.CompleteMany", func() error {
			return only(idx.CompleteMany(ctx, []duework.Done{{Tenant: zero, Claim: claim, Next: entry}}))
		}},
		{"Index.StartClaims", func() error { return only(idx.StartClaims(ctx, []duework.Unclaim{{Tenant: zero, Claim: claim}})) }},
		{"Index.Unclaim", func() error { return only(idx.Unclaim(ctx, []duework.Unclaim{{Tenant: zero, Claim: claim}})) }},
		{"Watchlist.AddMany", func() error { return wl.AddMany(ctx, zero, []tenancy.WatchlistEntry{watched}) }},
		{"Watchlist.GetMany", func() error {
			_, errs, err := wl.GetMany(ctx, []tenancy.Lookup{{Tenant: zero, Slug: "feed"}})
			return only(errs, err)
		}},
		{"Bridge.SyncWatchlist", func() error { _, err := b.SyncWatchlist(ctx, zero, now); return err }},
		{"Bridge.Watch", func() error { _, err := b.Watch(ctx, zero, []tenancy.WatchlistEntry{watched}, now); return err }},
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

// § Layout: runtime packages import only the standard library. Imports point one way:
// cadence and tenancy import nothing of rota; duework imports them; dispatch imports
// duework; bridge imports all four; maintenance imports none of them; inspect may import
// all of them. Among the core packages only inspect imports bridge, and none imports
// inspect. (Outside the core, examples and the nested modules do import bridge.) The
// examples of the root module are standard library only too; nested example modules
// (those with a go.mod of their own) may use the adapter modules and are not read here.
// Below every layer sit the internal packages that hold what the packages share — the
// validation rules (internal/vocab), the Clock (internal/clock), the rate-limited log
// line (internal/lograte) and duework.Memory's appending read and claim, which the
// dispatcher calls (internal/reuse): any runtime package
// may import them, and they import nothing of rota, so they join no two layers. Above
// duework sits internal/localstart, the claims a Runner starts itself, which imports
// duework alone of rota.
// internal/fleettest is test support that the adapters' tests share: it imports only the
// standard library and the core, and no runtime package or example imports it. Read from
// the non-test source files with go/build.
func TestContractLayering(t *testing.T) {
	const mod = "github.com/rotaworks/rota/"
	// may lists, for each runtime package, the rota packages it may import: those below it.
	// (dispatch may also reach cadence and tenancy directly: the rule fixes the direction,
	// and that keeps it.) Only inspect's list holds bridge, and no list holds inspect.
	may := map[string][]string{
		"cadence":     nil,
		"tenancy":     nil,
		"duework":     {"cadence", "tenancy"},
		"dispatch":    {"cadence", "tenancy", "duework"},
		"bridge":      {"cadence", "tenancy", "duework", "dispatch"},
		"maintenance": nil,
		"inspect":     {"cadence", "tenancy", "duework", "dispatch", "bridge", "maintenance"},
	}
	shared := []string{"internal/clock", "internal/localstart", "internal/lograte", "internal/reuse", "internal/vocab"}
	sharedMay := map[string][]string{"internal/localstart": {"duework"}} // what of rota a shared package may import
	for _, dir := range shared {
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Errorf("%s: %v", dir, err)
			continue
		}
		for _, imp := range pkg.Imports {
			if rel, rota := strings.CutPrefix(imp, mod); rota && slices.Contains(sharedMay[dir], rel) {
				continue
			}
			if first, _, _ := strings.Cut(imp, "/"); strings.Contains(first, ".") {
				t.Errorf("%s imports %s; the shared internal packages import only the standard library (and what sharedMay names)", dir, imp)
			}
		}
	}
	const support = "internal/fleettest"
	if pkg, err := build.ImportDir(support, 0); err != nil {
		t.Errorf("%s: %v", support, err)
	} else {
		for _, imp := range pkg.Imports {
			rel, rota := strings.CutPrefix(imp, mod)
			_, core := may[rel]
			first, _, _ := strings.Cut(imp, "/")
			if (rota && !core && !slices.Contains(shared, rel)) || (!rota && strings.Contains(first, ".")) {
				t.Errorf("%s imports %s; test support imports only the standard library and the core", support, imp)
			}
		}
	}
	examples, err := filepath.Glob("examples/*")
	if err != nil {
		t.Fatal(err)
	}
	dirs := []string{"cadence", "tenancy", "duework", "dispatch", "bridge", "maintenance", "inspect"}
	for _, ex := range examples {
		fi, err := os.Stat(ex)
		if err != nil || !fi.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(ex, "go.mod")); err == nil {
			continue // a nested module: its go.mod says what it may use
		}
		dirs = append(dirs, filepath.ToSlash(ex))
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
			case imp == mod+support:
				t.Errorf("%s imports %s, which is test support", dir, imp)
			case strings.HasPrefix(imp, mod):
				rel := strings.TrimPrefix(imp, mod)
				if allowed, core := may[dir]; core && !slices.Contains(allowed, rel) && !slices.Contains(shared, rel) {
					t.Errorf("%s imports %s; the layering allows it only %v", dir, imp, allowed)
				}
			case strings.Contains(first, "."):
				t.Errorf("%s imports %s at run time; runtime packages import only the standard library", dir, imp)
			}
		}
	}
	// The direction as the layering states it: bridge imports all four.
	pkg, err := build.ImportDir("bridge", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range may["bridge"] {
		if !slices.Contains(pkg.Imports, mod+want) {
			t.Errorf("bridge does not import %s; bridge imports all four", want)
		}
	}
}

// § duework, flow control: the zero Limits mean weight 1, no cap and no rate; Weight lies
// in [0, MaxWeight = 1,000], MaxInFlight and Burst in [0, MaxLimit], Every ≥ 0; anything
// else is ErrInvalid naming the field, and a Route with bad limits writes nothing.
func TestContractLimits(t *testing.T) {
	if duework.MaxWeight != 1000 {
		t.Errorf("MaxWeight = %d, want 1000", duework.MaxWeight)
	}
	var zero duework.Limits
	if err := zero.Validate(); err != nil {
		t.Errorf("the zero Limits: Validate = %v, want nil", err)
	}
	if w := zero.EffectiveWeight(); w != 1 {
		t.Errorf("the zero Limits: EffectiveWeight = %d, want 1", w)
	}
	valid := []duework.Limits{
		{Weight: duework.MaxWeight, MaxInFlight: duework.MaxLimit, Every: time.Hour, Burst: duework.MaxLimit},
		{Weight: 1, MaxInFlight: 1, Every: time.Nanosecond, Burst: 1},
	}
	for _, l := range valid {
		if err := l.Validate(); err != nil {
			t.Errorf("%+v: Validate = %v, want nil", l, err)
		}
	}
	if w := (duework.Limits{Weight: 7}).EffectiveWeight(); w != 7 {
		t.Errorf("Weight 7: EffectiveWeight = %d, want 7", w)
	}
	invalid := []struct {
		field string
		l     duework.Limits
	}{
		{"Weight", duework.Limits{Weight: -1}},
		{"Weight", duework.Limits{Weight: duework.MaxWeight + 1}},
		{"MaxInFlight", duework.Limits{MaxInFlight: -1}},
		{"MaxInFlight", duework.Limits{MaxInFlight: duework.MaxLimit + 1}},
		{"Every", duework.Limits{Every: -time.Nanosecond}},
		{"Burst", duework.Limits{Burst: -1}},
		{"Burst", duework.Limits{Burst: duework.MaxLimit + 1}},
	}
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	idx := duework.NewMemory()
	alice, err := tenancy.NewContext("alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.Schedule(ctx, alice, duework.Entry{UserID: "alice", WorkKey: "feed", Tier: "hot", DueAt: now}); err != nil {
		t.Fatal(err)
	}
	for _, c := range invalid {
		err := c.l.Validate()
		if !errors.Is(err, duework.ErrInvalid) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: Validate = %v, want ErrInvalid naming %s", c.l, err, c.field)
		}
		err = idx.Route(ctx, []duework.Route{{UserID: "alice", Group: "paid", Limits: c.l}})
		if !errors.Is(err, duework.ErrInvalid) {
			t.Errorf("Route with %+v: err = %v, want ErrInvalid", c.l, err)
		}
	}
	if st, err := idx.User(ctx, "alice", now); err != nil || st.Group != "" || st.Limits != (duework.Limits{}) {
		t.Errorf("after the refused Routes, User(alice) = %+v, %v; want the unrouted group and zero limits", st, err)
	}
}

// § dispatch and § bridge, the documented defaults: DefaultClaimMargin is 5 s (a zero
// Bridge.ClaimMargin); inspect keeps 60 reports when History is 0. And New refuses a
// positive PerUserBurst below PerUserLimit.
func TestContractDefaults(t *testing.T) {
	if bridge.DefaultClaimMargin != 5*time.Second {
		t.Errorf("DefaultClaimMargin = %v, want 5s", bridge.DefaultClaimMargin)
	}
	laneFor := func(context.Context, string) (dispatch.Lane, error) { return "free", nil }
	lanes := func(burst int) []dispatch.LaneCapacity {
		return []dispatch.LaneCapacity{{Lane: "free", PerUserLimit: 2, PerCycleLimit: 10, PerUserBurst: burst}}
	}
	for _, burst := range []int{0, 2, 5} {
		if _, err := dispatch.New(duework.NewMemory(), dispatch.Config{Lanes: lanes(burst), GlobalBatchLimit: 10, LaneFor: laneFor, ClaimFor: time.Minute}); err != nil {
			t.Errorf("PerUserBurst %d with PerUserLimit 2: New = %v, want it accepted", burst, err)
		}
	}
	_, err := dispatch.New(duework.NewMemory(), dispatch.Config{Lanes: lanes(1), GlobalBatchLimit: 10, LaneFor: laneFor, ClaimFor: time.Minute})
	if !errors.Is(err, dispatch.ErrInvalidConfig) || !strings.Contains(err.Error(), "PerUserBurst") {
		t.Errorf("PerUserBurst 1 below PerUserLimit 2: New = %v, want ErrInvalidConfig naming PerUserBurst", err)
	}
}

// § inspect: New refuses a nil Index, no Lanes, and Actions without a Dispatcher.
func TestContractInspectConfig(t *testing.T) {
	idx := duework.NewMemory()
	lanes := []dispatch.LaneCapacity{{Lane: "free", PerUserLimit: 1, PerCycleLimit: 10}}
	refused := map[string]inspect.Config{
		"a nil Index":                  {Lanes: lanes},
		"no Lanes":                     {Index: idx},
		"Actions without a Dispatcher": {Index: idx, Lanes: lanes, Actions: true},
	}
	for name, cfg := range refused {
		if _, err := inspect.New(cfg); !errors.Is(err, inspect.ErrInvalidConfig) {
			t.Errorf("inspect.New with %s: err = %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := inspect.New(inspect.Config{Index: idx, Lanes: lanes}); err != nil {
		t.Errorf("inspect.New with an Index and Lanes: %v", err)
	}
}

// § bridge, the wire form: JSON `{"v":1, "lane":…, "token":"…" (a string), "until":…,
// "entry":{…}}`, times RFC 3339 in UTC with nanoseconds and a zero time encoded as zero; a
// decoded item equals the encoded one field by field (times under time.Time.Equal);
// DecodeItem refuses, wrapping duework.ErrInvalid, an unknown v, unknown fields, trailing
// bytes and a zero Until. Code's choice: the entry's keys, which workers of another
// release read.
func TestContractWireForm(t *testing.T) {
	until := time.Date(2026, 3, 2, 9, 1, 0, 123456789, time.FixedZone("CET", 3600))
	item := dispatch.Item{Lane: "paid", Claim: duework.Claim{Token: 1<<63 + 5, Until: until,
		Entry: duework.Entry{UserID: "alice", WorkKey: "feed", Tier: "hot", DueAt: until.Add(-time.Minute), MissStreak: 3}}}
	b, err := bridge.EncodeItem(item)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatalf("EncodeItem wrote %s, not a JSON object: %v", b, err)
	}
	var keys []string
	for k := range top {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"entry", "lane", "token", "until", "v"}; !slices.Equal(keys, want) {
		t.Errorf("wire keys %v, want %v", keys, want)
	}
	checks := map[string]string{
		"v":     `1`,
		"lane":  `"paid"`,
		"token": `"9223372036854775813"`,
		"until": `"2026-03-02T08:01:00.123456789Z"`,
	}
	for k, want := range checks {
		if got := string(top[k]); got != want {
			t.Errorf("wire %q = %s, want %s", k, got, want)
		}
	}
	var entry map[string]json.RawMessage
	if err := json.Unmarshal(top["entry"], &entry); err != nil {
		t.Fatal(err)
	}
	if got := string(entry["last_run_at"]); got != "0" {
		t.Errorf(`wire entry "last_run_at" of a zero time = %s, want 0`, got)
	}
	var entryKeys []string
	for k := range entry {
		entryKeys = append(entryKeys, k)
	}
	slices.Sort(entryKeys)
	if want := []string{"due_at", "last_run_at", "miss_streak", "tier", "user_id", "work_key"}; !slices.Equal(entryKeys, want) {
		t.Errorf("wire entry keys %v, want %v", entryKeys, want)
	}
	got, err := bridge.DecodeItem(b)
	if err != nil {
		t.Fatalf("DecodeItem(%s): %v", b, err)
	}
	ge, we := got.Claim.Entry, item.Claim.Entry
	if got.Lane != item.Lane || got.Claim.Token != item.Claim.Token || !got.Claim.Until.Equal(item.Claim.Until) ||
		ge.UserID != we.UserID || ge.WorkKey != we.WorkKey || ge.Tier != we.Tier || !ge.DueAt.Equal(we.DueAt) ||
		!ge.LastRunAt.Equal(we.LastRunAt) || ge.MissStreak != we.MissStreak {
		t.Errorf("DecodeItem(EncodeItem(item)) = %+v, want %+v", got, item)
	}
	refused := map[string][]byte{
		"an unknown v":     bytes.Replace(b, []byte(`"v":1`), []byte(`"v":2`), 1),
		"an unknown field": bytes.Replace(b, []byte(`{"v":1`), []byte(`{"v":1,"extra":true`), 1),
		"trailing bytes":   append(slices.Clone(b), []byte(" {}")...),
		"a zero until":     bytes.Replace(b, top["until"], []byte("0"), 1),
	}
	for name, in := range refused {
		if _, err := bridge.DecodeItem(in); !errors.Is(err, duework.ErrInvalid) {
			t.Errorf("DecodeItem with %s (%s): err = %v, want ErrInvalid", name, in, err)
		}
	}
}
