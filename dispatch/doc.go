// Package dispatch hands out bounded, fair batches of due work in priority lanes, so that
// one tenant's deep backlog never starves the others, and says out loud whom it could not
// serve.
//
// # The cycle
//
// A Dispatcher is built once with [New] over a [duework.Index] and a [Config]. Each call to
// [Dispatcher.Dispatch] is one cycle at a given now:
//
//	Index.DueHeads(now, largest PerUserLimit)  one head per user with due work
//	LaneFor(user)                               once per such user, never cached
//	Select(heads, lanes)                        pure: the fair batch and who is shed
//	Index.Claim(keys, now, now+ClaimFor)        one call
//
// The returned [Batch] holds the claimed [Item]s (run each, then complete its claim through
// the index, e.g. with bridge.RunDueItem), the shed users, the users whose lane could not be
// resolved, and one [LaneReport] per lane. The core never reads a clock: now is passed in.
//
// # Fairness
//
// [Select] does all of it and is exported so it can be checked without an index. Inside a
// lane it goes round by round: every user with due work gets one item before any gets a
// second, users ordered least recently served first (never served, then the oldest
// LastServed), then by their earliest DueAt, then by UserID. Because Claim stamps
// LastServed, a user left out in one cycle stands ahead of everyone served in it: with U
// users continuously due in a lane of per-cycle limit L, every one is served within
// ceil(U/L) consecutive cycles, however old or deep anyone's backlog. PerUserLimit and
// PerCycleLimit cap users and lanes.
//
// # Priority and MinShare
//
// GlobalBatchLimit applies after each lane has made its fair order, highest lane first:
// paying more buys priority, never another user's fair share inside a cheaper lane. A lane's
// MinShare reserves slots before the higher lanes take the rest: each lane, in priority
// order, reserves min(MinShare, what its fair order holds, what the global limit has left);
// the unreserved slots then go to the lanes in priority order, and each lane dispatches a
// prefix of its fair order. A reservation a lane cannot use goes back to the pool, so
// MinShare never leaves slots idle. With every MinShare 0 (the default) priority is strict.
// New refuses MinShares that add up to more than GlobalBatchLimit.
//
// # Shedding
//
// Nothing is ever deleted. [Batch.ShedUserIDs] names, sorted and once each, every user who
// had due work this cycle and did not get all of it — held back by a cap, the global limit,
// or a missing lane — and its work simply stays due for the next cycle. It is the hook for a
// noisy-neighbour alarm. A user whose lane cannot be resolved (LaneFor fails, or names a
// lane the Config does not hold: [ErrUnknownLane]) is listed in [Batch.Unrouted] with the
// reason, and every other user is dispatched as usual.
//
// # Claims and several dispatchers
//
// Dispatched entries are claimed until now + ClaimFor; the index hides a claimed entry from
// every dispatcher until the claim ends or is completed, so Dispatchers sharing one index,
// in one process or many, never hand out the same entry twice while a claim lasts. An entry
// another dispatcher claimed between this cycle's read and its claim is counted in
// [LaneReport.LostClaims], is not replaced by other work this cycle, and does not make its
// user shed: it is being handled elsewhere. So Batch.ShedUserIDs is always exactly what
// Select decided. Choices made where the design is silent:
//
//   - LaneFor is called once per user with due work per cycle, and the answer is not
//     cached: plans change between cycles.
//   - The reason in Unrouted wraps the LaneFor error (errors.Is works) or ErrUnknownLane.
//   - A user in Unrouted also counts in ShedUserIDs, but in no lane's report.
//   - When an Index call fails, or ctx ends before Claim, Dispatch returns a zero Batch and
//     the error. Before Claim nothing was claimed; Claim is one call, atomic by the Index
//     contract, and any claim a failed call did leave behind ends at now + ClaimFor.
//   - An Index that returns two heads for one user breaks its contract: Dispatch returns an
//     error, and Select panics.
//
// # Observing
//
// Set [Config.Observer] and the Dispatcher reports every cycle to it before Dispatch
// returns, failed cycles included: a [CycleInfo] with the Batch (per lane: users with due
// work, dispatched, shed, lost claims; the unrouted users with their reasons), the lane of
// every shed user ([ShedUser]; empty for an unrouted one), and the error. A nil Observer
// reports nothing and allocates nothing for it: TestDispatchWithoutObserverAllocatesAsBefore
// checks that Dispatch allocates no more than it did before observers existed, and pins the
// current count (one more with an Observer: the shed users' lanes). The Dispatcher
// has no clock, so a cycle's duration is measured by whoever drives it (bridge.Runner, on
// its Clock). [Dispatcher.Cycle] is Dispatch that also returns the CycleInfo.
//
// [ShedTracker] is the noisy-neighbour alarm's pure core: fed each cycle's ShedUserIDs, it
// counts each user's consecutive shed cycles, names a user in the cycle its streak reaches
// the threshold (once per streak), forgets a user as soon as it is not shed, and so holds
// only the users shed in the last cycle. A user with a backlog deeper than its cap is shed
// every cycle too — it is the one that crowds the lane — so an alarm should name, beside
// the users who wait, the ones that got the most items (bridge.Runner does). The rota/otel
// module turns CycleInfo into OpenTelemetry metrics.
//
// # Performance
//
// A cycle costs O(H log H + H·P) plus the index's DueHeads and Claim, where H is the number
// of users with due work and P the largest PerUserLimit (the batch is at most H·P): DueHeads returns at
// most P entries per user and More for the rest, so a backlog of a million entries costs a
// cycle no more than one of a thousand. BENCHMARKS.md holds the figures.
package dispatch
