// Package rotanats runs rota's items on workers anywhere, through NATS JetStream: one
// dispatcher process claims due work fairly and queues it, and any number of worker
// processes run it, with the guarantees of the in-process bridge.Runner — no entry
// claimed twice, no run past its claim, nothing lost when a worker dies.
//
// # Wiring
//
// Both sides share one [Config]: the lanes, the Dispatcher's ClaimFor and, optionally,
// the stream's name and the subjects' prefix.
//
//	cfg := rotanats.Config{Lanes: []dispatch.Lane{"paid", "free"}, ClaimFor: time.Minute}
//
// The dispatcher process hands a [Sink] to a bridge.Feeder:
//
//	sink, err := rotanats.NewSink(js, cfg)
//	feeder, err := bridge.NewFeeder(dispatcher, sink, bridge.FeederConfig{})
//	err = feeder.Run(ctx)
//
// Each worker process, on a NATS connection of its own, runs a [Consumer] that feeds a
// bridge.Worker:
//
//	w, err := bridge.NewWorker(&bridge.Bridge{Index: idx, Watchlist: wl, Pipeline: p}, bridge.WorkerConfig{})
//	c, err := rotanats.NewConsumer(js, w, cfg)
//	err = c.Run(ctx)        // until ctx ends
//	err = w.Stop(stopCtx)   // then drain and flush, within stopCtx
//
// Every process reaches the same Index and Watchlist (PostgreSQL, say): the dispatcher
// claims, the workers check claims, run and write completions.
//
// # The queue
//
// One stream (work-queue retention: a message leaves it once acknowledged) takes the
// subjects Subject.<lane token> (see [LaneToken]); each lane has one durable pull
// consumer that every worker process shares, with explicit acknowledgement, AckWait
// ClaimFor + [AckSlack] and MaxAckPending as the lane's in-flight bound across the fleet.
// Each message is one item in bridge.EncodeItem's wire form, with a Nats-Msg-Id of its
// user, work key and claim token, so a retried publish is stored once.
//
// A Consumer acknowledges a message once Worker.Do has returned for it, whatever the
// outcome: what Do could not write stays claimed until its claim ends and is then
// dispatched again. A message redelivered after its worker died carries a claim that has
// ended by then (AckWait exceeds ClaimFor); Do hands it back unrun and the message is
// dropped. A message that does not decode is terminated and logged.
//
// # Backpressure
//
// [Sink.Room] gives each lane what its consumers can start before the claims end —
// MaxAckPending × (ClaimFor − ClaimMargin) / RunTime, or MaxAckPending alone when RunTime
// is zero — less what the lane holds unacknowledged, read from the lane's consumer so that
// it counts every process's sends and receipts. It drops the lane's stale messages (claims
// ended or ending within ClaimMargin) first, and gives no room to a lane no worker pulls
// from or holds. So when the workers stop, the dispatcher stops claiming: each lane's
// queue holds at most its capacity, no entry is queued twice, and when the workers come
// back they find the queue as deep as they can start. Lane priority stays the
// dispatcher's: the consumers take every lane's messages side by side.
//
// # What it costs
//
// Per item: one publish awaited with others (Send waits for up to [MaxSendBatch] at once),
// one delivery in a pull of up to InHand messages, one acknowledgement; the Worker's claim
// checks and completions are batched as in the Runner. Per Feeder round: one consumer
// read per lane and one message read for each lane that holds messages. What the workers
// hold (InHand per lane per process) and the pull wait (FetchWait) bound how long a
// stopped Consumer takes to let go.
//
// Room's bound holds for one dispatcher; several dispatchers feeding one stream may queue
// their number times the capacity.
package rotanats
