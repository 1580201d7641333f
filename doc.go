// Package rota runs recurring, per-tenant work fairly: every watched source is polled on an
// adaptive cadence, every cycle hands out a bounded batch of due work in priority lanes
// without letting one noisy tenant starve the rest, and the heavy maintenance jobs that
// share one exclusive lease drain to idle in bounded time.
//
// This package holds no code; it is the map. The work happens in the packages below, and
// the runtime packages import nothing but the standard library. Three parts make it up: a
// due-work index with fair-share lane dispatch, a bridge from a scheduled poll to the
// host's pipeline, and fair scheduling of heavy maintenance under one lease. Around them:
// turn queues whose cost is the batch, claims that expire, per-tenant limits that hold
// across replicas, a Runner that stops cleanly, workers in other processes, an operator's
// web page, and adapters for several machines.
//
// # The cycle
//
//	watchlist add ─► bridge.SyncWatchlist ─► the Index schedules what is new
//	      … time passes …
//	Dispatcher.Dispatch(now): per lane, Index.Ready (the next users in turn, held)
//	                          ─► dispatch.Select (pure, fair) ─► Index.Claim ─► Batch
//	worker, per item: Pipeline.Run ─► duework.Advance (cadence) ─► Index.CompleteMany, batched
//	      … the entry is due again later: sooner after a hit, later after a miss
//
// A tenant adds a source to its watch list; the bridge gives it a due-work entry, its first
// due time spread by a deterministic jitter. The index keeps, for each lane, a queue of the
// tenants with due work in turn order: a tenant joins the back when its work comes due and
// again each time it is served. Every interval a dispatcher reads each lane's queue from
// the front, only as many tenants as the lane could be given, selects a fair batch — round
// robin within each lane, lanes in priority order, every cap respected, every tenant left
// short named as shed — claims it, and hands back the tenants it read and did not serve.
// So a cycle costs its batch, never the number of tenants waiting nor the depth of anyone's
// backlog. A worker runs each item through the host's pipeline; a poll that found something
// new snaps the source back to its tier's base interval, one that found nothing backs it
// off, and the next due time counts from now.
//
// Each tenant may also have limits, usually from its plan: how many of its items may run
// at once (duework.Limits.MaxInFlight), how fast it may be served (Every and Burst), and
// how large its share of its lane is (Weight). The index enforces them at Claim, for every
// dispatcher sharing it, and a tenant held back by its own limits waits on itself, not on
// its neighbours. A lane's LaneCapacity.PerUserBurst lets a lone tenant use room the lane
// would otherwise leave idle.
//
// Time is never read inside the core: every operation takes now as an argument. Only the
// bridge's Runner, Worker and Feeder own a clock, and each takes one in its config for
// tests.
//
// # The packages
//
//   - cadence: pure policies over a miss streak (Backoff), the presets TierHot, TierWarm,
//     TierCold and DigestWeekly, a Registry resolving tier names, and deterministic Jitter.
//   - tenancy: the validated tenant Context, deny-by-default Repository and Watchlist
//     (another tenant's row is simply not found), plans and Entitlements.
//   - duework: the due-work Entry (scheduling metadata only, no payload), the Index
//     contract with its turn queues and claims, the in-memory Memory index, and Advance.
//     duework/indextest is the conformance suite every Index implementation runs.
//   - dispatch: fair-share lane dispatch — Select, a pure function that does all the
//     fairness work, and the Dispatcher that reads the queues, selects and claims, also at
//     most as many items as a queue has room for (DispatchAtMost).
//   - bridge: the host's side — Watch, SyncWatchlist and SyncAll, RunDueItem around the
//     host's Pipeline, PlanLanes and PlanLimits (plans to lanes and limits), the Runner,
//     and for workers in other processes the Worker, the Feeder with its Sink, and the
//     wire form of an item (EncodeItem, DecodeItem).
//   - maintenance: heavy-maintenance scheduling, independent of the rest — a staleness
//     picker that explains itself, an exclusive lease with a hard hold cap, an off-lease
//     second pass that runs each task on one replica at a time, soft gates, and a stall
//     gauge that survives restarts (ReadGauge reads it from the stored state alone).
//   - inspect: the operator's pages, an http.Handler over the index and the cycle and
//     poll reports — lanes and their waits, who goes next, one tenant's entries, the
//     maintenance gauge — with a JSON twin of each.
//
// Nested modules keep heavy dependencies out of the core: rota/postgres implements the
// Index, the Watchlist, the Entitlements, the Lease and the StateStore on PostgreSQL;
// rota/nats (package rotanats) queues items on NATS JetStream for workers anywhere;
// rota/otel (package rotaotel) exports OpenTelemetry metrics from the cycle and poll
// reports; rota/bench compares rota with the libraries users would otherwise pick.
//
// # Where to start
//
// Run go run ./examples/quickstart: the wiring of a service in memory — the index, the
// watch list, the plans, PlanLanes, the Dispatcher, the Bridge and the Runner — and four
// cycles on a fixed clock. A host writes two things: a bridge.Pipeline that polls one
// source, and that wiring. examples/daemon is the service to copy: the Runner and a
// maintenance Scheduler under bridge.RunAll and signal.NotifyContext, in memory or on
// PostgreSQL (postgres.OpenStores), SyncAll at start-up, the inspector's pages, a clean
// stop. examples/plans shows what a plan buys, examples/limits the
// per-tenant limits, examples/noisyneighbor how a noisy tenant is contained and what a
// cycle reads with a hundred thousand tenants waiting, examples/tiers how the cadences
// move, examples/maintenance the heavy jobs draining, and examples/workers a dispatcher
// feeding worker processes through NATS.
//
// Then read, in this order: cadence and tenancy (the vocabulary), duework (what is stored
// and the contract an adapter meets), dispatch (the fairness rules) and bridge, whose
// Runner is what a service starts.
//
// # Observing
//
// dispatch.Config.Observer hears every dispatch, bridge.RunnerConfig.Observer every Runner
// cycle and maintenance.Config.Observer every poll; each interface is one method, and an
// unset observer costs nothing. The Runner logs one line per cycle through log/slog, and
// watches each lane's wait: now − dispatch.LaneReport.WaitingSince, how long the lane keeps
// its longest-waiting ready tenant waiting. When it passes RunnerConfig.AlarmAfter a Warn
// line "rota: noisy neighbour" names the lane, the wait and the tenants crowding it; when
// a tenant's work is later than AlarmAfter (now − its oldest visible DueAt, which
// LaneReport.OldestDue gives per lane), another names the tenant. The maintenance
// Scheduler warns when its gauge turns Degraded. inspect.Inspector shows the same reports
// on a page, and rotaotel turns them into metrics with stable names and never a tenant ID
// in an attribute.
//
// # One machine or several
//
// On one machine everything can live in memory: duework.NewMemory,
// tenancy.NewMemoryWatchlist and tenancy.NewMemoryEntitlements, and for maintenance
// maintenance.NewMemoryLease and maintenance.NewMemoryStateStore. Memory holds nothing
// across a restart: the host adds its tenants' sources again at start-up (bridge.Bridge.Watch
// adds and schedules in one step).
//
// Replicas of one service, on several machines or in several processes, must share
// everything a dispatcher or a worker decides on: the Index, the Watchlist and the
// Entitlements — with a watch list of its own, a replica removes as gone the sources
// another has just added — and, for maintenance, the Lease and the StateStore. The postgres
// module has all five: every replica opens them with the same schema at start-up, which
// creates and migrates it once, and builds them over its own pool, and
// bridge.Bridge.SyncAll schedules whatever the shared watch list holds. The cadence
// Registry, the lanes and the plan tables stay in process and must be configured alike on
// every replica.
//
// Each read of a lane's queue holds the tenants it returns, so replicas that dispatch at
// the same moment read different tenants: lost claims are rare, no entry is handed out
// twice while its claim lasts, and fairness holds across their combined batches; the
// tenants' limits hold across them too, since the index keeps them. Every replica may
// sync at start-up, since a sync never replaces an entry. Each Runner hands back its work
// when it stops; a replica that dies hides its tenants for the dispatcher's HoldFor and
// its items for ClaimFor at most.
package rota
