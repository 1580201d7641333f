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
// written ("run now" means due now).
//
// # The cycle
//
//	route    read up to RouteLimit new users, and users of lanes the Config no longer
//	         names; LaneFor each; move those resolved to their lane's queue
//	read     each lane in priority order, as far as it could be given, holding what it reads
//	select   Select: round robin in turn order, caps, priority, MinShare
//	claim    Index.Claim of the choice until now+ClaimFor; hand back the users not served
//	reroute  LaneFor for each served user; move those whose lane changed
//
// Inside a lane every user read gets one item, its entries in due order, before any gets a
// second; PerUserLimit and PerCycleLimit cap users and lanes. GlobalBatchLimit applies
// after each lane has made its order, highest lane first: paying more buys priority, never
// another user's share inside a cheaper lane. A lane's MinShare reserves that many slots
// before the lanes above take the rest; with every MinShare 0 priority is strict.
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
// LaneFor and serves it in the same cycle. LaneFor is called only for the users a cycle
// routes or serves, and the lane of each served user is resolved again, so plan changes
// take effect by the user's next turn; [Dispatcher.Reroute] applies one at once. A user
// whose LaneFor fails, panics ([ErrLaneForPanic]) or names a lane the Config does not hold
// ([ErrUnknownLane]) is listed in [Batch.Unrouted] and set aside for RetryAfter: it never
// blocks other new users. Users left in a lane a new Config no longer names are routed again.
//
// # Several dispatchers
//
// A Dispatcher keeps nothing between cycles. Each read holds the users it returns for
// HoldFor, so Dispatchers sharing one index — in one process or on several machines — read
// disjoint users and rarely claim the same entry; an entry another dispatcher claimed first
// counts in [LaneReport.LostClaims], is not refilled and does not shed its user. A claim
// lasts ClaimFor: no entry is handed out twice while it lasts.
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
// with at most its lane's PerUserLimit entries, a few Index calls per lane, and one LaneFor
// per user routed or served. It does not grow with the number of users with due work, nor
// with any user's backlog.
package dispatch
