package indextest

import (
	"errors"
	"slices"
	"time"

	"github.com/rotaworks/rota/duework"
)

// rule is one subtest of Run: a named rule of the contract and its check.
type rule struct {
	name  string
	text  string
	check func(s *suite)
}

var rules = []rule{
	// Tenant-scoped writes and reads.
	{"GetReturnsScheduled", "Get returns the entry Schedule stored, every field", getReturnsScheduled},
	{"ScheduleReplaces", "Schedule inserts or replaces the tenant's entry", scheduleReplaces},
	{"GetAbsent", "Get of an absent entry is ErrNotFound", getAbsent},
	{"Unschedule", "Unschedule removes the entry; an absent entry is not an error", unschedule},
	{"ScheduleMissing", "ScheduleMissing inserts the entries the tenant does not have (the first of a repeated WorkKey), leaves the others as they are, claims included, and counts what it inserted", scheduleMissing},

	// DueBefore.
	{"DueBeforeOrder", "DueBefore returns the visible entries in (DueAt, UserID, WorkKey) order", dueBeforeOrder},
	{"DueBeforeLimit", "DueBefore returns at most limit entries: the first ones in order", dueBeforeLimit},

	// Turns.
	{"TurnOrder", "Ready returns the group's ready users in (Turn, UserID) order, user IDs compared bytewise, and none whose Turn is after Now", turnOrder},
	{"TurnIsLaterOfReadyAtAndLastServed", "a user's Turn is max(ReadyAt, LastServed), ReadyAt the earliest instant at which one of its entries is visible", turnIsMax},
	{"ReadyAtWithClaims", "a claimed entry counts for ReadyAt from max(DueAt, Until): a user whose visible entries are all claimed is ready again when the first claim ends", readyAtWithClaims},
	{"ServedGoesToTheBack", "a Claim that claims a user's entry sends the user behind every user whose Turn is earlier than the Claim's now", servedGoesBack},
	{"LastServed", "LastServed is the later of its last value and the now of each Claim that claimed any of the user's entries, zero if never", lastServed},
	{"ReadyUsers", "Ready returns at most Users heads: the first ready, unheld users in turn order", readyUsers},
	{"ReadyPerUser", "each Head holds the user's first PerUser visible entries in (DueAt, WorkKey) order, and More exactly when it has further visible ones", readyPerUser},
	{"ReadyNext", "ReadyPage.Next is the Turn of the first ready, unheld user of the group that the read left unread, zero if none", readyNext},

	// Holds.
	{"HoldHides", "Ready with a Hold holds the users it returns until Now+Hold: a Ready whose Now is before that skips them", holdHides},
	{"HoldZero", "Ready with Hold 0 holds nothing and ends no hold", holdZero},
	{"ClaimEndsHold", "Claim ends the hold of each user it claims an entry for, and of no other", claimEndsHold},
	{"ReleaseEndsHold", "Release ends the holds of the named users that end exactly at heldUntil, and no other; Turns stay as they were", releaseEndsHold},

	// Groups.
	{"Route", "Route moves each named user to its group, keeping its Turn and hold; users the index does not store are ignored", route},
	{"Groups", "Groups lists, sorted bytewise, the groups that hold a user ready at now", groups},
	{"UserOutlivesItsEntries", "a user's group, LastServed and hold survive the removal of its last entry", userOutlivesEntries},

	// Isolation.
	{"IsolationGet", "Get never sees another tenant's entry: it is ErrNotFound", isolationGet},
	{"IsolationSchedule", "Schedule writes only the caller's entries", isolationSchedule},
	{"IsolationUnschedule", "Unschedule removes only the caller's entries", isolationUnschedule},
	{"IsolationComplete", "Complete of another tenant's claim fails and changes nothing", isolationComplete},

	// Claims.
	{"ClaimOrder", "Claim returns the claims in the order of keys, each with the stored entry and Until", claimOrder},
	{"ClaimSkips", "Claim skips keys that are absent, not yet due, claimed, or given twice", claimSkips},
	{"ClaimHides", "a claimed entry is invisible to DueBefore, Ready and Claim while Until > now", claimHides},
	{"ClaimExpires", "a claim ends at Until: from now >= Until the entry is visible again, without anyone touching it", claimExpires},
	{"ClaimFollowsNow", "visibility depends only on the now of each read: a claim is in force at any now < Until, even after a read at a later now", claimFollowsNow},
	{"FreshTokens", "each claim gets a token no earlier claim of that entry had", freshTokens},
	{"Complete", "Complete writes next and ends the claim; completing it again is ErrClaimLost", completeWrites},
	{"CompleteStale", "Complete with a claim that a later claim replaced is ErrClaimLost and changes nothing", completeStale},
	{"CompletePastUntil", "Complete succeeds past Until as long as no later claim replaced the claim", completePastUntil},
	{"CompleteForged", "Complete with a claim the entry never had is ErrClaimLost and changes nothing", completeForged},
	{"ScheduleEndsClaim", "Schedule of a claimed entry replaces it and ends the claim: the claimant's Complete is ErrClaimLost", scheduleEndsClaim},
	{"UnscheduleClaimed", "Unschedule removes a claimed entry; the claimant's Complete is ErrClaimLost and does not bring it back", unscheduleClaimed},
	{"GetClaimed", "Get returns an entry whether or not it is claimed", getClaimed},
	{"ClaimGuard", "StartClaims, UnscheduleClaimed and Unclaim act only while the claim is the entry's current one (StartClaims: with the claim's own Until too), else ErrClaimLost and nothing changes: a claim with a made-up token, of another entry, replaced, completed or unscheduled is not current, and another tenant's Context never passes", claimGuard},
	{"ErrorStreakRoundTrip", "ErrorStreak is stored by every write that takes an Entry and returned by every read of one: Get, Claim, Ready, DueBefore and Entries", errorStreakRoundTrip},

	// Batched completion and hand-backs.
	{"CompleteMany", "CompleteMany gives each item its own outcome, applied one after another: good items are written, lost, repeated and invalid ones are not", completeMany},
	{"CompleteManyRetry", "a CompleteMany retried after a write reports each item already written as ErrClaimLost and writes nothing twice", completeManyRetry},
	{"Unclaim", "Unclaim ends each claim that is still current and leaves its entry exactly as it is, visible at once; a claim no longer current (handed back, replaced, completed, never made) is ErrClaimLost and a bad item ErrInvalid or tenancy.ErrNoTenant, each item with its own outcome, applied one after another", unclaim},
	{"UnclaimFreesSlot", "Unclaim frees the in-flight slot at once: a user at its MaxInFlight is ready again, and claimable, at the same now", unclaimFreesSlot},
	{"UnclaimRefundsNoRate", "Unclaim refunds no rate allowance: the items handed back still count against Every and Burst", unclaimRefundsNoRate},
	{"UnclaimKeepsPlace", "Unclaim keeps LastServed and the stride position: the user's Turn moves only as its ReadyAt does", unclaimKeepsPlace},

	// Claims that start once.
	{"StartClaims", "StartClaims marks started each claim that is current, with the claim's own Until, and not started (nil), gives a started one ErrClaimStarted (also the second time one call names it), one not current ErrClaimLost and a bad item ErrInvalid or tenancy.ErrNoTenant, one outcome per item in order, and writes nothing else", startClaims},
	{"StartedPerClaim", "started is a property of the claim: past its Until it stays started until replaced, a later Claim of the entry starts unstarted, and Schedule or Unschedule ends it (ErrClaimLost)", startedPerClaim},
	{"StartClaimsRetry", "a StartClaims retried after some items were started reports those as ErrClaimStarted and starts the rest: never a second nil for one claim", startClaimsRetry},
	{"StartedTakesCompletion", "Unclaim of a started claim is ErrClaimStarted and writes nothing; Complete, CompleteMany and UnscheduleClaimed take a started claim as any other", startedTakesCompletion},
	{"ParallelStarters", "concurrent StartClaims of one claim, and of many claims in overlapping batches, start each claim exactly once: one nil, every other outcome ErrClaimStarted", parallelStarters},
	{"LocalStarts", "a claim made under a localstart.Set is started once: by the Set's holder alone where the index takes part (it puts the claims in the Set, and every other StartClaims and Unclaim finds them started), by anyone where it does not; under the Set the holder hands back a claim it has not started, not one it has, and completes any, after which it is lost; where the index takes part the claim counts as started from its Claim, so the holder starts it after the host rescheduled its entry", localStarts},
	{"LocalStartsEnded", "a claim of a Set started after its Until by the Set's clock is started if still current and ErrClaimLost once replaced; a lost Set leaves its claims to end by time", localStartsEnded},
	{"ParallelLocalStarters", "concurrent StartClaims of one claim of a Set, with and without the Set, start it exactly once; with concurrent Unclaims too, exactly one call wins: a start, or a hand-back after which the entry is visible", parallelLocalStarters},

	// Pauses.
	{"PauseHolds", "a user paused at now is not ready, not read, its group not listed for it alone, and Claim at now skips its keys, whoever claims; claims made before run on; at PausedUntil it joins the back of its queue, its Turn PausedUntil, and is claimed again", pauseHolds},
	{"PauseLaterOf", "Pause stores the later of the stored pause and until, with the later's reason (the new one on a tie)", pauseLaterOf},
	{"PauseStoresUser", "Pause of a user the index does not store stores it, in the unrouted group with zero limits, so entries scheduled later wait too", pauseStoresUser},
	{"Resume", "Resume ends the pause at once, the Turn recomputed without it; Resume of a user not paused or not stored is nil and writes nothing", resume},
	{"PauseCountsUntilServed", "User reports a pause only while it is after now and after LastServed: a Pause with an until not after LastServed changes nothing, an ended pause is not reported, and once the user is served after it ends it is not reported at any now", pauseCountsUntilServed},
	{"PausedPaging", "Paused returns the users paused at now (PausedUntil after now), in UserID order bytewise after after, at most limit, each with its reason and until: paging by the last UserID returned reads each once", pausedPaging},
	{"DueBeforeIgnoresPauses", "DueBefore returns a paused user's visible entries as anyone's", dueBeforeIgnoresPauses},
	{"ParallelPauses", "dispatchers and claimers at once never claim an entry of a user whose Pause returned before their Claim began, and claim every entry of the users never paused", parallelPauses},

	// Operator reads.
	{"UserNotFound", "User of a user the index does not store (never scheduled, only routed, only named in a Claim) is ErrNotFound", userNotFound},
	{"UserState", "User reports the user's group, limits and LastServed, its Turn (zero without entries), HeldUntil only while the hold ends after now, and its in-flight count at now", userState},
	{"EntriesPaging", "Entries returns the user's entries whose WorkKey sorts bytewise after after, at most limit, in WorkKey order, each whole with its current claim's Until (ended or not; zero without one): paging by the last WorkKey returned reads each entry once", entriesPaging},
	{"EntriesUnknownUser", "Entries of a user the index does not store, or with no entries left, returns none and no error", entriesUnknownUser},
	{"OperatorReadsEscaping", "User and Entries address tenant IDs and work keys that need escaping (a/b, %, <script>, quotes, Unicode) exactly, and only that tenant", operatorEscaping},

	// Flow control.
	{"MaxInFlight", "no Claim, at any now (stale ones included), leaves a user's in-flight count at its now above MaxInFlight: each user's keys beyond its free slots are skipped in the order of keys and those within claimed, and User's InFlight counts the current claims whose Until is after now", maxInFlight},
	{"CappedNotReady", "a user with MaxInFlight claims current is not ready, nor its group listed, before the MaxInFlight-th latest Until among them; then Ready cuts its Due to its free slots and sets More", cappedNotReady},
	{"CompleteFreesSlot", "Complete frees the in-flight slot at once: a user at its MaxInFlight is ready again at the same now", completeFreesSlot},
	{"ClaimEndFreesSlot", "a claim frees its slot at its Until with no call in between: the user's in-flight count drops and it is ready, though the claim is still current", claimEndFreesSlot},
	{"ClaimLimitsInKeyOrder", "Claim applies each user's limits to its keys in the order given: the first it allows are claimed, the rest skipped, other users' keys untouched; a Claim that takes nothing of a user leaves its LastServed", claimLimitsKeyOrder},
	{"HeadLimits", "each Head carries the user's stored Limits and its in-flight count at Now", headLimits},
	{"RateLimit", "with Every E and b = max(Burst, 1) a user is claimed at most b items at a now not before its mark, else max(0, b − ceil((mark − now)/E)), and a call that claims k moves the mark to max(mark, now) + k·E; it is not ready before mark − (b−1)·E, and Ready cuts its Due to the allowance", rateLimit},
	{"RateWindow", "for any claims, completions and hand-backs at any nows, a user with Every E is claimed at most b + floor(T/E) items in any window [t, t+T], b = max(Burst, 1), and each Claim takes exactly what the allowance lets it", rateWindow},
	{"RateWorkConserving", "a user that always has work and is claimed whenever it is ready gets exactly b + floor(T/E) items in [t, t+T] from a full allowance at t", rateWorkConserving},
	{"WeightStride", "a Claim of k of a weighted user's entries moves its pass to max(pass, T + floor(L·k/w) µs), T its Turn before the call and L = now − T in whole microseconds, or to max(pass, now) when k ≥ w or T is not before now; its Turn is max(ReadyAt, pass)", weightStride},
	{"WeightStrideFloor", "a weighted user's stride starts no earlier than now − 3·w·(now − LastServed) when it was served before, so one whose Turn fell far behind does not take serve after serve while it catches up", weightStrideFloor},
	{"WeightScalesPerUser", "Ready returns up to PerUser × Weight Due entries of a user, and More when it has more visible", weightScalesPerUser},
	{"WeightOneIsNoLimit", "with every weight 1 and no MaxInFlight or Every, every read and claim is as with zero Limits", weightOne},
	{"RouteKeepsPlace", "Route keeps a user's hold, LastServed, stride position and rate mark: its Turn changes only as the new limits change its ReadyAt", routeKeepsPlace},
	{"BadLimits", "Route with a Weight outside [0, MaxWeight], a MaxInFlight or Burst outside [0, MaxLimit] or a negative Every is ErrInvalid naming the field, and writes none of its routes", badLimits},
	{"LimitBounds", "the largest limits are accepted and nothing overflows: Weight MaxWeight, MaxInFlight and Burst MaxLimit, the largest Every, a stride across 10,000 years, a rate mark that saturates at the end of year 9999", limitBounds},

	// Bad input.
	{"BadEntries", "an invalid Entry is ErrInvalid naming the field (tenancy.ErrNoTenant for the zero Context) wherever an Entry is taken, and changes nothing", badEntries},
	{"BadArguments", "a bad argument (time, limit, Hold, group name, work key, user ID) is ErrInvalid naming it, and changes nothing", badArguments},
	{"InvalidKeysSkipped", "Claim skips keys with invalid IDs and claims the rest", invalidKeysSkipped},
	{"Bounds", "the bounds themselves are accepted: limits of MaxLimit, times at the start of year 1 and the end of year 9999 (to the microsecond)", bounds},

	// Concurrency.
	{"ParallelReaders", "concurrent Ready calls with a Hold at the same Now never return the same user", parallelReaders},
	{"ParallelClaimers", "concurrent Claims hand out each entry at most once per claim window", parallelClaimers},
	{"ParallelLimits", "concurrent dispatchers, claimers and a stale claimer never take a user past MaxInFlight or its rate allowance, and together claim exactly what its limits allow", parallelLimits},
}

func getReturnsScheduled(s *suite) {
	e := duework.Entry{
		UserID: "alice", WorkKey: "feed-1", Tier: "hot",
		DueAt: at(30).Add(123456 * time.Microsecond), LastRunAt: at(-600).Add(7 * time.Microsecond), MissStreak: 3, ErrorStreak: 2,
	}
	fresh := duework.Entry{UserID: "alice", WorkKey: "feed-2", DueAt: at(5)}
	s.schedule(e, fresh)
	s.wantEntry("alice", "feed-1", e)
	s.wantEntry("alice", "feed-2", fresh)
	if got, err := s.get("alice", "feed-2"); err == nil && !got.LastRunAt.IsZero() {
		s.errorf("a zero LastRunAt came back as %v", got.LastRunAt)
	}
	// A time in another zone is the same instant.
	z := entry("alice", "feed-3", 0)
	z.DueAt = z.DueAt.In(time.FixedZone("east", 5*3600))
	s.schedule(z)
	s.wantEntry("alice", "feed-3", z)
}

func scheduleReplaces(s *suite) {
	s.schedule(entry("alice", "a", 10))
	next := duework.Entry{UserID: "alice", WorkKey: "a", Tier: "cold", DueAt: at(-10), LastRunAt: at(-20), MissStreak: 2}
	s.schedule(next)
	s.wantEntry("alice", "a", next)
	s.wantDue(at(0), key("alice", "a"))
	s.wantDue(at(100), key("alice", "a"))
}

func getAbsent(s *suite) {
	s.wantAbsent("alice", "nothing")
	s.schedule(entry("alice", "a", 0))
	s.wantAbsent("alice", "b")
}

func unschedule(s *suite) {
	s.schedule(entry("alice", "a", 0), entry("alice", "b", 0))
	if err := s.x.Unschedule(bg, tenant(s.t, "alice"), "a"); err != nil {
		s.fatalf("Unschedule: %v", err)
	}
	s.wantAbsent("alice", "a")
	s.wantDue(at(0), key("alice", "b"))
	for _, k := range []string{"a", "never-there"} {
		if err := s.x.Unschedule(bg, tenant(s.t, "alice"), k); err != nil {
			s.errorf("Unschedule of absent %q: %v, want nil", k, err)
		}
	}
	if err := s.x.Unschedule(bg, tenant(s.t, "nobody"), "b"); err != nil {
		s.errorf("Unschedule for a user with no entries: %v, want nil", err)
	}
	s.wantEntry("alice", "b", entry("alice", "b", 0))
}

func dueBeforeOrder(s *suite) {
	s.schedule(
		entry("bob", "x", 0), entry("alice", "y", 0), entry("alice", "x", 0), // ties on DueAt
		entry("carol", "a", -5), entry("bob", "b", -5),
		entry("alice", "late", 1), // after now
		entry("dave", "z", -1),
	)
	s.schedule(duework.Entry{UserID: "dave", WorkKey: "micro", DueAt: at(0).Add(-time.Microsecond)})
	s.wantDue(at(0),
		key("bob", "b"), key("carol", "a"), key("dave", "z"), key("dave", "micro"),
		key("alice", "x"), key("alice", "y"), key("bob", "x"))
	s.wantDue(at(-5), key("bob", "b"), key("carol", "a"))
	s.wantDue(at(-6))
	got := s.dueBefore(at(0), 1000)
	want := []duework.Entry{entry("bob", "b", -5)}
	if len(got) == 0 || !sameEntry(got[0], want[0]) {
		s.errorf("DueBefore's first entry is %s, want %s", showAll(got[:min(1, len(got))]), show(want[0]))
	}
	s.wantDue(at(1),
		key("bob", "b"), key("carol", "a"), key("dave", "z"), key("dave", "micro"),
		key("alice", "x"), key("alice", "y"), key("bob", "x"), key("alice", "late"))

	// Ties on DueAt break by UserID before WorkKey, however the users' first work keys
	// sort: gus's "b" comes before hal's and ida's "a".
	s.schedule(entry("hal", "a", 2), entry("ida", "a", 2), entry("gus", "b", 2))
	s.wantDue(at(2),
		key("bob", "b"), key("carol", "a"), key("dave", "z"), key("dave", "micro"),
		key("alice", "x"), key("alice", "y"), key("bob", "x"), key("alice", "late"),
		key("gus", "b"), key("hal", "a"), key("ida", "a"))
}

func dueBeforeLimit(s *suite) {
	var all []duework.Key
	for i, u := range []string{"u1", "u2", "u3"} {
		for j, k := range []string{"a", "b", "c"} {
			s.schedule(entry(u, k, -10+j*3+i))
		}
	}
	for j := range 3 {
		for _, u := range []string{"u1", "u2", "u3"} {
			all = append(all, key(u, []string{"a", "b", "c"}[j]))
		}
	}
	for limit := 1; limit <= len(all)+2; limit++ {
		got := keysOf(s.dueBefore(at(0), limit))
		want := all[:min(limit, len(all))]
		if !slices.Equal(got, want) {
			s.errorf("DueBefore(now, %d) = %v, want %v", limit, got, want)
		}
	}
}

func isolationGet(s *suite) {
	s.schedule(entry("alice", "secret", 0))
	s.wantAbsent("mallory", "secret")
	s.wantEntry("alice", "secret", entry("alice", "secret", 0))
}

func isolationSchedule(s *suite) {
	a := entry("alice", "feed", 0)
	s.schedule(a)
	m := entry("mallory", "feed", 5)
	m.Tier = "hot"
	s.schedule(m)
	s.wantEntry("alice", "feed", a)
	s.wantEntry("mallory", "feed", m)
	s.wantDue(at(5), key("alice", "feed"), key("mallory", "feed"))
	// An entry naming alice, under mallory's Context, is refused.
	forged := entry("alice", "feed", 99)
	if err := s.x.Schedule(bg, tenant(s.t, "mallory"), forged); !errors.Is(err, duework.ErrInvalid) {
		s.errorf("Schedule of alice's entry under mallory's Context: %v, want duework.ErrInvalid", err)
	}
	s.wantEntry("alice", "feed", a)
}

func isolationUnschedule(s *suite) {
	a := entry("alice", "feed", 0)
	s.schedule(a)
	if err := s.x.Unschedule(bg, tenant(s.t, "mallory"), "feed"); err != nil {
		s.errorf("Unschedule of a key mallory does not have: %v, want nil", err)
	}
	s.wantEntry("alice", "feed", a)
	s.wantDue(at(0), key("alice", "feed"))
	// And the other way round, also while claimed.
	s.schedule(entry("mallory", "feed", 0))
	c := s.claimOne(key("alice", "feed"), at(0), at(10))
	if err := s.x.Unschedule(bg, tenant(s.t, "mallory"), "feed"); err != nil {
		s.fatalf("Unschedule: %v", err)
	}
	s.wantAbsent("mallory", "feed")
	s.wantEntry("alice", "feed", a)
	next := entry("alice", "feed", 20)
	if err := s.complete(c, next); err != nil {
		s.errorf("alice's Complete after mallory unscheduled her own entry of the same key: %v", err)
	}
}

func isolationComplete(s *suite) {
	a := entry("alice", "feed", 0)
	s.schedule(a, entry("mallory", "feed", 0))
	c := s.claimOne(key("alice", "feed"), at(0), at(10))
	mal := tenant(s.t, "mallory")
	for _, next := range []duework.Entry{entry("alice", "feed", 500), entry("mallory", "feed", 500)} {
		err := s.x.Complete(bg, mal, c, next)
		if err == nil || !(errors.Is(err, duework.ErrInvalid) || errors.Is(err, duework.ErrClaimLost)) {
			s.errorf("mallory's Complete of alice's claim with next %s: %v, want duework.ErrInvalid or duework.ErrClaimLost", show(next), err)
		}
	}
	// A claim naming mallory's key but carrying alice's token is not mallory's claim.
	forged := c
	forged.Entry = entry("mallory", "feed", 0)
	if err := s.x.Complete(bg, mal, forged, entry("mallory", "feed", 500)); !errors.Is(err, duework.ErrClaimLost) {
		s.errorf("mallory's Complete with alice's token on her own unclaimed entry: %v, want duework.ErrClaimLost", err)
	}
	s.wantEntry("alice", "feed", a)
	s.wantEntry("mallory", "feed", entry("mallory", "feed", 0))
	s.wantDue(at(5), key("mallory", "feed"))
	if err := s.complete(c, entry("alice", "feed", 20)); err != nil {
		s.errorf("alice's own Complete after mallory's attempts: %v, want nil", err)
	}
	s.wantEntry("alice", "feed", entry("alice", "feed", 20))
}

func claimOrder(s *suite) {
	e := duework.Entry{UserID: "bo", WorkKey: "b", Tier: "cold", DueAt: at(-5), LastRunAt: at(-60), MissStreak: 4}
	s.schedule(entry("amy", "a", -1), e, entry("cy", "c", 0))
	keys := []duework.Key{key("cy", "c"), key("amy", "a"), key("bo", "b")}
	until := at(30).Add(250 * time.Microsecond)
	cs := s.claim(at(0), until, keys...)
	if len(cs) != 3 {
		s.fatalf("Claim of three due keys got %s", showClaims(cs))
	}
	for i, c := range cs {
		if c.Entry.Key() != keys[i] {
			s.errorf("claim %d is of %v, want %v (the order of keys)", i, c.Entry.Key(), keys[i])
		}
		if !c.Until.Equal(until) {
			s.errorf("claim of %v has Until %v, want %v", c.Entry.Key(), c.Until, until)
		}
	}
	if !sameEntry(cs[2].Entry, e) {
		s.errorf("claim's Entry = %s, want the stored %s", show(cs[2].Entry), show(e))
	}
	if got := s.claim(at(1), at(2)); len(got) != 0 {
		s.errorf("Claim of no keys = %s, want none", showClaims(got))
	}
}

func claimSkips(s *suite) {
	s.schedule(entry("amy", "due", 0), entry("amy", "later", 10), entry("amy", "held", -1), entry("bo", "due", 0))
	s.claimOne(key("amy", "held"), at(0), at(100))
	cs := s.claim(at(0), at(50),
		key("amy", "absent"), key("nobody", "due"), key("amy", "later"), key("amy", "held"),
		key("amy", "due"), key("amy", "due"), key("bo", "due"))
	got := make([]duework.Key, len(cs))
	for i, c := range cs {
		got[i] = c.Entry.Key()
	}
	if want := []duework.Key{key("amy", "due"), key("bo", "due")}; !slices.Equal(got, want) {
		s.errorf("Claim got %v, want %v", got, want)
	}
}

func claimHides(s *suite) {
	s.schedule(entry("amy", "a", -1), entry("amy", "b", 0), entry("bo", "x", 0))
	c := s.claimOne(key("amy", "a"), at(0), at(10))
	s.claimOne(key("bo", "x"), at(0), at(10))
	for _, now := range []time.Time{at(0), at(5), at(10).Add(-time.Microsecond)} {
		s.wantDue(now, key("amy", "b"))
		hs := s.ready(duework.ReadyQuery{Now: now, Users: 5, PerUser: 5}).Heads
		if len(hs) != 1 || hs[0].UserID != "amy" || len(hs[0].Due) != 1 || hs[0].Due[0].WorkKey != "b" || hs[0].More {
			s.errorf("Ready at t0%+v = %s, want only amy with b", now.Sub(t0), showHeads(hs))
		}
		if got := s.claim(now, now.Add(time.Second), c.Entry.Key(), key("bo", "x")); len(got) != 0 {
			s.errorf("Claim at t0%+v of entries claimed until t0+10s got %s", now.Sub(t0), showClaims(got))
		}
	}
}

func claimExpires(s *suite) {
	s.schedule(entry("amy", "a", 0), entry("amy", "b", 0))
	old := s.claimOne(key("amy", "a"), at(0), at(10))
	s.claimOne(key("amy", "b"), at(0), at(20))
	// Exactly at Until the claim has ended.
	s.wantDue(at(10), key("amy", "a"))
	hs := s.ready(duework.ReadyQuery{Now: at(10), Users: 5, PerUser: 5}).Heads
	if len(hs) != 1 || len(hs[0].Due) != 1 || hs[0].Due[0].WorkKey != "a" {
		s.errorf("Ready at Until = %s, want amy with a", showHeads(hs))
	}
	s.wantDue(at(25), key("amy", "a"), key("amy", "b"))
	again := s.claimOne(key("amy", "a"), at(30), at(40))
	if again.Token == old.Token {
		s.errorf("the claim after expiry reused token %d", old.Token)
	}
}

func claimFollowsNow(s *suite) {
	s.schedule(entry("amy", "a", 0))
	c := s.claimOne(key("amy", "a"), at(0), at(10))
	s.wantDue(at(15), key("amy", "a")) // ended at this now
	s.wantDue(at(5))                   // but still in force at an earlier one
	if hs := s.readAll("", at(5)); len(hs) != 0 {
		s.errorf("Ready at t0+5s after a read at t0+15s = %s, want none: the claim runs to t0+10s", showHeads(hs))
	}
	if got := s.claim(at(5), at(6), key("amy", "a")); len(got) != 0 {
		s.errorf("Claim at t0+5s of an entry claimed until t0+10s got %s", showClaims(got))
	}
	// The claim is still the entry's current one.
	if err := s.complete(c, entry("amy", "a", 100)); err != nil {
		s.errorf("Complete after reads at both sides of Until: %v, want nil", err)
	}
}

func freshTokens(s *suite) {
	s.schedule(entry("amy", "a", 0), entry("bo", "a", 0))
	seen := map[duework.Key]map[uint64]bool{}
	for round := range 6 {
		now := at(round * 10)
		for _, k := range []duework.Key{key("amy", "a"), key("bo", "a")} {
			c := s.claimOne(k, now, now.Add(5*time.Second))
			if seen[k] == nil {
				seen[k] = map[uint64]bool{}
			}
			if seen[k][c.Token] {
				s.errorf("claim %d of %v reused token %d", round, k, c.Token)
			}
			seen[k][c.Token] = true
			if round%2 == 1 {
				// Completing, rescheduling and claiming again must not recycle tokens either.
				if err := s.complete(c, entry(k.UserID, k.WorkKey, round*10+5)); err != nil {
					s.fatalf("Complete: %v", err)
				}
			}
		}
	}
	s.schedule(entry("amy", "a", 100))
	c := s.claimOne(key("amy", "a"), at(100), at(101))
	if seen[key("amy", "a")][c.Token] {
		s.errorf("the claim after a Schedule reused token %d", c.Token)
	}
}

func completeWrites(s *suite) {
	s.schedule(entry("amy", "a", 0))
	c := s.claimOne(key("amy", "a"), at(0), at(10))
	next := duework.Entry{UserID: "amy", WorkKey: "a", Tier: "hot", DueAt: at(60), LastRunAt: at(1), MissStreak: 0}
	if err := s.complete(c, next); err != nil {
		s.fatalf("Complete: %v", err)
	}
	s.wantEntry("amy", "a", next)
	s.wantDue(at(59))
	s.wantDue(at(60), key("amy", "a"))
	if err := s.complete(c, entry("amy", "a", 999)); !errors.Is(err, duework.ErrClaimLost) {
		s.errorf("a second Complete of the same claim: %v, want duework.ErrClaimLost", err)
	}
	s.wantEntry("amy", "a", next)
	// Completing with a DueAt already past makes the entry due at once, unclaimed.
	c2 := s.claimOne(key("amy", "a"), at(60), at(70))
	if err := s.complete(c2, entry("amy", "a", 61)); err != nil {
		s.fatalf("Complete: %v", err)
	}
	s.wantDue(at(62), key("amy", "a"))
}

func completeStale(s *suite) {
	s.schedule(entry("amy", "a", 0))
	stale := s.claimOne(key("amy", "a"), at(0), at(10))
	current := s.claimOne(key("amy", "a"), at(10), at(20))
	if err := s.complete(stale, entry("amy", "a", 500)); !errors.Is(err, duework.ErrClaimLost) {
		s.errorf("Complete with a replaced claim: %v, want duework.ErrClaimLost", err)
	}
	s.wantEntry("amy", "a", entry("amy", "a", 0))
	s.wantDue(at(15)) // still held by the current claim
	if err := s.complete(current, entry("amy", "a", 30)); err != nil {
		s.errorf("Complete with the current claim after a stale attempt: %v", err)
	}
}

func completePastUntil(s *suite) {
	s.schedule(entry("amy", "a", 0))
	c := s.claimOne(key("amy", "a"), at(0), at(10))
	s.wantDue(at(50), key("amy", "a")) // ended, and a read saw it due
	if err := s.complete(c, entry("amy", "a", 100)); err != nil {
		s.errorf("Complete past Until with no later claim: %v, want nil", err)
	}
	s.wantEntry("amy", "a", entry("amy", "a", 100))
	s.wantDue(at(50))
}

func completeForged(s *suite) {
	s.schedule(entry("amy", "a", 0), entry("amy", "b", 0))
	real := s.claimOne(key("amy", "a"), at(0), at(10))
	for _, tok := range []uint64{0, real.Token + 1, real.Token + 1000, ^uint64(0)} {
		f := real
		f.Token = tok
		if err := s.complete(f, entry("amy", "a", 500)); !errors.Is(err, duework.ErrClaimLost) {
			s.errorf("Complete with made-up token %d: %v, want duework.ErrClaimLost", tok, err)
		}
	}
	// A real token of a, presented for the unclaimed b.
	fb := real
	fb.Entry = entry("amy", "b", 0)
	if err := s.complete(fb, entry("amy", "b", 500)); !errors.Is(err, duework.ErrClaimLost) {
		s.errorf("Complete of unclaimed b with a's token: %v, want duework.ErrClaimLost", err)
	}
	s.wantEntry("amy", "a", entry("amy", "a", 0))
	s.wantEntry("amy", "b", entry("amy", "b", 0))
	s.wantDue(at(5), key("amy", "b"))
}

func scheduleEndsClaim(s *suite) {
	s.schedule(entry("amy", "a", 0))
	c := s.claimOne(key("amy", "a"), at(0), at(100))
	host := entry("amy", "a", 5)
	host.Tier = "hot"
	s.schedule(host)
	s.wantDue(at(4))
	s.wantDue(at(5), key("amy", "a")) // unclaimed now, though the old claim ran to t0+100s
	if err := s.complete(c, entry("amy", "a", 999)); !errors.Is(err, duework.ErrClaimLost) {
		s.errorf("the claimant's Complete after the host rescheduled: %v, want duework.ErrClaimLost", err)
	}
	s.wantEntry("amy", "a", host)
}

func unscheduleClaimed(s *suite) {
	s.schedule(entry("amy", "a", 0), entry("amy", "b", 0))
	c := s.claimOne(key("amy", "a"), at(0), at(100))
	if err := s.x.Unschedule(bg, tenant(s.t, "amy"), "a"); err != nil {
		s.fatalf("Unschedule of a claimed entry: %v", err)
	}
	s.wantAbsent("amy", "a")
	if err := s.complete(c, entry("amy", "a", 5)); !errors.Is(err, duework.ErrClaimLost) {
		s.errorf("the claimant's Complete after Unschedule: %v, want duework.ErrClaimLost", err)
	}
	s.wantAbsent("amy", "a")
	s.wantDue(at(200), key("amy", "b"))
}

func getClaimed(s *suite) {
	e := entry("amy", "a", 0)
	s.schedule(e)
	s.claimOne(key("amy", "a"), at(0), at(100))
	s.wantEntry("amy", "a", e)
}
