package fakeclock_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/internal/fakeclock"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Advance fires tickers and timers in time order, each at its own instant, and timers
// registered at one instant in registration order; it ends at now + d.
func TestAdvanceFiresInTimeOrder(t *testing.T) {
	clk := fakeclock.New(t0)
	var mu sync.Mutex
	var got []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, s+"@"+clk.Now().Sub(t0).String())
	}
	ticks, stop := clk.NewTicker(40 * time.Second)
	defer stop()
	clk.AfterFunc(time.Minute, func() { note("b") })
	clk.AfterFunc(30*time.Second, func() { note("a") })
	clk.AfterFunc(time.Minute, func() { note("c") })
	clk.Advance(50 * time.Second)
	if at := <-ticks; !at.Equal(t0.Add(40 * time.Second)) {
		t.Fatalf("tick at %v, want +40s", at.Sub(t0))
	}
	clk.Advance(50 * time.Second)
	if at := <-ticks; !at.Equal(t0.Add(80 * time.Second)) {
		t.Fatalf("tick at %v, want +1m20s", at.Sub(t0))
	}
	if want := []string{"a@30s", "b@1m0s", "c@1m0s"}; !slices.Equal(got, want) {
		t.Fatalf("timers fired %v, want %v", got, want)
	}
	if now := clk.Now(); !now.Equal(t0.Add(100 * time.Second)) {
		t.Fatalf("Now after Advance = %v, want +1m40s", now.Sub(t0))
	}
}

// An unread ticker holds one tick and drops the rest, like time.Ticker.
func TestTickerDropsUnreadTicks(t *testing.T) {
	clk := fakeclock.New(t0)
	ticks, stop := clk.NewTicker(time.Second)
	clk.Advance(5 * time.Second)
	if at := <-ticks; !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("the held tick is the first: %v", at.Sub(t0))
	}
	select {
	case at := <-ticks:
		t.Fatalf("a dropped tick arrived: %v", at.Sub(t0))
	default:
	}
	stop()
	clk.Advance(5 * time.Second)
	select {
	case at := <-ticks:
		t.Fatalf("a stopped ticker ticked: %v", at.Sub(t0))
	default:
	}
}

// A timer registered by a timer's function fires in the same Advance when it falls due
// before its end; stop reports whether it prevented the call.
func TestTimersChainAndStop(t *testing.T) {
	clk := fakeclock.New(t0)
	var fired []time.Duration
	clk.AfterFunc(time.Second, func() {
		fired = append(fired, clk.Now().Sub(t0))
		clk.AfterFunc(time.Second, func() { fired = append(fired, clk.Now().Sub(t0)) })
	})
	stop := clk.AfterFunc(3*time.Second, func() { t.Error("a stopped timer fired") })
	if !stop() || stop() {
		t.Fatal("stop reports true once, for a pending timer")
	}
	clk.Advance(10 * time.Second)
	if want := []time.Duration{time.Second, 2 * time.Second}; !slices.Equal(fired, want) {
		t.Fatalf("fired at %v, want %v", fired, want)
	}
	late := clk.AfterFunc(time.Second, func() {})
	clk.Advance(time.Second)
	if late() {
		t.Fatal("stop of a fired timer reports false")
	}
}

// AfterFunc with d ≤ 0 calls f at once, without an Advance.
func TestAfterFuncNow(t *testing.T) {
	clk := fakeclock.New(t0)
	done := make(chan struct{})
	if stop := clk.AfterFunc(0, func() { close(done) }); stop() {
		t.Fatal("stop of an immediate call reports false")
	}
	<-done
	if tk, tm := clk.Live(); tk != 0 || tm != 0 {
		t.Fatalf("an immediate call leaves nothing pending: %d tickers, %d timers", tk, tm)
	}
}

// Wait returns once the goroutine under test has started what the test waits for, and
// again once it has stopped it.
func TestWait(t *testing.T) {
	clk := fakeclock.New(t0)
	release := make(chan struct{})
	go func() {
		_, stop := clk.NewTicker(time.Second)
		halt := clk.AfterFunc(time.Hour, func() {})
		<-release
		stop()
		halt()
	}()
	clk.Wait(1, 1)
	if tk, tm := clk.Live(); tk != 1 || tm != 1 {
		t.Fatalf("Live = %d, %d after Wait(1, 1)", tk, tm)
	}
	close(release)
	clk.Wait(0, 0)
}

func TestNewTickerPanicsOnNonPositive(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("NewTicker(0) did not panic")
		}
	}()
	fakeclock.New(t0).NewTicker(0)
}
