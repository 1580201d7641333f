// Package rota runs recurring, per-tenant work fairly: every watched source is polled on an
// adaptive cadence, every cycle hands out a bounded batch of due work in priority lanes
// without letting one noisy tenant starve the rest, and the heavy maintenance jobs that
// share one exclusive lease drain to idle in bounded time.
//
// This package holds no code; it is the map. The work happens in the packages below, and
// the runtime packages import nothing but the standard library.
//
// # The cycle
//
//	watchlist add ─► bridge.SyncWatchlist ─► Index.Schedule
//	      … time passes …
//	Dispatcher.Dispatch(now): Index.DueHeads ─► dispatch.Select (pure, fair) ─► Index.Claim ─► Batch
//	worker, per item: bridge.RunDueItem ─► Pipeline.Run ─► duework.Advance (cadence) ─► Index.Complete
//	      … the entry is due again later, sooner after a hit, later after a miss
//
// A tenant adds a source to its watch list; the bridge gives it a due-work entry, its first
// due time spread by a deterministic jitter. Every interval a dispatcher reads, for each
// user with due work, the first few due entries, selects a fair batch — round robin within
// each lane, lanes in priority order, every cap respected, every user left short named as
// shed — and claims it, so that several dispatchers sharing one index never hand out the
// same entry twice. A worker runs each item through the host's pipeline; a poll that found
// something new snaps the source back to its tier's base interval, one that found nothing
// backs it off, and the next due time counts from now.
//
// Time is never read inside the core: every operation takes now as an argument. Only the
// bridge.Runner owns a clock, and it takes one in its config for tests.
//
// # The packages
//
//   - cadence: pure policies over a miss streak (Backoff), the presets TierHot, TierWarm,
//     TierCold and DigestWeekly, a Registry resolving tier names, and deterministic Jitter.
//   - tenancy: the validated tenant Context, deny-by-default Repository and Watchlist
//     (another tenant's row is simply not found), plans and Entitlements.
//   - duework: the due-work Entry (scheduling metadata only, no payload), the Index
//     contract with its claims, the in-memory Memory index, and Advance.
//     duework/indextest is the conformance suite every Index implementation runs.
//   - dispatch: fair-share lane dispatch — Select, a pure function that does all the
//     fairness work, and the Dispatcher that reads heads, selects and claims.
//   - bridge: the host's side — SyncWatchlist, RunDueItem around the host's Pipeline,
//     PlanLanes (plans to lanes), and the Runner loop with a bounded pool of workers.
//   - maintenance: heavy-maintenance scheduling, independent of the rest — a staleness
//     picker that explains itself, an exclusive lease with a hard hold cap, an off-lease
//     second pass, soft gates, and a stall gauge that survives restarts.
//
// Imports point one way: cadence and tenancy import nothing of rota; duework imports them;
// dispatch imports duework; bridge imports all four; maintenance imports none of them, and
// nothing imports bridge.
//
// Nested modules keep heavy dependencies out of the core: rota/postgres implements the
// Index, the Lease and the StateStore on PostgreSQL for services on several machines;
// rota/bench compares rota with the libraries users would otherwise pick; rota/otel exports
// OpenTelemetry metrics from the cycle and poll reports.
//
// # Observing
//
// Each part reports what it did to an optional observer set in its config, and does
// nothing and allocates nothing for it when none is set: dispatch.Config.Observer hears
// every dispatch cycle (per lane: users with due work, dispatched, shed, lost claims; the
// unrouted users; each shed user's lane), bridge.RunnerConfig.Observer every Runner
// cycle (hits, misses, removed, errors, and the durations, measured on the Runner's clock),
// maintenance.Config.Observer every poll (the winner, the second pass, each deferral
// with its reason code, the stall gauge). The interfaces are one method each and use only
// the standard library.
//
// Logs go through log/slog: one Info line per Runner cycle and per maintenance poll with
// the counts; a Warn line "rota: noisy neighbour" when a user has been shed for
// RunnerConfig.ShedAlarmAfter consecutive cycles, naming the users who wait and the ones
// who crowd their lane; a Warn line when the maintenance gauge turns Degraded, naming the
// task that waits, why and behind what. The rota/otel module implements the three
// observers as OpenTelemetry metrics with stable names (rota.dispatch.*, rota.bridge.*,
// rota.maintenance.*) and never a tenant ID as an attribute.
//
// # Where to start
//
// Run the examples: go run ./examples/tiers shows how the cadence presets back off and snap
// back; go run ./examples/quickstart runs tenants on three plans through the whole cycle in
// memory; go run ./examples/noisyneighbor compares first come, first served with rota's fair
// dispatcher when one tenant floods the index. Then read, in this order: package cadence and package tenancy (the vocabulary),
// duework (what is stored and the contract an adapter meets), dispatch (the fairness rules)
// and bridge, whose Runner is what a service starts. A host writes two things: a
// bridge.Pipeline that polls one source, and the wiring of a Bridge and a Dispatcher.
//
// For several machines, swap duework.NewMemory for the postgres module's Index; nothing
// else changes.
package rota
