package duework

import (
	"math/bits"
	"time"

	"github.com/rotaworks/rota/internal/vocab"
)

// Memory's flow-control arithmetic on stored times (seconds since vocab.MinTime and
// nanoseconds). Every result stays in [vocab.MinTime, vocab.MaxTime], whatever Every and
// Burst are: stored seconds reach about 3.2e11 and a product k·Every (k at most MaxLimit)
// about 9.7e15 seconds, so sums of them never overflow an int64, and the one division that
// would (a span of up to 10,000 years in nanoseconds) is done in 128 bits.

// maxSec and maxNsec are vocab.MaxTime as Memory stores it.
var maxSec, maxNsec = splitTime(vocab.MaxTime)

const (
	nanosPerSec    = int64(time.Second)
	microsPerSec   = int64(time.Second / time.Microsecond)
	nanosPerMicros = int64(time.Microsecond)
)

// scaled returns k·d as whole seconds and nanoseconds; 0 <= k <= MaxLimit, d >= 0.
func scaled(k int64, d time.Duration) (int64, int64) {
	ds, dn := int64(d)/nanosPerSec, int64(d)%nanosPerSec
	s, n := k*ds, k*dn
	return s + n/nanosPerSec, n % nanosPerSec
}

// addScaled returns (sec, nsec) + k·d, saturating at vocab.MaxTime.
func addScaled(sec int64, nsec int32, k int64, d time.Duration) (int64, int32) {
	ks, kn := scaled(k, d)
	s, n := sec+ks, int64(nsec)+kn
	if n >= nanosPerSec {
		s, n = s+1, n-nanosPerSec
	}
	if cmpTime(s, int32(n), maxSec, maxNsec) > 0 {
		return maxSec, maxNsec
	}
	return s, int32(n)
}

// subScaled returns (sec, nsec) − k·d, clamped at vocab.MinTime.
func subScaled(sec int64, nsec int32, k int64, d time.Duration) (int64, int32) {
	ks, kn := scaled(k, d)
	return subClamped(sec, nsec, ks, kn)
}

// subClamped returns (sec, nsec) − (ds seconds + dn nanoseconds), for ds ≥ 0 and dn in
// [0, 1e9), clamped at vocab.MinTime.
func subClamped(sec int64, nsec int32, ds, dn int64) (int64, int32) {
	s, n := sec-ds, int64(nsec)-dn
	if n < 0 {
		s, n = s-1, n+nanosPerSec
	}
	if s < 0 {
		return 0, 0
	}
	return s, int32(n)
}

// strideSlack is how many times its steady lag a weighted user's stride may start behind
// now: a user of weight w served every d keeps a lag of about w·d, and whole cycles make d
// uneven.
const strideSlack = 3

// strideFloor returns now − strideSlack·w·(now − last), clamped at vocab.MinTime, for last before
// now: the earliest a stride of weight w may start after the user was last served at last.
func strideFloor(ls int64, ln int32, sec int64, nsec int32, w int) (int64, int32) {
	w *= strideSlack
	gs, gn := sec-ls, int64(nsec)-int64(ln)
	if gn < 0 {
		gs, gn = gs-1, gn+nanosPerSec
	}
	// w·gap: gs·w seconds (at most 10,000 years · MaxWeight, no overflow) and gn·w nanoseconds.
	bn := gn * int64(w)
	bs := gs*int64(w) + bn/nanosPerSec
	bn %= nanosPerSec
	return subClamped(sec, nsec, bs, bn)
}

// later returns the later of two stored times.
func later(as int64, an int32, bs int64, bn int32) (int64, int32) {
	if cmpTime(as, an, bs, bn) >= 0 {
		return as, an
	}
	return bs, bn
}

// allowance is the number of items the rate lets a user with mark R (rs, rn), Every e > 0
// and burst b >= 1 be claimed at now: b when R <= now, else max(0, b − ceil((R − now)/e)).
func allowance(rs int64, rn int32, sec int64, nsec int32, e time.Duration, b int) int {
	if cmpTime(rs, rn, sec, nsec) <= 0 {
		return b
	}
	ds, dn := rs-sec, int64(rn)-int64(nsec)
	if dn < 0 {
		ds, dn = ds-1, dn+nanosPerSec
	}
	hi, lo := bits.Mul64(uint64(ds), uint64(nanosPerSec))
	lo, carry := bits.Add64(lo, uint64(dn), 0)
	hi += carry
	if hi >= uint64(e) {
		return 0 // the quotient does not fit in 64 bits: far more than b
	}
	q, rem := bits.Div64(hi, lo, uint64(e))
	if q >= uint64(b) {
		return 0
	}
	if rem > 0 {
		q++ // the ceiling; q < b <= MaxLimit here, so it cannot overflow
	}
	return max(0, b-int(q))
}

// strided returns T + floor(L·k/w) microseconds, L = now − T in whole microseconds
// rounded down, for T (ts, tn) before now and 0 < k < w: the pass of a user of weight w
// served k items. floor(L·k/w) is computed as (L/w)·k + (L%w)·k/w, which never overflows.
func strided(ts int64, tn int32, sec int64, nsec int32, k, w int) (int64, int32) {
	dn := int64(nsec) - int64(tn)
	l := (sec-ts)*microsPerSec + dn/nanosPerMicros
	if dn%nanosPerMicros < 0 {
		l-- // round the nanoseconds down, not toward zero
	}
	w64, k64 := int64(w), int64(k)
	s := (l/w64)*k64 + (l%w64)*k64/w64
	ps, pn := ts+s/microsPerSec, int64(tn)+(s%microsPerSec)*nanosPerMicros
	if pn >= nanosPerSec {
		ps, pn = ps+1, pn-nanosPerSec
	}
	return ps, int32(pn)
}
