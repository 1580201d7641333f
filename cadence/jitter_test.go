package cadence

import (
	"fmt"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var t0 = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

func TestJitterDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		key := rapid.String().Draw(t, "key")
		at := time.Unix(0, rapid.Int64().Draw(t, "at"))
		d := time.Duration(rapid.Int64Range(0, math.MaxInt64).Draw(t, "d"))
		fraction := rapid.Float64Range(0, 1).Draw(t, "fraction")
		a := Jitter(key, at, d, fraction)
		// The same instant in another location, and a string with its own backing array,
		// give the same answer: only the values count.
		b := Jitter(string([]byte(key)), at.In(time.FixedZone("X", 3600)), d, fraction)
		if a != b {
			t.Fatalf("Jitter(%q, %v, %v, %v) = %v, then %v: not deterministic", key, at, d, fraction, a, b)
		}
	})
}

// TestJitterPinned pins the hash: every replica and every release must compute the same
// offsets, or a rolling upgrade would reshuffle everyone's schedule.
func TestJitterPinned(t *testing.T) {
	tests := []struct {
		key  string
		want time.Duration
	}{
		{"alice/acme-jobs", 1117981947796},
		{"bob/acme-jobs", 3189390091071},
		{"", 2425457288981},
	}
	for _, tt := range tests {
		if got := Jitter(tt.key, t0, time.Hour, 1); got != tt.want {
			t.Errorf("Jitter(%q, t0, 1h, 1) = %d, want %d: the stable hash changed", tt.key, got, tt.want)
		}
	}
}

func TestJitterWithinFraction(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		key := rapid.String().Draw(t, "key")
		at := time.Unix(rapid.Int64Range(-1<<40, 1<<40).Draw(t, "sec"), 0)
		d := time.Duration(rapid.OneOf(
			rapid.Int64Range(math.MinInt64, math.MaxInt64),
			rapid.Int64Range(0, int64(time.Hour)),
			rapid.SampledFrom([]int64{0, 1, 2, math.MaxInt64}),
		).Draw(t, "d"))
		fraction := rapid.OneOf(
			rapid.Float64Range(0, 1),
			rapid.Float64(),
			rapid.SampledFrom([]float64{0, 1, math.Nextafter(1, 0), 1e-300, math.NaN(), math.Inf(1), math.Inf(-1)}),
		).Draw(t, "fraction")
		got := Jitter(key, at, d, fraction)
		if got < 0 {
			t.Fatalf("Jitter(…, %v, %v) = %v, want ≥ 0", d, fraction, got)
		}
		if d <= 0 || !(fraction > 0) {
			if got != 0 {
				t.Fatalf("Jitter(…, %v, %v) = %v, want 0 for an empty window", d, fraction, got)
			}
			return
		}
		window := float64(d) * min(fraction, 1)
		if got > 0 && float64(got) >= window {
			t.Fatalf("Jitter(…, %v, %v) = %v, want below fraction·d = %v", d, fraction, got, window)
		}
		if got > d {
			t.Fatalf("Jitter(…, %v, %v) = %v, want at most d", d, fraction, got)
		}
	})
}

// TestJitterSpread: a hundred thousand sources added at one instant, jittered over an hour,
// land so evenly that no one-second bucket of the 3,600 holds more than three times the mean.
func TestJitterSpread(t *testing.T) {
	const (
		keys    = 100_000
		window  = time.Hour
		buckets = int(window / time.Second)
	)
	var counts [buckets]int
	for i := range keys {
		off := Jitter(fmt.Sprintf("user-%d/source-%d", i%977, i), t0, window, 1)
		if off < 0 || off >= window {
			t.Fatalf("key %d: offset %v outside [0, %v)", i, off, window)
		}
		counts[off/time.Second]++
	}
	mean := float64(keys) / float64(buckets)
	worst, empty := 0, 0
	for _, c := range counts {
		worst = max(worst, c)
		if c == 0 {
			empty++
		}
	}
	if float64(worst) > 3*mean {
		t.Errorf("fullest one-second bucket holds %d entries, more than 3× the mean %.1f", worst, mean)
	}
	if empty > 0 {
		t.Errorf("%d of %d one-second buckets are empty with a mean of %.1f: the spread does not cover the window", empty, buckets, mean)
	}
}

// TestJitterDependsOnKeyAndTime: the offset moves with the key and with the instant, so
// entries added together spread and one entry re-added later is not pinned to one slot.
func TestJitterDependsOnKeyAndTime(t *testing.T) {
	seen := map[time.Duration]bool{}
	for i := range 100 {
		seen[Jitter(fmt.Sprintf("k%d", i), t0, time.Hour, 1)] = true
	}
	if len(seen) < 95 {
		t.Errorf("100 keys at one instant gave only %d distinct offsets", len(seen))
	}
	clear(seen)
	for i := range 100 {
		seen[Jitter("k", t0.Add(time.Duration(i)*time.Nanosecond), time.Hour, 1)] = true
	}
	if len(seen) < 95 {
		t.Errorf("one key at 100 instants a nanosecond apart gave only %d distinct offsets", len(seen))
	}
}

func TestJitterFractionScalesTheWindow(t *testing.T) {
	for i := range 1000 {
		key := fmt.Sprintf("k%d", i)
		if off := Jitter(key, t0, time.Hour, 0.1); off >= 6*time.Minute {
			t.Fatalf("Jitter(%q, t0, 1h, 0.1) = %v, want below 6m", key, off)
		}
		if full, over := Jitter(key, t0, time.Hour, 1), Jitter(key, t0, time.Hour, 7); full != over {
			t.Fatalf("Jitter(%q, …, fraction 7) = %v, want it clamped to fraction 1 (%v)", key, over, full)
		}
	}
}
