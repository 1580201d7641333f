// Package rotadynamo runs rota on Amazon DynamoDB: the due-work Index, the Watchlist, the
// Entitlements, the maintenance Lease and the StateStore, on one table that every process
// of a service shares — dispatchers, workers and maintenance daemons on any number of
// machines or Lambda functions.
//
// It is a nested module (github.com/rotaworks/rota/dynamodb) so that the core stays free of
// dependencies: it imports the core and the AWS SDK for Go v2, never the reverse.
//
// # Where to start
//
// OpenStores, at start-up on every process: it creates the table (on-demand capacity)
// and its indexes when they do not exist, or checks the ones that do, and builds the five
// stores over it.
//
//	awsCfg, err := config.LoadDefaultConfig(ctx)
//	...
//	st, err := rotadynamo.OpenStores(ctx, dynamodb.NewFromConfig(awsCfg), "rota", rotadynamo.StoresConfig{Buckets: 4})
//	...
//	d, err := dispatch.New(st.Index, dispatch.Config{...}) // st.Index is a duework.Index
//	// st.Watchlist is a tenancy.Watchlist, st.Entitlements a tenancy.Entitlements,
//	// st.Lease and st.StateStore a maintenance.Lease and StateStore.
//
// Every process sharing a table gives the same StoresConfig. Buckets spreads each lane's
// queue over that many partitions; the README (dynamodb/README.md in the repository) says
// how many a lane needs for its serve rate, draws the items and indexes, and gives what
// every call reads, writes and costs. Stores.Capacity counts the units the stores have
// consumed.
//
// All five pass the core's conformance suites (duework/indextest, tenancy/tenancytest,
// maintenance/maintenancetest) against DynamoDB Local, with one bucket and with several.
//
// # What it guarantees, and how
//
// The contracts are the core's, fleet-wide: DynamoDB serializes what the processes write.
// Every write of a user's entries, limits or pause is one TransactWriteItems of those
// entries and the user's own item, conditional on the version of the user item it read;
// a process that loses a race reads again and retries. So a user's in-flight cap and rate
// hold whoever claims, and its place in its queue is always exact.
//
// Ready reads a lane's queue from a global index, which DynamoDB keeps eventually
// consistent: it may be a little behind. So Ready holds each user it returns with a
// conditional write of the user's item — its place in the queue still as read, not held —
// and skips the user when the condition fails: a stale read costs a user skipped (read
// again at the next cycle), never a user read by two dispatchers nor an entry claimed
// twice. Everything that decides a claim or a completion is read strongly consistent from
// the table and its local indexes.
//
// A claim's token is unique among all the claims of its user's entries, even of an entry
// removed and scheduled again, and carries a hash of the user's ID in its low bits, so a
// claim naming one user's entry with another user's token is refused as forged (save for
// one pair of users in millions whose hashes meet).
//
// Times are kept to the nanosecond. DynamoDB has no clock of its own: every instant is the
// caller's now, so processes whose clocks disagree disagree by as much (see
// dispatch.Config.MaxClockSkew).
//
// # Choices where the contracts leave room
//
//   - Batches larger than a transaction: a Claim of more than 99 keys of one user, or a
//     CompleteMany or Unclaim of more than 99 of its items, goes in several transactions,
//     each atomic for its user. ScheduleMissing likewise, per 99 entries. Watchlist.AddMany
//     and AddAll and Entitlements.SetPlans check everything first and then write in
//     batches of 25, so a call that fails midway (a done ctx, a lost connection) may have
//     written part of its batch.
//   - DueBefore, Groups, Paused and Watchlist.Tenants read global indexes, so they may be
//     up to about a second behind the writes; Ready too, with the consequences above.
//   - A StateStore Save or Update writes at most 98 distinct tasks (a transaction's 100
//     actions, less the fence and the lease).
//   - A write that loses a race to another reads again and tries again, with pauses of a
//     few milliseconds that grow, 64 times at most; then its call fails and writes
//     nothing more. Only a user written by dozens of processes at once comes near that.
//   - Capacity counts what DynamoDB reports; a write refused by its condition reports
//     nothing and is counted at the one unit it is billed.
//
// # Running the tests
//
// The tests need a DynamoDB endpoint: ROTA_TEST_DYNAMODB_ENDPOINT, by default
// http://127.0.0.1:8000, where the repository's .ci/services starts DynamoDB Local. Each
// test uses a table of its own, with a random name, deleted when it ends. Without a
// reachable endpoint the tests skip with a message saying so, except under CI (CI=true),
// where they fail.
package rotadynamo
