// Package realclock is the time package behind the Clock interfaces of bridge and
// maintenance, which share one method set so that one fake serves both in tests.
package realclock

import "time"

// Clock reads the time package. Its zero value is ready to use.
type Clock struct{}

// Now is time.Now.
func (Clock) Now() time.Time { return time.Now() }

// NewTicker is time.NewTicker, returned as its channel and its Stop.
func (Clock) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// AfterFunc is time.AfterFunc, returned as its timer's Stop.
func (Clock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
