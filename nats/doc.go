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
//	sink, err := rotanats.NewSink(js, dispatchConfig, rotanats.Config{})
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
// One stream (work-queue retention: a message leaves it once acknowledged; a duplicate
// window of ClaimFor) takes the subjects Subject.<lane token> (see [LaneToken]); each
// lane has one durable pull consumer that every worker process shares, with explicit
// acknowledgement, AckWait ClaimFor + [AckSlack] and MaxAckPending as the lane's
// in-flight bound across the fleet. Each message is one item in bridge.EncodeItem's wire
// form ([Sink.Send]).
//
// The index, not the broker, decides what runs: a Consumer acknowledges each message once
// the Worker is done with it, run or not, and the Worker starts an item only once
// Index.StartClaims has started its claim ([Consumer.Run]). So no broker setting — AckWait,
// the duplicate window, redeliveries — can make a claim run twice or lose an entry.
//
// # Backpressure
//
// [Sink.Room] bounds each lane's queue by what its workers can start before the claims
// end, counted across every process, so when the workers stop the dispatcher stops
// claiming, and when they come back they find the queue as deep as they can start. Lane
// priority stays the dispatcher's: the consumers take every lane's messages side by side.
//
// # What it costs
//
// Per item: one publish awaited with others (Send waits for up to [MaxSendBatch] at once),
// one delivery in a pull of up to InHand messages, one acknowledgement; the Worker's claim
// starts and completions are batched as in the Runner. Per Feeder round: one Room (see
// its cost). What the workers hold (InHand per lane per process) and the pull wait
// (FetchWait) bound how long a stopped Consumer takes to let go.
package rotanats
