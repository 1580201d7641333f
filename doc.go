// Package rota runs recurring, per-tenant work fairly: every watched source is polled on an
// adaptive cadence, every cycle hands out a bounded batch of due work in priority lanes
// without letting one noisy tenant starve the rest, and the heavy maintenance jobs that
// share one exclusive lease drain to idle in bounded time.
//
// This package holds no code; it is the map. The work happens in the packages below, and
// the runtime packages import nothing but the standard library.
//
// # Words
//
// A tenant is one customer of the host's service, and a source one thing polled for it — a
// feed, a mailbox, an account at someone else's API — named by a slug on the tenant's
// watch list. The due-work index and the dispatcher call a tenant a user: UserID, a
// Head's user, ShedUserIDs and every other "user" in duework and dispatch is a tenant,
// named by the ID of its tenancy.Context, and a due-work entry's WorkKey is its source's
// slug. A tier names a source's cadence, a lane a priority class of tenants (usually one
// per plan), a cycle one round of dispatch, and an item one claimed entry on its way to
// the host's pipeline.
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
// Time is never read inside the core: every operation takes now as an argument. Only the
// bridge's Runner, Worker and Feeder and the maintenance Scheduler own a clock, and each
// takes one in its config for tests.
//
// # The packages
//
//   - cadence: pure policies over a miss streak (Backoff), the tier presets, a Registry
//     resolving tier names, and deterministic Jitter.
//   - tenancy: the validated tenant Context, deny-by-default Repository and Watchlist
//     (another tenant's row is simply not found), plans and Entitlements.
//   - duework: the due-work Entry (scheduling metadata only, no payload), the Index
//     contract with its turn queues, claims and per-tenant limits, the in-memory Memory
//     index, and Advance.
//   - dispatch: fair-share lane dispatch — Select, a pure function that does all the
//     fairness work, and the Dispatcher that reads the queues, selects and claims.
//   - bridge: the host's side — syncing watch lists into due work, running an item
//     through the host's Pipeline, plans to lanes and limits, the Runner, and for workers
//     in other processes the Worker, the Feeder and the items' wire form.
//   - maintenance: heavy-maintenance scheduling, independent of the rest — a picker that
//     explains itself, an exclusive lease with a hard hold cap, an off-lease second pass,
//     soft gates, and a stall gauge that survives restarts.
//   - inspect: the operator's page, an http.Handler over the index and the reports.
//
// duework/indextest, tenancy/tenancytest, maintenance/maintenancetest and
// inspect/inspecttest are the conformance suites an adapter runs. Nested modules keep heavy
// dependencies out of the core and import it, never the reverse: rota/postgres
// implements every store on PostgreSQL and rota/dynamodb (package rotadynamo) on
// DynamoDB, rota/nats (package rotanats) and rota/sqs (package rotasqs) queue items for
// workers anywhere, rota/lambda (package rotalambda) holds the AWS Lambda handlers,
// rota/otel (package rotaotel) exports OpenTelemetry metrics, and rota/bench compares rota
// with the libraries users would otherwise pick.
//
// # Where to start
//
// Run go run ./examples/quickstart: the wiring of a service in memory — the index, the
// watch list, the plans, the Dispatcher, the Bridge and the Runner — and four cycles on a
// fixed clock. A host writes two things: a bridge.Pipeline that polls one source, and that
// wiring. examples/daemon is the service to copy: the Runner and a maintenance Scheduler
// under bridge.RunAll, in memory or on PostgreSQL, the operator's page, a clean stop. The
// other examples each show one thing: plans, limits, a noisy neighbour, cadences,
// maintenance, workers through NATS.
//
// Then read, in this order: cadence and tenancy (the vocabulary), duework (what is stored
// and the contract an adapter meets), dispatch (the fairness rules) and bridge, whose
// Runner is what a service starts. The repository's docs directory has one page per topic
// that spans packages: limits per tenant, workers elsewhere, the operator's page,
// observing, several replicas and PostgreSQL.
package rota
