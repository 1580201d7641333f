// Package bridge connects the pieces of rota into the cycle a host runs: watchlist entries
// become due work, a dispatched item runs through the host's pipeline, and the result moves
// the entry's cadence.
//
// # The cycle
//
//	watchlist add ─► Bridge.SyncWatchlist ─► Index.Schedule
//	      … time passes …
//	Dispatcher.Dispatch(now) ─► Batch
//	worker, per item: Bridge.RunDueItem ─► Pipeline.Run ─► duework.Advance ─► Index.Complete
//	      … the entry is due again later: sooner after a hit, later after a miss
//
// The bridge adds no decisions of its own: fairness is dispatch's, cadence is cadence's,
// isolation is tenancy's. What it decides is only what the others leave open: what counts
// as a hit ([Result.FoundNew]), what happens to an item whose watchlist entry is gone, and
// how a failure is retried without losing the entry.
//
// # Where to start
//
// Build a [Bridge] from an Index, a Watchlist, your [Pipeline] and a cadence.Registry.
// Call [Bridge.SyncWatchlist] whenever a tenant's watchlist changes: it schedules what is
// new and never resets a cadence, so calling it too often is harmless. Route tenants to
// lanes with [PlanLanes], build a dispatch.Dispatcher, and hand both to [NewRunner]. A
// daemon calls [Runner.Run]; a serverless handler on a timer calls [Runner.Cycle] once per
// invocation. A host with its own worker pool calls dispatch and [Bridge.RunDueItem]
// itself.
//
// # Hits, misses and removals
//
// A run whose [Result] holds any outcome that is not [StageAlreadySeen] is a hit: the
// entry's miss streak resets and it comes due again after its tier's base interval. A run
// that found only already-seen items, or nothing, is a miss: the streak grows and the
// cadence backs off. The tier is read from the watchlist entry on every run, so a host
// that moves a source to another tier changes its cadence from the next run on. When the
// watchlist entry is gone by the time its due work is dispatched, RunDueItem unschedules
// the due work and returns (nil, nil): there is nothing to retry.
//
// # Nothing is lost
//
// A pipeline error or panic, an unknown tier or a failing watchlist read reschedules the
// entry after [Bridge.RetryDelay] ([DefaultRetryDelay] by default) with its streak
// unchanged, and returns the error. If even that write fails, or a worker dies mid-item,
// the entry stays claimed until its claim ends (dispatch.Config.ClaimFor) and is then
// dispatched again. A run that ends after its claim was replaced — it ran too long and was
// dispatched elsewhere, or the host rescheduled the entry — gets duework.ErrClaimLost and
// writes nothing, so the newer state wins. SyncWatchlist is additive: it never unschedules.
//
// # The Runner
//
// A [Runner] runs one dispatch per cycle and then every dispatched item on a pool of
// [RunnerConfig.Workers] goroutines shared by all its cycles, each item under a context
// that ends with its claim. It reports each cycle in a [CycleReport] — dispatched, hits,
// misses, removed, errors, lost claims, shed and unrouted users, and every item — and logs
// one Info line per cycle and one Warn line per failed item through log/slog. Time comes
// only from its [Clock], which tests replace; Cycle takes now explicitly, so a simulation
// can drive it on a simulated clock. When Run's context ends, it stops dispatching, hands
// back the claims of items that have not started, and waits for the items in flight.
//
// # Observing
//
// Every cycle logs one Info line, "rota: cycle", with its counts — dispatched, hits,
// misses, removed, errors, lost_claims (claims gone when an item completed), released,
// shed, unrouted, dispatch_lost_claims (entries another dispatcher claimed first),
// shed_alarms — and its dispatch_duration and duration, both measured on the Runner's
// [Clock] (the Dispatcher has none). Set [RunnerConfig.Observer] to get the same
// [CycleReport] that Cycle returns, once per cycle, after its last item: that is how the
// rota/otel module exports metrics. The Dispatcher's own dispatch.Observer, if its Config
// has one, hears the dispatch half of the cycle.
//
// The noisy-neighbour alarm: the Runner counts, per user, the consecutive cycles in which
// the user was shed (a dispatch.ShedTracker, holding only the users shed in the last cycle).
// In the cycle a user's streak reaches [RunnerConfig.ShedAlarmAfter] ([DefaultShedAlarmAfter]
// when zero; negative turns it off), the report's [CycleReport.ShedAlarms] holds one
// [ShedAlarm] per lane with such users, and a Warn line "rota: noisy neighbour" is logged
// with the lane, shed_cycles, waiting (the users who crossed, with the items each got this
// cycle) and crowding (the lane's [MaxCrowding] users with the most items this cycle). A
// user is named once per streak; its streak ends in the first cycle it is not shed (fully
// served, or nothing left due). A user with a backlog deeper than its lane's PerUserLimit
// is shed in every cycle too, so it can be named as waiting with items > 0: read it with
// the crowding list. An unrouted user's alarm has an empty lane and no crowding. A failed
// dispatch neither extends nor ends any streak.
//
// # Choices this package makes
//
//   - New entries come due at now + cadence.Jitter(user and slug, now, base,
//     [SyncJitterFraction]): anywhere within the tier's base interval. A host that wants a
//     new source polled at once schedules it itself.
//   - A failed run keeps the entry's LastRunAt: it records the last run that completed.
//   - The writes after a pipeline run ignore the cancellation of the item's context (they
//     keep its values), so a shutdown still records the retry.
//   - A panicking pipeline is recovered and treated as a failed run ([ErrPipelinePanic]).
//   - Items are advanced from the cycle's now, not from when each finished.
//   - [PlanLanes] returns an error for a table it cannot route with, and its LaneFor an
//     error ([ErrUnmappedPlan]) for a plan the table lacks.
package bridge
