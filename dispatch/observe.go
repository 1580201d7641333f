package dispatch

import "time"

// Observer is told about every dispatch cycle of a Dispatcher whose Config.Observer it is:
// a logger, a metrics exporter (the rota/otel module has one), a test's recorder.
//
// ObserveDispatch is called once per cycle, failed cycles included, synchronously, before
// Dispatch returns, from the goroutine that dispatched; a Dispatcher used from several
// goroutines calls it from each, so an Observer shared that way must be safe for
// concurrent use. It must not modify the Batch's slices, which are the caller's, and should
// return quickly: the cycle's claims are running.
type Observer interface {
	ObserveDispatch(CycleInfo)
}

// CycleInfo is what one dispatch cycle reports to its Observer. A Dispatcher reads no
// clock, so a cycle's duration is measured by whoever drives it.
type CycleInfo struct {
	// Now is the cycle's now.
	Now time.Time
	// Batch is what Dispatch returns: the zero Batch when Err is not nil.
	Batch Batch
	// Err is the cycle's error, as Dispatch returns it.
	Err error
}
