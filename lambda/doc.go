// Package rotalambda runs rota on AWS Lambda: handlers that a function registers with
// lambda.Start (github.com/aws/aws-lambda-go), each a plain function of a context and an
// event, so that it can be called and tested without AWS.
//
// # Where to start
//
// A service whose workers are Lambda functions has two:
//
//   - a dispatching function, invoked every minute by an EventBridge Scheduler schedule,
//     whose handler is [DispatchHandler] over a bridge.Feeder and a rotasqs.Sink: each
//     invocation claims due work fairly, at most what the lane queues have room for, and
//     queues it;
//   - a worker function per lane queue, invoked by an SQS event source mapping with
//     ReportBatchItemFailures, whose handler is [WorkerHandler] over a bridge.Worker: it
//     runs each message's item and names in its response only the messages whose outcome
//     was not written.
//
// A small service can do both in one function: [RunHandler] over a bridge.Runner runs
// one dispatch and its items per invocation.
//
//	func main() {
//		idx, wl := openStores()                    // shared by every function
//		w, err := bridge.NewWorker(&bridge.Bridge{Index: idx, Watchlist: wl, Pipeline: p}, bridge.WorkerConfig{})
//		if err != nil {
//			log.Fatal(err)
//		}
//		lambda.Start(rotalambda.WorkerHandler(w))
//	}
//
// Build the Feeder, Runner or Worker once, outside the handler: a function's instance
// serves many invocations, and the Worker batches the writes of the items that run at
// once. A Worker is never stopped; what an instance frozen or ended mid-write did not
// write stays claimed until its claim ends, and is then dispatched again.
//
// # Deadlines
//
// Each handler ends its work a little before the invocation's deadline (see Reserve), so
// that what it must write is written while the function runs. A run is bounded by its
// claim too, so give worker functions a timeout above the Dispatcher's ClaimFor, and the
// queues a visibility timeout at least that (rotasqs creates them so).
//
// # What it costs
//
// A handler adds nothing to what the Feeder, Runner or Worker costs: per item, a share of
// the Worker's claim starts and completion writes; per dispatch, one Feed round. Messages
// that cannot run are deleted with their batch, never retried.
package rotalambda
