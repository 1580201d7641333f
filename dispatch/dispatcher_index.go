package dispatch

import "github.com/rotaworks/rota/duework"

// Index returns the Index the Dispatcher dispatches from: what a feeder that hands items
// to a queue needs to hand back with Index.Unclaim the items it could not send.
func (d *Dispatcher) Index() duework.Index { return d.idx }
