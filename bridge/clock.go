package bridge

import "github.com/rotaworks/rota/internal/clock"

// Clock is where the Runner, Worker and Feeder read time: their cycles' now, their
// tickers, and the timers that end items, flush completions and bound a stop. Nil in
// RunnerConfig, WorkerConfig or FeederConfig means the time package. Its methods are
// those of the time package: Now is time.Now; NewTicker(d) returns a channel that
// receives the time every d, dropping ticks a slow reader misses, and its stop; and
// AfterFunc(d, f) runs f in its own goroutine once d has passed unless stop, which
// reports whether it prevented that, is called first. It is the same type as
// maintenance.Clock, so one fake serves both: a test passes one it steps by hand, or
// runs the real clock in a testing/synctest bubble.
//
// On the real clock an item's pipeline context carries its end as a Deadline; on any
// other clock it ends by a timer of that clock and has no Deadline.
type Clock = clock.Clock
