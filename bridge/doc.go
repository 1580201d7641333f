// Package bridge connects the pieces of rota into the cycle a host runs: watchlist entries
// become due work, a dispatched item runs through the host's pipeline, and the result moves
// the entry's cadence.
//
// # The cycle
//
//	Bridge.Watch ─► Watchlist.AddMany, Index.ScheduleMissing (or SyncWatchlist after a change)
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
// Add sources with [Bridge.Watch], which refuses an unknown tier at once and otherwise
// writes the watchlist entries and schedules their due work in one step. At start-up call
// [Bridge.SyncAll], which syncs every tenant the watchlist lists, and call
// [Bridge.SyncWatchlist] whenever a tenant's watchlist changes behind the Bridge's back:
// it schedules what is new and never touches what is scheduled, so calling it too often
// is harmless. Route tenants with [PlanLanes], given
// the lanes of the dispatch.Config it is for, give them their plan's flow-control limits
// with [PlanLimits], build the dispatch.Dispatcher, and hand both to [NewRunner]:
//
//	cfg.LaneFor, err = bridge.PlanLanes(entitlements, lanes, cfg.Lanes)
//	cfg.LimitsFor, err = bridge.PlanLimits(entitlements, limits)
//	d, err := dispatch.New(idx, cfg)
//	r, err := bridge.NewRunner(b, d, bridge.RunnerConfig{})
//	err = r.Run(ctx) // until ctx ends; nil after a clean stop
//
// A serverless handler on a timer calls [Runner.Cycle] once per invocation instead. The
// plans are the host's: the tables map whatever plans its Entitlements names. [RunAll]
// runs a service's loops — the Runner, a maintenance Scheduler, a listener that calls
// [Runner.Wake] — under one context with one clean stop.
//
// # Backlogs and wake-ups
//
// Run starts a cycle every [RunnerConfig.Interval]. A cycle that handed out all its lanes
// could give while ready work was left waiting (a user shed, a lane keeping a ready user
// waiting) is followed by the next as soon as its items have all started on a worker, at
// least [RunnerConfig.MinInterval] after it began: a backlog — a tenant adding a thousand
// sources — drains at the speed of the workers, not one batch per Interval. A host that
// schedules work due now calls [Runner.Wake] to have it dispatched within MinInterval.
//
// # Workers anywhere
//
// A host whose workers run elsewhere puts its own queue between the dispatcher and them:
// a [Feeder] dispatches into a [Sink] (one subject or stream per lane) in the items' wire
// form ([EncodeItem]), and each consumer decodes a message ([DecodeItem]), runs it with
// [Worker.Do] and acknowledges it once Do returns, whatever the status:
//
//	f, err := bridge.NewFeeder(d, sink, bridge.FeederConfig{})
//	go f.Run(ctx)
//	w, err := bridge.NewWorker(b, bridge.WorkerConfig{})
//	for msg := range messages { // a consumer
//		item, err := bridge.DecodeItem(msg.Data())
//		if err == nil {
//			w.Do(ctx, item, time.Now())
//		}
//		msg.Ack()
//	}
//
// Backpressure is the Sink's Room: before each dispatch the Feeder asks how many more
// items the consumers can start before their claims end, less what is sent and not yet
// acknowledged, and claims no more (dispatch.Dispatcher.DispatchAtMost, by the
// dispatcher's fairness rules and lane priority). So when the workers stop, the claiming
// stops instead of filling the queue with copies that will go stale; a Sink that drops
// the stale items it holds before it answers never holds an entry twice. Items a Send
// fails are handed back with Index.Unclaim. Per-user limits hold across the whole fleet,
// since they live in the index.
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
// entry with duework.Fail: its ErrorStreak grows, its MissStreak stays, and it comes due
// after [Bridge.Retry]'s interval for the streak — 1, 2, 4 … minutes and then every 6
// hours by default ([DefaultRetry]) — so a source whose credentials were revoked is
// neither tried every minute forever nor dropped. A hit or a miss sets the streak back
// to 0. Every write completes the item's claim, so a run whose claim was replaced — the
// host rescheduled the entry, or the run outlived its claim and the entry was
// dispatched again — writes nothing and the newer state wins. An item that is not run is
// handed back with Index.Unclaim (or, once its claim has started, completed unchanged):
// its entry is due at once, otherwise unchanged. If a write fails, or a worker dies, the
// entry stays claimed until its claim ends and is then dispatched again.
//
// # Pushback: a tenant that backs off as a whole
//
// A tenant's sources are polled through the tenant's own upstream API, and upstreams push
// back: a 429 or 503 with Retry-After, an exhausted quota. A pipeline says so by returning
// a [*Pushback]; the Worker then pauses the tenant in the index (Index.Pause) until the
// run's end plus Pushback.After — no dispatcher of the fleet claims its entries before
// then, and it costs a dispatch nothing — moves the entry to the pause's end with its
// streaks unchanged ([StatusPaused]) and hands back the tenant's items it holds that have
// not started ([StatusReleased]). A Warn line "rota: tenant paused" names the tenant, the
// pause's end and the reason.
//
// A Worker, and so a Runner, writes completions in batches with Index.CompleteMany and
// hand-backs with Index.Unclaim, one call in flight at a time: a call starts once
// FlushItems writes wait, FlushInterval after the first, or as soon as no item is left
// running (for a Runner, when a cycle's last item ends), and what comes while it is in
// flight goes in the next call, all of it. So a fast cycle writes in a few large calls
// that never contend with each other for the same tenants' rows. A call that fails is
// logged (a Warn line "rota: write failed" saying whether and after what backoff it is
// retried) and, for a Runner, reported ([CycleReport.FlushErrs]); it is retried after a
// backoff that doubles from 50 ms to 5 s, for as long as a claim it carries lasts. What
// it cannot write by then is left to its claims' end.
//
// # One item path
//
// Every item runs on a [Worker], the one code that runs items: [Worker.Do] for items that
// reach a host from a queue, a [Runner] for the items of its own dispatches (it hands
// each batch to a Worker of its own), and [Bridge.RunDueItem], a Worker of one item. An
// item waits for a free worker; once it has one, its claim is started with
// Index.StartClaims — one call for the items that get a worker together — and its
// watchlist entry read with Watchlist.GetMany, and only then does its pipeline run. So
// an item decoded from a queue, or forged, runs nothing unless its claim is current
// ([StatusLostClaim]), and no two copies of an item ever run, in one process or across a
// fleet, whatever a broker redelivers. A Runner reads the watchlist entries of a whole
// dispatch in one GetMany while its items take their workers, and the items that find a
// worker at once start their claims in one call, beside that read. A source removed, or moved
// to another tier, after that read runs once more as it was read — within its claim —
// and its next dispatch sees the change. A source found gone is removed only under the
// item's claim (Index.UnscheduleClaimed). If a read fails as a whole, one Warn line says
// so and its items are retried unrun.
//
// A Runner's items never leave its process, so it claims them for its own Worker alone:
// the context of its dispatch carries the Worker's set of local starts, as do the
// Worker's StartClaims, Unclaim and CompleteMany calls. An Index that takes part (the
// postgres and DynamoDB Indexes) writes those claims started in the claim and lets only
// the Worker start them, each once, with no round trip while the claim lasts; every other
// process finds them started. Any other Index ignores the set. Either way an item starts
// once, after StartClaims returned nil for it, and an item still waiting for a worker at
// a stop is handed back unstarted. An Index wrapped by the host must pass each call's
// context on.
//
// # Items end with their claims
//
// One rule keeps a run from overlapping the entry's next dispatch: an item claimed until
// Until may start at now only while now is before Until − margin, and its pipeline's
// context ends at Until − margin, with cause [ErrClaimEnded]. An item that may not start
// is not run: its claim is handed back at once ([StatusLate]). now is the item's time on
// the dispatcher's time line — the now it was given, plus the time it has since waited,
// measured on the Worker's [Clock]. The margin is [WorkerConfig.ClaimMargin]
// ([DefaultClaimMargin] when zero; RunDueItem uses the default); a Runner's is
// min([RunnerConfig.ClaimMargin], ClaimFor/4). It must cover the clock skew between the
// processes sharing the index and the completion write, since past the claim's end, on
// the fastest clock, another dispatcher may take the entry again: NewWorker and NewRunner
// refuse a margin below MaxClockSkew plus FlushInterval.
//
// Claims are not extended: the Index has no renewal, and ClaimFor stays the one bound on
// how long a source is held — a hung pipeline cannot keep a source from being polled.
// Choose ClaimFor longer than a run takes, and Workers enough for a batch within ClaimFor.
//
// # Time
//
// RunDueItem and Worker.Do advance an entry from the time its run ended: the now they
// were given plus the time the run took. A Runner's cycle advances its items from the
// cycle's now, so that a simulation can drive [Runner.Cycle] on simulated time.
//
// # Wire form
//
// [EncodeItem] writes a dispatched item as one JSON object, version 1:
//
//	{"v":1,"lane":"pro","token":"18446744073709551615","until":"2026-11-30T12:01:30.000000007Z",
//	 "entry":{"user_id":"ann","work_key":"jobs","tier":"hot","due_at":"2026-11-30T11:59:00.000000000Z",
//	          "last_run_at":0,"miss_streak":3,"error_streak":2}}
//
// The token is a decimal string, since a JSON number cannot hold every uint64. Times are
// RFC 3339 in UTC with all nine digits of nanoseconds, and the zero time is the number 0.
// Every field is required but error_streak, which is left out when 0 (so that such an item
// reads as it did before the field existed) and read as 0 when missing; names match
// exactly, and [DecodeItem] refuses, wrapping
// duework.ErrInvalid, anything else: another version, an unknown or missing field,
// anything but white space after the object, a time or token in another form, a zero
// Until, an entry that fails duework.Entry.Validate. A decoded item equals the encoded
// one field by field, times under time.Time.Equal, and is trusted no more than a forged
// one: a Worker checks its claim before it runs anything.
//
// # Stopping
//
// When the context of [Runner.Run] ends, a dispatch under way finishes its claim on a
// context of its own, items waiting for a worker are handed back at once in one Unclaim
// ([StatusReleased]), and items in flight run on. Those still running
// [RunnerConfig.ShutdownTimeout] later are cancelled; their writes get ShutdownTimeout
// more. A clean stop logs no warning and Run returns nil. Cycle stops the same way when
// its context ends. [Worker.Stop] refuses new items, waits for those admitted and their
// writes, and cancels both when its context ends first.
//
// # Observing
//
// Every cycle logs one Info line, "rota: cycle", with its counts — dispatched, hits,
// misses, removed, errors, lost_claims, released, late, duplicates, paused, shed, unrouted,
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
// Lateness is how late a lane's most overdue work is: the cycle's now less the oldest
// visible DueAt among the users the lane read (dispatch.LaneReport.OldestDue). The cycle's
// line carries each lane's as lateness.LANE. When a tenant's oldest visible work is later
// than AlarmAfter, whatever the reason — its neighbours, its own limits, too few workers
// — a Warn line "rota: work late" names it with its lane, once per episode ([LateAlarm]),
// and an Info line "rota: work late recovered" follows when its work is within the
// threshold again.
//
// A replica whose clock lags the others' can find every user it could serve already
// served by another at a later now, or held by another, and its claims lose: it
// dispatches nothing while work is due. After three such cycles a Warn line
// "rota: dispatching nothing" says so once, with what it saw and the likely cause
// ([Starvation]), and an Info line "rota: dispatching again" ends it. Work that only a
// pause or a tenant's own limits keep back does not count.
//
// Every Worker, and so every Runner, also names the sources and runs that need an
// operator: a Warn line "rota: source failing" when a failed run brings a source's
// ErrorStreak to [WorkerConfig.AlarmAfterErrors] (5 by default), and an Info line
// "rota: source recovered" at its next success; "rota: tenant paused" for a Pushback;
// "rota: pipeline still running past its claim" when a pipeline ignores its context,
// then "rota: pipeline ran past its claim" with the overrun ([ItemReport.Overrun]); and,
// at most one line every ten seconds of each kind, the items Worker.Do did not run because
// their claim was not current (forged, or stale from another dispatcher) or was ending.
//
// A setting that can never take effect gets a Warn line "rota: setting has no effect",
// once, naming it and what caps it: at a Runner's or Feeder's start, a lane's PerUserLimit
// or PerUserBurst above its PerCycleLimit, or a PerCycleLimit above GlobalBatchLimit; and
// the first time a lane reads a tenant whose weight times the lane's PerUserLimit exceeds
// its PerCycleLimit (dispatch.LaneReport.WeightCapped), since weights come from LimitsFor
// tenant by tenant.
//
// # Cost
//
// Per item: the pipeline, a share of one Index.StartClaims (the items that get a worker
// together: at most Workers a call, so quick items on 8 workers take a call per 8 items;
// for a Runner over an Index that takes part in local starts, none while its claims last),
// of one Watchlist.GetMany (for a Runner, its cycle's one) and of the CompleteMany calls, a
// few per cycle when items are quick; nothing else is read or written, except to remove a
// gone source or hand back an unrun item. RunDueItem makes one call of each. Per sync: one
// Watchlist.List and one ScheduleMissing; per Watch, one AddMany and one ScheduleMissing. A
// Runner's cycle that dispatches nothing, and loses no claim, costs one Index.DueBefore of
// one entry more, and an Index.User when that finds one: the probe behind the Starvation
// report.
package bridge
