// Package bridge connects the pieces of rota into the cycle a host runs: watchlist entries
// become due work, a dispatched item runs through the host's pipeline, and the result moves
// the entry's cadence.
//
// # The cycle
//
//	watchlist add ─► Bridge.SyncWatchlist ─► Index.ScheduleMissing (or Get, Schedule)
//	      … time passes …
//	Runner, every Interval: Dispatcher.Dispatch(now) ─► Batch
//	worker, per item: Pipeline.Run ─► duework.Advance ─► completions, batched ─► Index.CompleteMany
//	      … the entry is due again later: sooner after a hit, later after a miss
//
// The bridge adds no decisions of its own: fairness is dispatch's, cadence is cadence's,
// isolation is tenancy's. It decides only what the others leave open: what counts as a
// hit ([Result.FoundNew]), what happens to an item whose watchlist entry is gone, and how
// a failure is retried without losing the entry.
//
// # Where to start
//
// Build a [Bridge] from an Index, a Watchlist, your [Pipeline] and a cadence.Registry.
// At start-up call [Bridge.SyncTenants] with every tenant, and [Bridge.SyncWatchlist]
// whenever a tenant's watchlist changes: it schedules what is new and never touches what
// is scheduled, so calling it too often is harmless. Route tenants with [PlanLanes], given
// the lanes of the dispatch.Config it is for, build the dispatch.Dispatcher, and hand both
// to [NewRunner]:
//
//	cfg.LaneFor, err = bridge.PlanLanes(entitlements, table, cfg.Lanes)
//	d, err := dispatch.New(idx, cfg)
//	r, err := bridge.NewRunner(b, d, bridge.RunnerConfig{})
//	err = r.Run(ctx) // until ctx ends; nil after a clean stop
//
// A serverless handler on a timer calls [Runner.Cycle] once per invocation instead. A host
// with its own worker pool calls Dispatch and [Bridge.RunDueItem] itself.
//
// # Hits, misses and removals
//
// A run whose [Result] holds any outcome that is not [StageAlreadySeen] is a hit: the
// entry's miss streak resets and it comes due again after its tier's base interval. A run
// that found only already-seen items, or nothing, is a miss: the streak grows and the
// cadence backs off. The tier is read from the watchlist entry on every run, so moving a
// source to another tier changes its cadence from the next run on. An item whose
// watchlist entry is gone unschedules its due work; should the source be watched again
// meanwhile, it is scheduled anew.
//
// # Nothing is lost
//
// A pipeline error or panic, an unknown tier or a failing watchlist read reschedules the
// entry after [Bridge.RetryDelay] with its streak and LastRunAt unchanged. Every write
// completes the item's claim, so a run whose claim was replaced — the host rescheduled
// the entry, or the run outlived its claim and the entry was dispatched again — writes
// nothing and the newer state wins. If a write fails, or a worker dies, the entry stays
// claimed until its claim ends and is then dispatched again.
//
// The Runner writes a cycle's completions in batches with Index.CompleteMany, one call in
// flight at a time: a call starts once [RunnerConfig.FlushItems] completions wait,
// [RunnerConfig.FlushInterval] after the first, or when the cycle's last item ends, and
// what comes while it is in flight goes in the next call, all of it. So a fast cycle
// writes in a few large calls that never contend with each other for the same tenants'
// rows. A batch whose call fails is reported ([CycleReport.FlushErrs], one Warn line)
// and tried once more; what the retry cannot write is left to its claim's end.
//
// # What the Runner reads
//
// The Runner runs only items its own Dispatcher has just claimed. They cannot be forged,
// so it does not check their claims before running them, as RunDueItem does for the items
// a host hands in: a claim lost since the dispatch — the host rescheduled the entry — is
// found when the item is completed, which then writes nothing, and an item whose claim
// ends before a worker is free is handed back unstarted (see below). A source found gone
// is removed only under the item's claim, as by RunDueItem.
//
// When the Bridge's Watchlist implements tenancy.BatchGetter, as the in-memory and the
// postgres ones do, the watchlist entries of a cycle's items are read in one GetMany
// right after the dispatch, each under its own tenant, and each item runs with the entry
// read for it; otherwise each item reads its own with a Get as it starts. A source
// removed, or moved to another tier, after that read runs once more as it was read —
// within its claim, which bounds how late an item starts — and its next dispatch sees the
// change. If GetMany fails as a whole, one Warn line says so and the items read their
// entries one by one.
//
// # Items end with their claims
//
// An item's context ends [RunnerConfig.ClaimMargin] before its claim does, measured on the
// Runner's [Clock], so that a pipeline that honours its context never runs on while the
// entry is dispatched again. An item whose claim would end before a worker is free is not
// started: its claim is handed back at once ([StatusLate]). Claims are not extended: the
// Index has no renewal, and ClaimFor stays the one bound on how long a source is held —
// a hung pipeline cannot keep a source from being polled. Choose ClaimFor longer than a
// run takes, and Workers enough for a batch within ClaimFor.
//
// # Stopping
//
// When the context of [Runner.Run] ends, a dispatch under way finishes its claim on a
// context of its own, items waiting for a worker are handed back in one CompleteMany
// ([StatusReleased]), and items in flight run on. Those still running
// [RunnerConfig.ShutdownTimeout] later are cancelled; their writes get ShutdownTimeout
// more. A clean stop logs no warning and Run returns nil. Cycle stops the same way when
// its context ends.
//
// # Index capabilities
//
// With an Index that implements duework.MissingScheduler, a sync costs one call and never
// replaces an entry, even one a concurrent sync or dispatch has just written. With
// duework.ClaimGuard, RunDueItem checks the item's claim before it runs anything, and an
// entry is removed only under its item's claim, so a forged or stale item can neither run
// a tenant's pipeline nor remove its entry. duework.Memory and the postgres Index have
// both. Without them the bridge falls back to Get and Schedule: a sync can then replace an
// entry written between the two, and a claim can be checked only as far as the entry is
// still the one claimed, not that the claim is real.
//
// # Observing
//
// Every cycle logs one Info line, "rota: cycle", with its counts — dispatched, hits,
// misses, removed, errors, lost_claims, released, late, shed, unrouted,
// dispatch_lost_claims (entries another dispatcher claimed first), alarms — and its
// dispatch_duration and duration on the Runner's Clock, plus one line per failure. Set
// [RunnerConfig.Observer] to get the same [CycleReport] Cycle returns; [Observers] fans it
// out to several.
//
// The noisy-neighbour alarm watches each lane's wait: how long the lane's longest-waiting
// ready user has waited, from dispatch.LaneReport.WaitingSince to the cycle's now. When a
// lane's wait passes [RunnerConfig.AlarmAfter] (ten Intervals by default), the cycle's
// report holds a [WaitAlarm] and a Warn line "rota: noisy neighbour" names the lane, the
// wait and its crowding users, those with the most items in the lane that cycle; an Info
// line "rota: noisy neighbour recovered" follows when the wait is back within the
// threshold. One alarm per episode.
//
// # Cost
//
// Per Runner item: the pipeline, a share of its cycle's one Watchlist.GetMany (a
// Watchlist.Get of its own without it) and a share of the cycle's CompleteMany calls, a
// few per cycle when items are quick; nothing else is read or written, except to remove
// a gone source. Per RunDueItem: one claim check (an Index.Get without ClaimGuard), one
// Watchlist.Get, the pipeline and one Complete. Per sync: one Watchlist.List and one
// ScheduleMissing (a Get per entry and a Schedule per new one without it).
package bridge
