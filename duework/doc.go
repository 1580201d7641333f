// Package duework is rota's due-work index: when each tenant's unit of recurring work is
// next due, who is running it right now, and whose turn it is to be served.
//
// An [Entry] is one row of scheduling metadata — UserID, WorkKey, Tier, DueAt, LastRunAt,
// MissStreak — and nothing else: it has no payload field, so posting content, credentials
// and settings can never travel through the cross-tenant index.
//
// An [Index] stores the entries of every tenant and keeps each group of users in a queue in
// which they take turns. Schedule, Unschedule, Get and Complete are tenant-scoped: they take
// a validated tenancy.Context and touch only that tenant's rows. Ready, Claim, Release,
// Route, Groups and DueBefore are a dispatcher's cross-tenant calls: Ready reads the next
// users of a group and holds them, so that several dispatchers read different users; Claim
// hands out their entries until a deadline, after which an unfinished entry is due again by
// itself; Complete writes the entry's next state only while its claim is still current, so
// a stale worker can never overwrite a newer run ([ErrClaimLost]), and Unclaim hands a
// claim back unrun. A user served by a Claim goes to the back of its queue. User and
// Entries are an operator's reads of one user's place and entries.
//
// [Advance] is the pure step between a run and the next: a hit snaps back to the tier's
// base interval, a miss backs off, and either way the next DueAt counts from now, so after
// an outage a source runs once, not once per missed interval.
//
// Most code never calls an Index directly: bridge schedules, the dispatch.Dispatcher reads
// and claims, and bridge's Runner completes. Use [NewMemory] on one machine, or an adapter
// such as rota/postgres for several; to write an adapter, run duework/indextest against it.
//
// # Flow control
//
// Route stores each user's [Limits] with its group, and every Index enforces them at
// Claim, so that they hold across every dispatcher sharing it: MaxInFlight caps the user's
// claims in flight, Every and Burst its rate, and Weight its share of its queue. A user
// held back by its own limits is not ready until it may be served again, so it costs
// nothing to read while it waits; a Complete or Unclaim that frees a slot makes it ready
// at once, and a claim that ends by itself frees its slot with no sweeper. The exact rules
// are in the Index doc. With zero limits everywhere, every read is as without them.
//
// # Choices the contract leaves open
//
//   - [Memory]'s tokens come from one counter per Memory that starts at 1 and only grows:
//     no claim of any entry ever shares a token with another.
//   - A tenant that empties and refills its watch list keeps its place in its queue: its
//     group, limits, LastServed, stride position, rate mark and hold outlive its entries.
//   - Memory keeps each user's current claims in a tree of their ends, made only while the
//     user has claims, so that an unclaimed entry costs nothing for flow control and a
//     limited user's read costs O(log c) in its own c claims, as an unlimited one's does.
//   - Memory returns the context's error, having done nothing, when ctx is already done.
//   - Advance treats a negative MissStreak as 0 and stops counting at [MaxMissStreak].
package duework
