// Package duework is rota's due-work index: when each tenant's unit of recurring work is
// next due, who is running it right now, and whose turn it is to be served.
//
// An [Entry] is one row of scheduling metadata — UserID, WorkKey, Tier, DueAt, LastRunAt,
// MissStreak, ErrorStreak — and nothing else: it has no payload field, so posting content, credentials
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
// claim back unrun. StartClaims marks claims started, so that a worker given a second copy
// of an item learns it is a duplicate ([ErrClaimStarted]) and no claim runs twice, whatever
// a queue between dispatcher and workers redelivers. A user served by a Claim goes to the
// back of its queue. Pause keeps a tenant from being served until an instant, on every
// dispatcher sharing the index, and Resume ends that at once. User, Entries and Paused are
// an operator's reads of one user's place and entries, and of the paused users.
//
// [Advance] is the pure step between a run and the next: a hit snaps back to the tier's
// base interval, a miss backs off, and either way the next DueAt counts from now, so after
// an outage a source runs once, not once per missed interval. [Fail] is its twin for a run
// that failed: the retries back off by their own streak, and the next success ends it.
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
//   - Advance treats a negative MissStreak as 0 and stops counting at [MaxMissStreak]; Fail
//     does the same with ErrorStreak.
//   - Memory keeps a user's pause in a record of its own, made by Pause and dropped as soon
//     as a write sees it no longer counts (a Claim that serves the user at or after its
//     end, or a Pause or Resume of the user), so the set Paused pages through holds few
//     ended pauses; a Ready's hold does not drop one, since the pause still sets where the
//     user waits in its queue.
//   - Memory interns tier names: an entry holds its tier as a unique.Handle, one copy per
//     distinct name.
package duework
