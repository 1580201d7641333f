// Package dispatch hands out bounded, fair batches of due work in priority lanes, so that
// one tenant's deep backlog never starves the others, and says whom it left waiting.
//
// A [Dispatcher] is built once with [New] over a [duework.Index] and a [Config]; each call
// to [Dispatcher.Dispatch] is one cycle at a given now and returns a [Batch]: the claimed
// items (run each, then complete its claim), the users left waiting, the users whose lane
// could not be resolved, and a [LaneReport] per lane. [Select] is the cycle's fairness,
// pure and exported, so it can be checked without an index. A [Config.Observer] hears about
// every cycle. Nothing here reads a clock.
//
// # Turn queues
//
// The index keeps, for each lane, a queue of the users with due work, ordered by their
// Turn: the later of when their work became due and when they were last served. A cycle
// reads each lane's queue from the front, as many users as the lane could be given, and a
// user it serves goes to the back. So with U users continuously due in a lane that hands
// out L items a cycle, every one is served within ceil(U/L) consecutive cycles, however old
// or deep anyone's backlog, as long as no entry is scheduled due before the moment it is
// written ("run now" means due now) and every weight is 1. A heavier user goes less far
// back (see Flow control).
//
// # The cycle
//
//	route    read up to RouteLimit new users, and users of lanes the Config no longer
//	         names; LaneFor each; move those resolved to their lane's queue
//	read     each lane in priority order, as far as it could be given, holding what it reads
//	select   Select: round robin in turn order, caps, priority, MinShare, bursts
//	claim    Index.Claim of the choice until now+ClaimFor; hand back the users not served
//	reroute  LaneFor and LimitsFor for each served user; move those whose lane or limits
//	         changed
//
// Inside a lane every user read gets one item, its entries in due order, before any gets a
// second; PerUserLimit and PerCycleLimit cap users and lanes. GlobalBatchLimit applies
// after each lane has made its order, highest lane first: paying more buys priority, never
// another user's share inside a cheaper lane. A lane's MinShare reserves that many slots
// before the lanes above take the rest; with every MinShare 0 priority is strict.
//
// # Flow control
//
// [Config.LimitsFor] gives each user [duework.Limits], stored with its lane: a weight, an
// in-flight cap and a rate. The index enforces the cap and the rate at Claim, across every
// dispatcher sharing it, and a user they hold back is not ready until it may be served
// again; the Dispatcher never counts slots itself. A user of weight w has fair and burst
// caps of PerUserLimit × w and PerUserBurst × w, and the index moves its Turn back by less
// after a serve, so that under contention it gets about w times a weight-1 user's share.
// That share is exact over a long run when the lane hands out one item a cycle; with
// more, the users one cycle serves share a Turn and UserID breaks their ties the same way
// every cycle, so the first in UserID order gets more than its share. After an outage a
// heavy user whose Turn lies far back catches up in a few serves (the index starts its
// stride no earlier than now − 3w·(now − LastServed)), keeping the others within the wait
// bound unless its weight is many times theirs.
//
// A lane with PerUserBurst above PerUserLimit is work-conserving: once every user it read
// has had its fair part, its room left goes, one more item per user per round, to users
// with more due work, and the global slots no lane's fair part wanted go to the bursts,
// highest lane first. A lone tenant in an idle lane is then not held to PerUserLimit. The
// lane reads max(PerUserLimit, PerUserBurst) × w entries per user to make that possible.
//
// A user whose own cap or rate cut what the read returned (Head.More with fewer Due than
// the lane read) is counted in [LaneReport.Limited]. When it got all its Due it is not shed
// and does not set WaitingSince: it waits on itself, not on its neighbours.
// [LaneReport.OldestDue] and [LaneReport.Overdue] say how late the lane's work is, whoever
// holds it back.
//
// [Dispatcher.DispatchAtMost] runs a cycle under lower caps — a total and per-lane counts
// — by the same rules, for a feeder whose queue can take only so much. With every weight
// 1, no caps or rates and no bursts, every cycle is what plain round robin gives.
//
// # Waiting and shedding
//
// Nothing is deleted: work not handed out stays due. [Batch.ShedUserIDs] names every user a
// lane read and left with due work — cut by a cap, by the global limit, or deeper than one
// read shows. [LaneReport.WaitingSince] is the Turn of the first user the lane left in its
// queue, so now − WaitingSince is how long the lane keeps someone waiting: the signal for a
// noisy-neighbour alarm, whatever the number of users behind.
//
// # Routing and plan changes
//
// A user's first entry puts it in the unrouted queue; a cycle resolves its lane with
// LaneFor, then its limits with LimitsFor, and serves it in the same cycle. Both are called
// only for the users a cycle routes or serves, and each served user's lane and limits are
// resolved again, so plan changes take effect by the user's next turn;
// [Dispatcher.Reroute] applies one at once. A user whose LaneFor fails, panics or names a
// lane the Config does not hold ([ErrUnknownLane]), or whose LimitsFor fails, panics or
// returns invalid limits, is listed in
// [Batch.Unrouted] and set aside for RetryAfter: it never blocks other new users. Users
// left in a lane a new Config no longer names are routed again.
//
// # Several dispatchers
//
// A Dispatcher keeps no state between cycles, only memory: over a [duework.Memory], a
// cycle reads its lanes and claims into the memory its last cycle used (at most about
// 7 MB) and allocates little more than the Batch it returns. Each read holds the users it
// returns for HoldFor, so Dispatchers sharing one index — in one process or on several
// machines — read disjoint users and rarely claim the same entry; an entry another
// dispatcher claimed first counts in [LaneReport.LostClaims], is not refilled and does not
// shed its user. A claim lasts ClaimFor: no entry is handed out twice while it lasts.
// Their clocks may disagree by up to Config.MaxClockSkew: New refuses a HoldFor or
// ClaimFor not longer than it, and a ClaimFor under one second.
//
// A cycle that fails before its claim hands back what it read at once, even when ctx has
// ended, and returns the error. Once the claim succeeds it returns its Batch: a failure
// to hand users back then only lets their holds lapse, and a failure to move a served user
// leaves it in its lane, listed in Unrouted. A dispatcher that dies mid-cycle hides its
// users for HoldFor at most.
//
// # Cost
//
// A cycle costs what it reads: about GlobalBatchLimit users plus RouteLimit new ones, each
// with at most max(PerUserLimit, PerUserBurst) × weight entries, a few Index calls per
// lane, and one LaneFor and one LimitsFor per user routed or served. It does not grow with
// the number of users with due work, nor with any user's backlog; limits cost the index,
// not the cycle.
package dispatch
