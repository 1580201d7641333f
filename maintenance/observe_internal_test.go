package maintenance

import (
	"testing"
	"time"
)

func TestPostureTransitions(t *testing.T) {
	t0 := time.Date(2026, 6, 20, 12, 0, 0, 0, time.UTC)
	g := func(min int, p Posture) Gauge { return Gauge{At: t0.Add(time.Duration(min) * time.Minute), Posture: p} }
	var seen postureSeen
	steps := []struct {
		g                   Gauge
		degraded, recovered bool
		why                 string
	}{
		{g(0, PostureUnknown), false, false, "unknown says nothing"},
		{g(1, PostureDegraded), true, false, "the first known posture is a stall"},
		{g(2, PostureDegraded), false, false, "a stall is reported once"},
		{g(3, PostureUnknown), false, false, "unknown does not end it"},
		{g(4, PostureDegraded), false, false, "nor restart it"},
		{g(1, PostureHealthy), false, false, "an older gauge (a concurrent poll) changes nothing"},
		{g(5, PostureHealthy), false, true, "healthy ends it"},
		{g(5, PostureHealthy), false, false, "once"},
		{g(6, PostureDegraded), true, false, "a new stall is reported again"},
		{g(7, PostureDisabled), false, true, "disabled ends it too"},
	}
	for i, s := range steps {
		d, r := seen.transition(s.g)
		if d != s.degraded || r != s.recovered {
			t.Errorf("step %d (%s): degraded %v recovered %v, want %v %v", i+1, s.why, d, r, s.degraded, s.recovered)
		}
	}
}
