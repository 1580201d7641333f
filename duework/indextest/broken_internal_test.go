package indextest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/tenancy"
)

// recorder is a tb that records failures instead of failing the test; Fatalf and Skipf
// end the goroutine like testing.T's do.
type recorder struct {
	mu      sync.Mutex
	msgs    []string
	skipped bool
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Skipf(string, ...any) {
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	runtime.Goexit()
}

// runRule runs one rule's check against x and returns its failure messages, and whether
// it skipped.
func runRule(r rule, x duework.Index) ([]string, bool) {
	rec := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.check(&suite{t: rec, x: x, rule: r.text})
	}()
	<-done
	return rec.msgs, rec.skipped
}

// broken wraps Memory and breaks one rule of the contract at the API level.
type broken struct {
	*duework.Memory
	noMore, noServed, limitPlusOne, leakyGet, ignoreTokens, vagueErrors, doubleClaims bool
	byUserID, noHolds, releaseAny, noNext, turnIsDue, allOrNothing                    bool
	// Limits it stores without a field (but reports as routed), and the other faults of
	// the flow-control and operator calls.
	noCap, noRate, noBurst, noWeight                                    bool
	unscaledPerUser, skipEntry, routeUntilBad, noneInFlight, userAlways bool
	// The faults of pauses and error streaks.
	noPause, pauseOverwrites, pauseKnownOnly, resumeNothing, pausedListsEnded bool
	claimIgnoresPause, dueBeforeSkipsPaused, dropErrorStreak                  bool

	mu     sync.Mutex
	holds  []time.Time               // every Now+Hold handed out, for releaseAny
	routed map[string]duework.Limits // the limits each Route asked for, as reported
}

func (b *broken) Route(ctx context.Context, routes []duework.Route) error {
	if b.routeUntilBad {
		for _, r := range routes {
			if err := b.Memory.Route(ctx, []duework.Route{r}); err != nil {
				return err
			}
		}
		return nil
	}
	stored := slices.Clone(routes)
	for i := range stored {
		l := &stored[i].Limits
		if b.noCap {
			l.MaxInFlight = 0
		}
		if b.noRate {
			l.Every = 0
		}
		if b.noBurst {
			l.Burst = 0
		}
		if b.noWeight {
			l.Weight = 0
		}
	}
	err := b.Memory.Route(ctx, stored)
	if err == nil {
		b.mu.Lock()
		if b.routed == nil {
			b.routed = map[string]duework.Limits{}
		}
		for _, r := range routes {
			b.routed[r.UserID] = r.Limits
		}
		b.mu.Unlock()
	}
	return err
}

// reported returns the limits to report for user: those its Route asked for.
func (b *broken) reported(user string, stored duework.Limits) duework.Limits {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l, ok := b.routed[user]; ok {
		return l
	}
	return stored
}

func (b *broken) User(ctx context.Context, userID string, now time.Time) (duework.UserState, error) {
	st, err := b.Memory.User(ctx, userID, now)
	if b.userAlways && errors.Is(err, duework.ErrNotFound) {
		return duework.UserState{}, nil
	}
	st.Limits = b.reported(userID, st.Limits)
	if b.noneInFlight {
		st.InFlight = 0
	}
	return st, err
}

func (b *broken) Entries(ctx context.Context, userID, after string, limit int) ([]duework.EntryState, error) {
	es, err := b.Memory.Entries(ctx, userID, after, limit)
	if b.skipEntry && len(es) > 1 {
		es = slices.Delete(es, 1, 2)
	}
	return es, err
}

func (b *broken) Pause(ctx context.Context, tc tenancy.Context, until time.Time, reason string) error {
	if b.noPause {
		return nil
	}
	if b.pauseKnownOnly {
		if _, err := b.Memory.User(ctx, tc.UserID(), until); errors.Is(err, duework.ErrNotFound) {
			return nil
		}
	}
	if b.pauseOverwrites {
		if err := b.Memory.Resume(ctx, tc); err != nil {
			return err
		}
	}
	return b.Memory.Pause(ctx, tc, until, reason)
}

func (b *broken) Resume(ctx context.Context, tc tenancy.Context) error {
	if b.resumeNothing {
		return nil
	}
	return b.Memory.Resume(ctx, tc)
}

func (b *broken) Paused(ctx context.Context, now time.Time, after string, limit int) ([]duework.UserPause, error) {
	if b.pausedListsEnded && vocab.ValidTime(now) {
		now = vocab.MinTime
	}
	return b.Memory.Paused(ctx, now, after, limit)
}

func (b *broken) Ready(ctx context.Context, q duework.ReadyQuery) (duework.ReadyPage, error) {
	if b.noHolds {
		q.Hold = 0
	}
	if b.releaseAny && q.Hold > 0 {
		b.mu.Lock()
		b.holds = append(b.holds, q.Now.Add(q.Hold))
		b.mu.Unlock()
	}
	p, err := b.Memory.Ready(ctx, q)
	for i := range p.Heads {
		h := &p.Heads[i]
		if b.noMore {
			h.More = false
		}
		if b.noServed {
			h.LastServed = time.Time{}
		}
		if b.turnIsDue {
			h.Turn = h.Due[0].DueAt
		}
		h.Limits = b.reported(h.UserID, h.Limits)
		if b.noneInFlight {
			h.InFlight = 0
		}
		if b.unscaledPerUser && len(h.Due) > q.PerUser {
			h.Due, h.More = h.Due[:q.PerUser], true
		}
	}
	if b.byUserID {
		slices.SortFunc(p.Heads, func(x, y duework.Head) int { return cmp.Compare(x.UserID, y.UserID) })
	}
	if b.noNext {
		p.Next = time.Time{}
	}
	return p, err
}

func (b *broken) Release(ctx context.Context, userIDs []string, heldUntil time.Time) error {
	if !b.releaseAny {
		return b.Memory.Release(ctx, userIDs, heldUntil)
	}
	b.mu.Lock()
	holds := slices.Clone(b.holds)
	b.mu.Unlock()
	for _, h := range append(holds, heldUntil) {
		if err := b.Memory.Release(ctx, userIDs, h); err != nil {
			return err
		}
	}
	return nil
}

func (b *broken) DueBefore(ctx context.Context, now time.Time, limit int) ([]duework.Entry, error) {
	if b.vagueErrors && limit < 1 {
		return nil, fmt.Errorf("bad: %w", duework.ErrInvalid)
	}
	if b.limitPlusOne {
		limit++
	}
	es, err := b.Memory.DueBefore(ctx, now, limit)
	if b.dueBeforeSkipsPaused {
		es = slices.DeleteFunc(es, func(e duework.Entry) bool {
			st, err := b.Memory.User(ctx, e.UserID, now)
			return err == nil && !st.PausedUntil.IsZero()
		})
	}
	return es, err
}

func (b *broken) Get(ctx context.Context, tc tenancy.Context, workKey string) (duework.Entry, error) {
	e, err := b.Memory.Get(ctx, tc, workKey)
	if b.dropErrorStreak {
		e.ErrorStreak = 0
	}
	if b.leakyGet && errors.Is(err, duework.ErrNotFound) {
		alice, _ := tenancy.NewContext("alice")
		return b.Memory.Get(ctx, alice, workKey)
	}
	return e, err
}

func (b *broken) Complete(ctx context.Context, tc tenancy.Context, c duework.Claim, next duework.Entry) error {
	err := b.Memory.Complete(ctx, tc, c, next)
	if b.ignoreTokens && errors.Is(err, duework.ErrClaimLost) {
		return b.Memory.Schedule(ctx, tc, next)
	}
	return err
}

// CompleteMany, all or nothing: when any item would fail, it writes none of them.
func (b *broken) CompleteMany(ctx context.Context, done []duework.Done) ([]error, error) {
	if b.allOrNothing {
		seen := map[duework.Key]bool{}
		for _, d := range done {
			k := d.Claim.Entry.Key()
			if d.Validate() != nil || seen[k] || !b.current(ctx, d.Tenant, d.Claim) {
				errs := make([]error, len(done))
				for i := range errs {
					errs[i] = duework.ErrClaimLost
				}
				return errs, nil
			}
			seen[k] = true
		}
	}
	return b.Memory.CompleteMany(ctx, done)
}

// current reports whether c is the current claim of tc's entry, by StartClaims, which
// Complete does not mind.
func (b *broken) current(ctx context.Context, tc tenancy.Context, c duework.Claim) bool {
	errs, err := b.Memory.StartClaims(ctx, []duework.Unclaim{{Tenant: tc, Claim: c}})
	return err == nil && (errs[0] == nil || errors.Is(errs[0], duework.ErrClaimStarted))
}

func (b *broken) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	if b.claimIgnoresPause {
		// Lift the pauses of the users named, claim, and put them back.
		for _, k := range keys {
			st, err := b.Memory.User(ctx, k.UserID, now)
			if err != nil || st.PausedUntil.IsZero() {
				continue
			}
			tc, _ := tenancy.NewContext(k.UserID)
			_ = b.Memory.Resume(ctx, tc)
			defer b.Memory.Pause(ctx, tc, st.PausedUntil, st.PauseReason)
		}
	}
	cs, err := b.Memory.Claim(ctx, keys, now, until)
	if b.doubleClaims {
		cs = append(cs, cs...)
	}
	return cs, err
}

// brokenModel wraps the Model and breaks one rule of flow control or of claims in the
// state it keeps.
type brokenModel struct {
	*Model
	refundRate, strideToNow, passIsLastServed    bool
	startUnmarked, startAnyUntil, unclaimNothing bool
}

func (b *brokenModel) StartClaims(ctx context.Context, claims []duework.Unclaim) ([]error, error) {
	switch {
	case b.startUnmarked: // nil for each current claim, and nothing marked
		return b.eachClaim(ctx, "StartClaims", claims, func(r *modelRow, c duework.Claim) error {
			if !r.until.Equal(c.Until) {
				return duework.ErrClaimLost
			}
			return nil
		})
	case b.startAnyUntil:
		return b.eachClaim(ctx, "StartClaims", claims, func(r *modelRow, _ duework.Claim) error {
			if r.started {
				return duework.ErrClaimStarted
			}
			r.started = true
			return nil
		})
	}
	return b.Model.StartClaims(ctx, claims)
}

func (b *brokenModel) Unclaim(ctx context.Context, claims []duework.Unclaim) ([]error, error) {
	if b.unclaimNothing { // nil for each current claim, and nothing handed back
		return b.eachClaim(ctx, "Unclaim", claims, func(*modelRow, duework.Claim) error { return nil })
	}
	errs, err := b.Model.Unclaim(ctx, claims)
	if b.refundRate && err == nil {
		b.mu.Lock()
		for i, e := range errs {
			if u := b.users[claims[i].Claim.Entry.UserID]; e == nil && u.limits.Every > 0 {
				u.mark = u.mark.Add(-u.limits.Every)
			}
		}
		b.mu.Unlock()
	}
	return errs, err
}

func (b *brokenModel) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	cs, err := b.Model.Claim(ctx, keys, now, until)
	if b.strideToNow {
		b.mu.Lock()
		for _, c := range cs {
			u := b.users[c.Entry.UserID]
			u.pass = laterOf(u.pass, now)
		}
		b.mu.Unlock()
	}
	return cs, err
}

func (b *brokenModel) Route(ctx context.Context, routes []duework.Route) error {
	err := b.Model.Route(ctx, routes)
	if b.passIsLastServed && err == nil {
		b.mu.Lock()
		for _, r := range routes {
			if u := b.users[r.UserID]; u != nil && r.Limits.EffectiveWeight() == 1 {
				u.pass = u.lastServed
			}
		}
		b.mu.Unlock()
	}
	return err
}

// brokenCases are the broken indexes and the rules each must fail.
var brokenCases = []struct {
	name  string
	index func() duework.Index
	rules []string
}{
	{"More never set", mem(func(b *broken) { b.noMore = true }), []string{"ReadyPerUser"}},
	{"LastServed dropped", mem(func(b *broken) { b.noServed = true }), []string{"LastServed", "TurnIsLaterOfReadyAtAndLastServed"}},
	{"one entry too many", mem(func(b *broken) { b.limitPlusOne = true }), []string{"DueBeforeLimit"}},
	{"Get leaks alice's entries", mem(func(b *broken) { b.leakyGet = true }), []string{"IsolationGet"}},
	{"stale claims complete", mem(func(b *broken) { b.ignoreTokens = true }), []string{"CompleteStale", "CompleteForged", "Complete", "ScheduleEndsClaim", "UnscheduleClaimed",
		"ClaimGuard"}},
	{"errors without the field", mem(func(b *broken) { b.vagueErrors = true }), []string{"BadArguments"}},
	{"each claim handed out twice", mem(func(b *broken) { b.doubleClaims = true }), []string{"ClaimSkips", "ParallelClaimers", "InvalidKeysSkipped"}},
	{"turn order ignored", mem(func(b *broken) { b.byUserID = true }), []string{"TurnOrder", "ServedGoesToTheBack", "ReadyUsers"}},
	{"Turn reported as the first DueAt", mem(func(b *broken) { b.turnIsDue = true }), []string{"TurnIsLaterOfReadyAtAndLastServed", "ReadyAtWithClaims"}},
	{"holds ignored", mem(func(b *broken) { b.noHolds = true }), []string{"HoldHides", "ReleaseEndsHold", "ClaimEndsHold", "ParallelReaders", "ReadyNext"}},
	{"Release ends any hold", mem(func(b *broken) { b.releaseAny = true }), []string{"ReleaseEndsHold"}},
	{"Next never set", mem(func(b *broken) { b.noNext = true }), []string{"ReadyNext"}},
	{"CompleteMany all or nothing", mem(func(b *broken) { b.allOrNothing = true }), []string{"CompleteMany", "CompleteManyRetry"}},
	{"MaxInFlight ignored", mem(func(b *broken) { b.noCap = true }), []string{"MaxInFlight", "CappedNotReady", "CompleteFreesSlot", "ClaimEndFreesSlot",
		"UnclaimFreesSlot", "ClaimLimitsInKeyOrder", "HeadLimits", "ParallelLimits"}},
	{"the rate ignored", mem(func(b *broken) { b.noRate = true }), []string{"RateLimit", "RateWindow", "RateWorkConserving", "UnclaimRefundsNoRate", "ParallelLimits"}},
	{"Burst ignored", mem(func(b *broken) { b.noBurst = true }), []string{"RateLimit", "RateWindow", "RateWorkConserving", "ParallelLimits"}},
	{"Weight ignored", mem(func(b *broken) { b.noWeight = true }), []string{"WeightStride", "WeightScalesPerUser", "UnclaimKeepsPlace", "RouteKeepsPlace", "LimitBounds"}},
	{"PerUser not scaled by Weight", mem(func(b *broken) { b.unscaledPerUser = true }), []string{"WeightScalesPerUser"}},
	{"Entries skips a key", mem(func(b *broken) { b.skipEntry = true }), []string{"EntriesPaging", "OperatorReadsEscaping"}},
	{"Unclaim hands back nothing", model(brokenModel{unclaimNothing: true}), []string{"Unclaim", "UnclaimFreesSlot"}},
	{"Route writes the routes before a bad one", mem(func(b *broken) { b.routeUntilBad = true }), []string{"BadLimits"}},
	{"InFlight never reported", mem(func(b *broken) { b.noneInFlight = true }), []string{"HeadLimits", "UserState", "MaxInFlight", "ClaimEndFreesSlot"}},
	{"User finds every user", mem(func(b *broken) { b.userAlways = true }), []string{"UserNotFound"}},
	{"StartClaims marks nothing", model(brokenModel{startUnmarked: true}), []string{"StartClaims", "StartedPerClaim", "StartClaimsRetry",
		"StartedTakesCompletion", "ParallelStarters"}},
	{"StartClaims takes any Until", model(brokenModel{startAnyUntil: true}), []string{"StartClaims", "ClaimGuard"}},
	{"Pause ignored", mem(func(b *broken) { b.noPause = true }), []string{"PauseHolds", "PauseLaterOf", "PauseStoresUser", "Resume",
		"PauseCountsUntilServed", "PausedPaging", "ParallelPauses", "Bounds"}},
	{"Pause shortens a longer pause", mem(func(b *broken) { b.pauseOverwrites = true }), []string{"PauseLaterOf"}},
	{"Pause of an unknown user ignored", mem(func(b *broken) { b.pauseKnownOnly = true }), []string{"PauseStoresUser", "PausedPaging"}},
	{"Resume ignored", mem(func(b *broken) { b.resumeNothing = true }), []string{"Resume"}},
	{"Paused lists ended pauses", mem(func(b *broken) { b.pausedListsEnded = true }), []string{"PausedPaging", "PauseCountsUntilServed", "Bounds"}},
	{"Claim ignores pauses", mem(func(b *broken) { b.claimIgnoresPause = true }), []string{"PauseHolds", "ParallelPauses"}},
	{"DueBefore skips paused users", mem(func(b *broken) { b.dueBeforeSkipsPaused = true }), []string{"DueBeforeIgnoresPauses"}},
	{"ErrorStreak dropped", mem(func(b *broken) { b.dropErrorStreak = true }), []string{"ErrorStreakRoundTrip", "GetReturnsScheduled", "Bounds"}},
	{"Unclaim refunds the rate", model(brokenModel{refundRate: true}), []string{"UnclaimRefundsNoRate"}},
	{"a weighted user's pass goes to now", model(brokenModel{strideToNow: true}), []string{"WeightStride", "UnclaimKeepsPlace", "RouteKeepsPlace"}},
	{"routing to weight 1 sets the pass to LastServed", model(brokenModel{passIsLastServed: true}), []string{"RouteKeepsPlace"}},
}

// mem returns a factory of broken Memories with the faults set sets.
func mem(set func(b *broken)) func() duework.Index {
	return func() duework.Index {
		b := &broken{Memory: duework.NewMemory()}
		set(b)
		return b
	}
}

// model returns a factory of broken Models with b's faults.
func model(b brokenModel) func() duework.Index {
	return func() duework.Index {
		x := b
		x.Model = NewModel()
		return &x
	}
}

// TestSuiteCatchesBrokenIndexes checks that the suite fails an index that breaks a rule, and
// that the failure cites that rule — and that it passes Memory on every rule.
func TestSuiteCatchesBrokenIndexes(t *testing.T) {
	byName := map[string]rule{}
	for _, r := range rules {
		byName[r.name] = r
	}
	for name, r := range byName {
		if msgs, skipped := runRule(r, duework.NewMemory()); len(msgs) > 0 || skipped {
			t.Errorf("%s fails on Memory (skipped %v): %s", name, skipped, strings.Join(msgs, "\n"))
		}
	}
	for _, c := range brokenCases {
		for _, name := range c.rules {
			r, ok := byName[name]
			if !ok {
				t.Fatalf("no rule %s", name)
			}
			msgs, _ := runRule(r, c.index())
			if len(msgs) == 0 {
				t.Errorf("%s: rule %s passed an index whose %s", name, name, c.name)
				continue
			}
			if cite := fmt.Sprintf("rule %q broken", r.text); !strings.Contains(msgs[0], cite) {
				t.Errorf("%s: the failure %q does not cite the rule", name, msgs[0])
			}
		}
	}
}

func TestRulesHaveUniqueNames(t *testing.T) {
	seen := map[string]bool{}
	for _, line := range Rules() {
		name, text, ok := strings.Cut(line, ": ")
		if !ok || name == "" || text == "" || seen[name] {
			t.Errorf("bad or repeated rule line %q", line)
		}
		seen[name] = true
	}
}
