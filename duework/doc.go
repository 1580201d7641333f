// Package duework is rota's due-work index: when each tenant's unit of recurring work is
// next due, and who is running it right now.
//
// # The model
//
// An [Entry] is one row of scheduling metadata — UserID, WorkKey, Tier, DueAt, LastRunAt,
// MissStreak — and nothing else: it has no payload field, so posting content, credentials
// and settings can never travel through the cross-tenant index. An [Index] stores the
// entries of every tenant:
//
//   - Schedule, Unschedule and Get are tenant-scoped: they take a validated
//     tenancy.Context and touch only that tenant's rows. Another tenant's entry is
//     ErrNotFound, exactly as if it did not exist.
//   - DueBefore and DueHeads are the dispatcher's cross-tenant reads, the one documented
//     exception. DueHeads gives each user with due work a [Head]: its first few due entries,
//     whether it has more, and when it was last served, which is what a fair dispatcher
//     needs.
//   - Claim hands entries out: a claimed entry is invisible to the reads until its claim's
//     Until, after which it is due again by itself (a worker that died loses nothing).
//     Complete writes the entry's next state only while its claim is still the current
//     one, so a stale worker can never overwrite a newer run ([ErrClaimLost]).
//
// [Advance] is the pure step between a run and the next: a hit snaps back to the tier's
// base interval, a miss backs off, and either way the next DueAt counts from now, so after
// an outage a source runs once, not once per missed interval.
//
// # Where to start
//
// Make an index with [NewMemory], or use a host adapter such as rota/postgres for several
// machines. Most code never calls the Index directly: bridge.SyncWatchlist schedules, the
// dispatch.Dispatcher reads and claims, and bridge.RunDueItem advances and completes. To
// write your own adapter, run duework/indextest against it.
//
// # Performance of Memory
//
// Every Memory call takes one mutex. Schedule, Unschedule, Get and Complete are O(log n).
// Claim is O(len(keys) · log n). The reads cost what they return, not what is stored:
// DueHeads(now, k) visits only the users with something due and k+1 entries of each, and
// DueBefore(now, limit) merges the users' due trees for O(limit · log n). A tenant with a
// million due entries costs DueHeads no more than one with a thousand.
//
// A stored entry takes about 130 bytes of heap beyond its ID strings (which the index
// shares with the caller); a user record takes 80 more, which matters only when users hold
// one entry each. BENCHMARKS.md has the figures.
//
// # Choices the contract leaves open
//
//   - Memory returns times in UTC, without monotonic clock readings; compare with Equal.
//     It stores every time.Time exactly, at any date.
//   - Tokens come from one counter per Memory, start at 1 and only grow: no claim of any
//     entry ever shares a token with another.
//   - Visibility is decided by each call's now alone. A read at a later now returns an
//     expired claim's entry, and a read at an earlier now (clocks of several dispatchers
//     disagree) hides it again while its Until is still ahead; the claim stays the entry's
//     current one until a new Claim, Schedule, Unschedule or Complete replaces it.
//   - A user keeps its LastServed after its last entry is unscheduled, so a tenant that
//     empties and refills its watch list keeps its place in the fairness order. A user
//     never served is forgotten with its last entry.
//   - Get and Unschedule check the work key like Schedule does (ErrInvalid for an empty
//     one). A Complete whose claim or next names another tenant is ErrInvalid.
//   - Memory returns the context's error, having done nothing, when ctx is already done.
//   - Advance treats a negative MissStreak as 0 and stops counting at [MaxMissStreak].
package duework
