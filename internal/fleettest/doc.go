// Package fleettest is the test support the queue adapters' fleet tests share: a fleet of
// worker processes consuming a queue that one dispatcher feeds, over one index, and the
// checks run on what they did. It is imported by tests only, never by a runtime package,
// and uses only the standard library and the rota core, so that every module's tests may
// import it (Go's internal rule goes by import path).
//
// # Where to start
//
// [RunLog] is the heart of it: its [RunLog.Pipeline] records each run of a source — which
// runner, when it started and ended — and fails the test at once when a run starts while
// another run of the same source is under way; [RunLog.CheckEachRanAlone] checks the
// record afterwards, and [Jain] scores how evenly the runs were shared.
//
// A queue adapter's tests build a [Store] (the index, watchlist and plans the processes
// share, and the tenants' sources), a [Fleet] over their Sink, which it wraps in a
// [WatchedSink] to catch a lane sent more than its room, and one [Worker] per process:
// the adapter's consumer feeding a bridge.Worker over a [MortalIndex], which
// [Worker.Kill] kills as a SIGKILL would ([Victim] kills one in the middle of a run).
// What differs between queues — connecting, declaring, draining, reading a queue's depth,
// how long a dead worker's messages take to come back — stays in the adapter's tests.
//
// [BenchBed] is the data and the timed round of the benchmarks that compare a queue with
// the in-process bridge.Runner.
//
// # Cost
//
// Everything runs on the real clock: the fleet tests assert what must hold whatever the
// machine's load (who ran what, what the index holds afterwards), never how fast.
// [WaitFor] and the waits built on it poll every 20 ms under a bound that only a hang
// reaches.
package fleettest
