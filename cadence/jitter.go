package cadence

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"time"
)

// Jitter returns a deterministic offset in [0, fraction·d) for key at instant at.
//
// It depends only on its arguments — a 64-bit FNV-1a hash of key and at's Unix nanoseconds,
// the same in every process and on every replica — so a hundred thousand sources added in
// one minute spread across the window instead of coming due in the same second, and every
// replica computes the same spread. A fraction outside (0, 1] is clamped into it (≤ 0 or NaN
// gives 0); a d ≤ 0 gives 0, and so does a window fraction·d shorter than a nanosecond.
//
// It costs one hash of key: O(len(key)). Most callers spread a new entry's first due time:
// at.Add(Jitter(key, at, base, 1)).
func Jitter(key string, at time.Time, d time.Duration, fraction float64) time.Duration {
	if d <= 0 || !(fraction > 0) {
		return 0
	}
	if fraction > 1 {
		fraction = 1
	}
	window := float64(d) * fraction
	if window < 1 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(key))
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(at.UnixNano()))
	h.Write(buf[:])
	sum := h.Sum64()
	// Finalise with a 64-bit mixer (splitmix64's) so that keys differing only in their last
	// bytes spread over the whole window, then take the top 53 bits as a uniform [0, 1).
	sum ^= sum >> 30
	sum *= 0xbf58476d1ce4e5b9
	sum ^= sum >> 27
	sum *= 0x94d049bb133111eb
	sum ^= sum >> 31
	u := float64(sum>>11) / (1 << 53)
	off := math.Floor(u * window)
	if off >= window {
		// u·window can round up to window itself when window is large; step one below it.
		off = math.Floor(math.Nextafter(window, 0))
	}
	return time.Duration(off)
}
