// Package rotasqs runs rota's items on workers anywhere through Amazon SQS: one dispatcher
// claims due work fairly and queues it, one queue per lane, and any number of worker
// processes — or Lambda functions, see package rotalambda — run it, with the guarantees of
// the in-process bridge.Runner: no entry claimed twice, no run past its claim, nothing
// lost when a worker dies.
//
// # Wiring
//
// Both sides read the lanes and the claims' length from the Dispatcher's dispatch.Config,
// so the queues cannot disagree with what is dispatched, and share one [Config] for the
// rest:
//
//	dc := dispatch.Config{Lanes: lanes, GlobalBatchLimit: 300, LaneFor: laneFor, ClaimFor: time.Minute}
//	cfg := rotasqs.Config{InFlight: 32}
//
// The dispatcher process hands a [Sink] to a bridge.Feeder:
//
//	d, err := dispatch.New(idx, dc)
//	sink, err := rotasqs.NewSink(client, dc, cfg)
//	feeder, err := bridge.NewFeeder(d, sink, bridge.FeederConfig{})
//	err = feeder.Run(ctx)
//
// Each worker process runs a [Consumer] that feeds a bridge.Worker:
//
//	w, err := bridge.NewWorker(&bridge.Bridge{Index: idx, Watchlist: wl, Pipeline: p}, bridge.WorkerConfig{})
//	c, err := rotasqs.NewConsumer(client, w, dc, cfg)
//	err = c.Run(ctx)        // until ctx ends
//	err = w.Stop(stopCtx)   // then drain and flush, within stopCtx
//
// client is an *sqs.Client of github.com/aws/aws-sdk-go-v2/service/sqs. Every process
// reaches the same Index and Watchlist: the dispatcher claims, the workers start claims,
// run and write completions.
//
// # The queues
//
// Lane L's items go to the standard queue named Config.QueueName(L), created when missing
// with a visibility timeout that outlasts every claim. Each message is one item in
// bridge.EncodeItem's wire form, with its tenant as its MessageGroupId ([GroupID]), so
// that SQS fair queues keep one tenant's backlog from delaying the others' in a lane.
//
// A Consumer deletes a message once Worker.Do has returned for it, whatever the outcome:
// what Do could not write stays claimed until its claim ends and is then dispatched again.
// A received message stays invisible while its claim can run, so it is not delivered again
// while it may be running; a message a dead worker held comes back once its claim has
// ended, and is dropped unrun. A copy delivered twice (SQS delivers at least once) runs
// once: the Worker starts an item only when the index says no copy has. Messages that do
// not decode, and forged ones, are deleted unrun and logged, a few lines at most.
//
// # Backpressure
//
// [Sink.Room] gives each lane what its workers can start before the claims end —
// InFlight × (ClaimFor − margin) / RunTime, or InFlight alone when RunTime is zero — less
// what its queue holds, visible, in flight or delayed. SQS does not show who consumes a
// queue, so a lane whose messages are all visible, none in flight, has no room: no worker
// is receiving them. When the workers stop, the dispatcher stops claiming once the queue
// holds what it had room for (the bridge.Feeder then says that no worker is taking the
// lane); when they come back, they drop the messages whose claims ended meanwhile and the
// entries are dispatched again. Lane priority stays the dispatcher's: a Consumer receives
// every lane's messages side by side.
//
// # What it costs
//
// Per item: a tenth of a SendMessageBatch, of a ReceiveMessage and of a
// DeleteMessageBatch, and of a ChangeMessageVisibilityBatch for an item that waited in
// its queue for over a quarter of ClaimFor; the Worker's claim starts and completions are
// batched as in the Runner. Per Feeder round: one GetQueueAttributes per lane. An idle
// lane costs each Consumer one empty receive per WaitTime, and every ScanEvery one
// ListQueues. The counts SQS reports are approximate, and so is Room's bound; with several
// dispatchers feeding one set of queues the bound is their number times the capacity.
package rotasqs
