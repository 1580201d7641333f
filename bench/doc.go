// Package bench holds rota's side-by-side benchmarks against the peers a user would
// otherwise pick: client-go's delaying workqueue in memory, and River on PostgreSQL. It is
// a nested module (github.com/rotaworks/rota/bench) so that the core never depends on
// them; it has no API, only benchmarks and the tests that keep them honest.
//
// # Running them
//
//	cd bench
//	go test -run='^$' -bench=. -count=5 -timeout=90m .    # the full figures
//	go test -run='^$' -bench=. -benchtime=1x .             # CI's smoke run, well under a minute
//
// The PostgreSQL benchmarks use ROTA_TEST_DATABASE_URL, or the local server
// (postgres://postgres@127.0.0.1:5432/test, trust auth), through the same test support
// as the postgres module's tests (github.com/rotaworks/rota/postgres/pgtest).
// Without a reachable server they skip with a message saying so, except under CI=true,
// where they fail. Each benchmark works in schemas of its own (bench_rota_…, bench_river_…),
// dropped when it ends, so rota and River share the server but never a table.
//
// # In memory: BenchmarkDrain
//
// The same work for each: n keys (10,000, 100,000, 1,000,000) spread over 1,000 tenants,
// key i due at a fixed offset in (0, 1 h] of every round. One op is one round: move the
// clock on by an hour, take every due key (all n), mark it done and reschedule it at its
// offset in the next round. keys/s, ns/key, allocs/key and B/key are per key, that is per
// dispatched item; B/op and allocs/op are per round.
//
//   - rota: duework.Memory and a dispatch.Dispatcher, one lane, cycles of up to 1,000 keys
//     and one key per tenant per cycle (each cycle serves every tenant once, so nothing
//     read is left over); a round dispatches at its now until a cycle hands out nothing,
//     and completes the items as the bridge's Runner does: one Index.CompleteMany per
//     100 (100) completions and one for the rest of each cycle. That
//     is the whole fair cycle — Ready, Select, Claim, CompleteMany — not just a
//     priority queue.
//   - workqueue: k8s.io/client-go/util/workqueue's typed delaying queue
//     (NewTypedDelayingQueueWithConfig) on a fake clock from k8s.io/utils/clock/testing.
//     Its delays are wall-clock based, so it is given the same virtual due times through
//     the clock it accepts for tests: each key goes in with AddAfter(key, offset); a round
//     steps the clock by an hour and Gets all n keys (Get blocks until the queue's waiting
//     loop has moved them from its heap to the FIFO), calling Done and AddAfter again. So
//     every key takes the queue's real path — AddAfter's channel, the waiting loop's heap,
//     the FIFO — and no wall-clock wait is measured. The step is more than the queue's 10 s
//     heartbeat, which guarantees the waiting loop wakes after it.
//   - heap: the floor, the least the round needs: the keys in a container/heap by due time;
//     a round pops every due key and pushes it back at its offset in the next round. No
//     tenants, no claims, no fencing tokens, no completions: what rota costs beyond it is
//     what its fairness and its claims cost.
//
// BenchmarkDrainPaired runs one round of each harness back to back in every op and reports
// rota-ns/key, workqueue-ns/key, heap-ns/key and rota's ratios rota/workqueue and
// rota/heap: on a shared machine whose load swings, the ratio measured op by op is the
// figure to trust.
//
// TestHarnessesDrainTheSameKeys checks that every harness takes exactly every key once per
// round. What differs is what each one does with them: the workqueue hands keys out in due
// order with no notion of tenant; rota hands them out in fair order (every tenant once per
// cycle, least recently served first) and keeps claims that expire, which is what its
// extra cost per key pays for.
//
// # On PostgreSQL: BenchmarkClaimComplete
//
// One op works 10,000 no-op jobs to completion; every side gets a pool of 16 connections
// and works up to 1,000 jobs at once.
//
//   - rota: what a host gets — a bridge.Runner over the postgres adapter's Index and
//     Watchlist, 10,000 watched sources of 100 tenants scheduled with SyncTenants, and a
//     pipeline that does nothing. The op calls Runner.Cycle until a cycle hands out
//     nothing: one dispatch of up to 1,000 items (ten per tenant), their watchlist entries
//     read in one Watchlist.GetMany, each item on one of 1,000 workers (River's MaxWorkers)
//     with its claim started by Index.StartClaims, one call for the items that get a worker
//     together, and the completions written with Index.CompleteMany, one call in flight at
//     a time: the first once 100 wait, the next with everything that came meanwhile.
//     rota's work recurs, so the next op, two hours later, finds all 10,000 due again.
//   - rota-dispatch: the same cycles without the Runner: Dispatch, then the completions
//     added on 16 workers and written as the Runner writes them. The difference to rota is
//     what the Runner itself costs.
//   - river: 10,000 jobs inserted with InsertManyFast while the client is stopped (not
//     timed); the op starts the client (MaxWorkers 1,000) and ends when the last
//     job_completed event arrives, which River sends after writing the completion. River's
//     FetchCooldown defaults to 100 ms; river-cooldown=1ms is the same with its minimum.
//
// # On PostgreSQL: BenchmarkQuietWait
//
// One tenant enqueues a backlog of 200,000 items first, then 100 quiet tenants one item
// each. How long until every quiet item is handed out? Per op: cycles, s-to-last-quiet
// (wall-clock seconds from the first dispatch, or from the client's start, until the last
// quiet item is handed out, or starts) and handed-out (items handed out up to and including
// the last quiet one).
//
//   - rota: the backlog COPY-loaded due first, the quiet items scheduled through the Index
//     due a second later; one lane of 1,000 per cycle, the per-tenant limit also 1,000 (the
//     noisy tenant may take a whole cycle when nobody else is due); each cycle's items are
//     completed, in batches as the Runner writes them, before the next cycle. The first
//     cycle serves every tenant with due work once, so all 100 quiet items go out in
//     cycle 1.
//   - river: the backlog, then the quiet jobs, inserted with InsertManyFast in that order,
//     one queue, one priority; the client (MaxWorkers 1,000, default fetch cooldown) works
//     them and each job notes when it starts. River orders jobs by (priority, scheduled_at,
//     id) and knows nothing of tenants, so the quiet jobs start after the backlog. River has
//     no cycles: its cycles figure is the number of 1,000-job fetches that many started
//     jobs take at the least.
//
// TestQuietWaitScenario runs both sides at a backlog of 3,000 and checks the premise: rota
// hands out every quiet item in the first cycle, River starts them behind the backlog.
//
// Building the 200,000-entry backlog through the Index API would take minutes, so it is
// loaded with COPY straight into the adapter's tables (pgtest.LoadDue, as the postgres
// module's own benchmarks do) and then read back through the Index, so that a change of
// the schema fails the benchmark instead of skewing it.
//
// # Smoke runs
//
// CI runs every benchmark once (-benchtime=1x). At that setting the two largest fixtures
// are bounded so that the whole module finishes in well under a minute: BenchmarkDrain and
// BenchmarkDrainPaired stop at n = 100,000 (n = 1,000,000 costs tens of seconds per op and
// its fixture several more), and BenchmarkQuietWait uses a backlog of 20,000; the
// sub-benchmark names carry the sizes, so a smoke figure is never mistaken for a full one.
// The code run is the same.
//
// # Versions
//
// client-go v0.35.10 and River v0.44.1: the newest releases whose go.mod accepts the go
// 1.25 line of rota's modules and go.work. Later ones (client-go v0.36 and up, River v0.45
// and up) require go 1.26; moving to them means raising the workspace's go line.
package bench
