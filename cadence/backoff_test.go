package cadence

import (
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// genValidBackoff draws a Backoff that Validate accepts, leaning on the edges: Base of one
// nanosecond or near the int64 limit, Max equal to Base or at the limit, and Factor exactly
// 1, a hair above 1, ordinary, or astronomically large.
func genValidBackoff() *rapid.Generator[Backoff] {
	return rapid.Custom(func(t *rapid.T) Backoff {
		base := rapid.OneOf(
			rapid.Int64Range(1, int64(time.Hour)),
			rapid.Int64Range(1, math.MaxInt64),
			rapid.SampledFrom([]int64{1, math.MaxInt64 - 1, math.MaxInt64}),
		).Draw(t, "base")
		maxv := rapid.OneOf(
			rapid.Int64Range(base, math.MaxInt64),
			rapid.SampledFrom([]int64{base, math.MaxInt64}),
		).Draw(t, "max")
		factor := rapid.OneOf(
			rapid.Float64Range(1, 4),
			rapid.Float64Range(1, math.MaxFloat64),
			rapid.SampledFrom([]float64{1, math.Nextafter(1, 2), 1 + 1e-12, 2, math.MaxFloat64}),
		).Draw(t, "factor")
		b := Backoff{Base: time.Duration(base), Max: time.Duration(maxv), Factor: factor}
		if err := b.Validate(); err != nil {
			t.Fatalf("generator drew an invalid Backoff %+v: %v", b, err)
		}
		return b
	})
}

// genStreak draws a miss streak from small values up to math.MaxInt.
func genStreak() *rapid.Generator[int] {
	return rapid.OneOf(
		rapid.IntRange(0, 80),
		rapid.IntRange(0, math.MaxInt),
		rapid.SampledFrom([]int{0, 1, 62, 63, 64, 1 << 53, math.MaxInt - 1, math.MaxInt}),
	)
}

func TestBackoffWithinBaseAndMax(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := genValidBackoff().Draw(t, "backoff")
		n := genStreak().Draw(t, "streak")
		got := b.NextInterval(n)
		if got < b.Base || got > b.Max {
			t.Fatalf("%+v.NextInterval(%d) = %v, want within [Base, Max] = [%v, %v]", b, n, got, b.Base, b.Max)
		}
	})
}

func TestBackoffStreakZeroIsBase(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := genValidBackoff().Draw(t, "backoff")
		if got := b.NextInterval(0); got != b.Base {
			t.Fatalf("%+v.NextInterval(0) = %v, want Base %v: a hit snaps back to the base interval", b, got, b.Base)
		}
		if n := rapid.IntRange(math.MinInt, -1).Draw(t, "negative"); b.NextInterval(n) != b.Base {
			t.Fatalf("%+v.NextInterval(%d) = %v, want Base: a negative streak counts as 0", b, n, b.NextInterval(n))
		}
	})
}

func TestBackoffMonotone(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := genValidBackoff().Draw(t, "backoff")
		n := genStreak().Draw(t, "n")
		m := genStreak().Draw(t, "m")
		if n > m {
			n, m = m, n
		}
		if b.NextInterval(n) > b.NextInterval(m) {
			t.Fatalf("%+v: NextInterval(%d) = %v > NextInterval(%d) = %v: the interval must never shrink as misses grow",
				b, n, b.NextInterval(n), m, b.NextInterval(m))
		}
		if n < math.MaxInt && b.NextInterval(n) > b.NextInterval(n+1) {
			t.Fatalf("%+v: NextInterval(%d) = %v > NextInterval(%d) = %v", b, n, b.NextInterval(n), n+1, b.NextInterval(n+1))
		}
	})
}

// TestBackoffMatchesFormula checks the values, not only their bounds: min(Base·Factorⁿ, Max)
// computed exactly with big.Float, against NextInterval, within float64 rounding.
func TestBackoffMatchesFormula(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := genValidBackoff().Draw(t, "backoff")
		n := rapid.IntRange(0, 200).Draw(t, "streak")
		want := exactInterval(b, n)
		got := b.NextInterval(n)
		diff := math.Abs(float64(got) - float64(want))
		if diff > 1+1e-9*float64(want) {
			t.Fatalf("%+v.NextInterval(%d) = %v, want min(Base·Factorⁿ, Max) = %v", b, n, got, want)
		}
	})
}

// exactInterval is the reference model: min(Base·Factorⁿ, Max) in exact arithmetic,
// truncated to whole nanoseconds.
func exactInterval(b Backoff, n int) time.Duration {
	limit := new(big.Float).SetInt64(int64(b.Max))
	v := new(big.Float).SetPrec(4096).SetInt64(int64(b.Base))
	f := new(big.Float).SetPrec(4096).SetFloat64(b.Factor)
	for range n {
		v.Mul(v, f)
		if v.Cmp(limit) >= 0 {
			return b.Max
		}
	}
	i, _ := v.Int64()
	return time.Duration(i)
}

func TestBackoffExamples(t *testing.T) {
	tests := []struct {
		b      Backoff
		streak int
		want   time.Duration
	}{
		{TierHot, 0, 5 * time.Minute},
		{TierHot, 1, 10 * time.Minute},
		{TierHot, 3, 40 * time.Minute},
		{TierHot, 4, time.Hour},
		{TierHot, math.MaxInt, time.Hour},
		{Backoff{Base: time.Second, Max: time.Second, Factor: 3}, 5, time.Second},
		{Backoff{Base: time.Second, Max: time.Hour, Factor: 1}, 1000, time.Second},
		{Backoff{Base: time.Second, Max: time.Hour, Factor: 1.5}, 2, 2250 * time.Millisecond},
		{Backoff{Base: 1, Max: math.MaxInt64, Factor: 2}, 62, 1 << 62},
		{Backoff{Base: 1, Max: math.MaxInt64, Factor: 2}, 63, math.MaxInt64},
		{Backoff{Base: math.MaxInt64 - 1, Max: math.MaxInt64, Factor: math.MaxFloat64}, 1, math.MaxInt64},
	}
	for _, tt := range tests {
		if got := tt.b.NextInterval(tt.streak); got != tt.want {
			t.Errorf("%+v.NextInterval(%d) = %v, want %v", tt.b, tt.streak, got, tt.want)
		}
	}
}

func TestValidateNamesTheField(t *testing.T) {
	ok := Backoff{Base: time.Minute, Max: time.Hour, Factor: 2}
	tests := []struct {
		name  string
		b     Backoff
		field string
	}{
		{"zero Base", Backoff{Base: 0, Max: time.Hour, Factor: 2}, "Base"},
		{"negative Base", Backoff{Base: -time.Second, Max: time.Hour, Factor: 2}, "Base"},
		{"Max below Base", Backoff{Base: time.Hour, Max: time.Minute, Factor: 2}, "Max"},
		{"Factor below 1", Backoff{Base: time.Minute, Max: time.Hour, Factor: 0.5}, "Factor"},
		{"zero Factor", Backoff{Base: time.Minute, Max: time.Hour}, "Factor"},
		{"negative Factor", Backoff{Base: time.Minute, Max: time.Hour, Factor: -2}, "Factor"},
		{"NaN Factor", Backoff{Base: time.Minute, Max: time.Hour, Factor: math.NaN()}, "Factor"},
		{"+Inf Factor", Backoff{Base: time.Minute, Max: time.Hour, Factor: math.Inf(1)}, "Factor"},
		{"-Inf Factor", Backoff{Base: time.Minute, Max: time.Hour, Factor: math.Inf(-1)}, "Factor"},
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("%+v.Validate() = %v, want nil", ok, err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.b.Validate()
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("%+v.Validate() = %v, want ErrInvalidPolicy", tt.b, err)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("%+v.Validate() = %q, want it to name the field %s", tt.b, err, tt.field)
			}
		})
	}
}

func TestValidateReportsEveryField(t *testing.T) {
	err := Backoff{Base: -1, Max: -2, Factor: math.NaN()}.Validate()
	for _, field := range []string{"Base", "Max", "Factor"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Validate() = %v, want it to name %s among all the problems", err, field)
		}
	}
}

// TestInvalidBackoffStaysBounded: NextInterval on a Backoff that Validate refuses does not
// panic and stays within [0, max(Base, Max, 0)].
func TestInvalidBackoffStaysBounded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := Backoff{
			Base:   time.Duration(rapid.Int64().Draw(t, "base")),
			Max:    time.Duration(rapid.Int64().Draw(t, "max")),
			Factor: rapid.OneOf(rapid.Float64(), rapid.SampledFrom([]float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, -1})).Draw(t, "factor"),
		}
		n := rapid.Int().Draw(t, "streak")
		checkBackoff(t, b, n)
	})
}

// checkBackoff asserts what NextInterval promises for b and streak n: for a valid b, the
// bounds, streak 0 being Base and monotonicity at n; for any b, a result in [0, max(Base, Max, 0)].
func checkBackoff(t interface{ Fatalf(string, ...any) }, b Backoff, n int) {
	got := b.NextInterval(n)
	if err := b.Validate(); err != nil {
		if !errors.Is(err, ErrInvalidPolicy) {
			t.Fatalf("%+v.Validate() = %v, want ErrInvalidPolicy", b, err)
		}
		if got < 0 || got > max(b.Base, b.Max, 0) {
			t.Fatalf("invalid %+v.NextInterval(%d) = %v, want within [0, max(Base, Max, 0)]", b, n, got)
		}
		return
	}
	if got < b.Base || got > b.Max {
		t.Fatalf("%+v.NextInterval(%d) = %v, want within [%v, %v]", b, n, got, b.Base, b.Max)
	}
	if b.NextInterval(0) != b.Base {
		t.Fatalf("%+v.NextInterval(0) = %v, want Base", b, b.NextInterval(0))
	}
	if n >= 0 && n < math.MaxInt && b.NextInterval(n+1) < got {
		t.Fatalf("%+v: NextInterval(%d) = %v < NextInterval(%d) = %v", b, n+1, b.NextInterval(n+1), n, got)
	}
	if n > 0 && b.NextInterval(n-1) > got {
		t.Fatalf("%+v: NextInterval(%d) = %v > NextInterval(%d) = %v", b, n-1, b.NextInterval(n-1), n, got)
	}
}

// FuzzBackoff constructs a Backoff from arbitrary fields: whenever Validate accepts it,
// NextInterval keeps every promise; whenever it refuses, the error wraps ErrInvalidPolicy
// and NextInterval still neither panics nor leaves [0, max(Base, Max, 0)].
func FuzzBackoff(f *testing.F) {
	f.Add(int64(time.Minute), int64(time.Hour), 2.0, 3)
	f.Add(int64(1), int64(math.MaxInt64), 2.0, 63)
	f.Add(int64(1), int64(math.MaxInt64), 1.0000000000000002, math.MaxInt)
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), math.MaxFloat64, 1)
	f.Add(int64(0), int64(time.Hour), 2.0, 1)
	f.Add(int64(time.Hour), int64(time.Minute), 2.0, 1)
	f.Add(int64(time.Minute), int64(time.Hour), math.NaN(), 1)
	f.Add(int64(time.Minute), int64(time.Hour), math.Inf(1), 1)
	f.Add(int64(-5), int64(-1), 0.5, -7)
	f.Fuzz(func(t *testing.T, base, maxv int64, factor float64, streak int) {
		checkBackoff(t, Backoff{Base: time.Duration(base), Max: time.Duration(maxv), Factor: factor}, streak)
	})
}
