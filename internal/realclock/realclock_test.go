package realclock_test

import (
	"testing"
	"time"

	"github.com/rotaworks/rota/internal/realclock"
)

// The real clock ticks, fires and stops as the time package does.
func TestClockTicksFiresAndStops(t *testing.T) {
	var c realclock.Clock
	before := time.Now()
	if now := c.Now(); now.Before(before) {
		t.Fatalf("Now %v is before %v", now, before)
	}
	ticks, stop := c.NewTicker(time.Millisecond)
	<-ticks
	stop()
	fired := make(chan struct{})
	c.AfterFunc(time.Millisecond, func() { close(fired) })
	<-fired
	if c.AfterFunc(time.Hour, func() { t.Error("a stopped timer fired") })() != true {
		t.Fatal("stopping a pending timer reported that it had already fired")
	}
}
