package maintenance

import "github.com/rotaworks/rota/internal/clock"

// Clock is Run's only source of time: the narrowest interface its loop needs. A nil
// Config.Clock means the time package. Its methods are those of the time package: Now is
// time.Now; NewTicker(d) returns a channel that receives the time every d, dropping ticks
// a slow reader misses, and its stop; and AfterFunc(d, f) runs f in its own goroutine once
// d has passed unless stop, which reports whether it prevented that, is called first. It
// is the same type as bridge.Clock, so one fake serves both: tests pass one they step by
// hand, or run Run inside a testing/synctest bubble with the real one. Poll, Renew and
// Complete take now and never read a clock.
type Clock = clock.Clock
