// Package rotanats runs rota's items on workers anywhere, through NATS JetStream: one
// dispatcher process claims due work fairly and queues it, and any number of worker
// processes run it, with the guarantees of the in-process bridge.Runner — no entry
// claimed twice, no claim run twice, no run past its claim, nothing lost when a worker
// dies.
//
// # Wiring
//
// Both sides take their lanes and ClaimFor from the dispatcher's dispatch.Config, so
// build it in code both share; a [Config] adds the queue's own knobs, all optional.
//
// The dispatcher process hands a [Sink] to a bridge.Feeder:
//
//	d, err := dispatch.New(idx, dispatchConfig)
//	sink, err := rotanats.NewSink(js, d, rotanats.Config{})
//	feeder, err := bridge.NewFeeder(d, sink, bridge.FeederConfig{})
//	err = feeder.Run(ctx)
//
// Each worker process, on a NATS connection of its own, runs a [Consumer] that feeds a
// bridge.Worker and stops it:
//
//	w, err := bridge.NewWorker(&bridge.Bridge{Index: idx, Watchlist: wl, Pipeline: p}, bridge.WorkerConfig{})
//	c, err := rotanats.NewConsumer(js, w, dispatchConfig, rotanats.Config{})
//	err = c.Run(ctx) // until ctx ends, then the Worker's stop
//
// Every process reaches the same Index and Watchlist (PostgreSQL, say): the dispatcher
// claims, the workers start claims, run and write completions.
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
// outcome ([Consumer.Run]). The index, not the broker, decides what runs: Do starts an
// item only once Index.StartClaims has started its claim, so a redelivered or duplicated
// message is acknowledged unrun, whatever AckWait or the duplicate window; what a dead
// worker held comes back once its claim has ended and is dropped. [Sink.Room] purges
// messages on subjects that are no lane's; a message that does not decode is terminated.
//
// # Backpressure
//
// [Sink.Room] gives each lane what its consumers can start before the claims end, less
// what the lane holds unacknowledged, read from the lane's consumer so that it counts
// every process's sends and receipts, after dropping the lane's stale messages; a lane no
// worker pulls from or holds gets none. So when the workers stop, the dispatcher stops
// claiming: each lane's queue holds at most its capacity, no entry is queued twice, and
// when the workers come back they find the queue as deep as they can start. Lane
// priority stays the dispatcher's: the consumers take every lane's messages side by side.
//
// # What it costs
//
// Per item: one publish awaited with others (Send waits for up to [MaxSendBatch] at once),
// one delivery in a pull of up to InHand messages, one acknowledgement; the Worker's claim
// starts and completions are batched as in the Runner. Per Feeder round: one consumer
// read per lane and one message read for each lane that holds messages, and a stream read
// every [StrayCheckEvery]. What the workers hold (InHand per lane per process) and the
// pull wait (FetchWait) bound how long a stopped Consumer takes to let go.
package rotanats
