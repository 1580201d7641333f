// Package cadence decides how often a watched source is polled: pure policies over a miss
// streak, the named presets, a registry that resolves tier names, and deterministic jitter.
//
// # The model
//
// A source's cadence depends on one number, its miss streak: how many polls in a row found
// nothing new. A hit resets the streak to 0 and the next poll comes after the tier's base
// interval; each miss backs off multiplicatively up to a cap. [Policy] is that function,
// NextInterval(missStreak), and it is pure: no clock, no state, the same answer on every
// replica. The caller keeps the streak (package duework stores it on each entry and
// duework.Advance applies the policy, counting from the poll's own now).
//
// # Where to start
//
// [Backoff] is the Policy most hosts want: NextInterval(n) = min(Base·Factorⁿ, Max),
// computed in O(1) without overflow for every n. Check a hand-made one with
// [Backoff.Validate].
//
// The presets, all with Factor 2:
//
//	tier name       preset         Base    Max
//	hot             TierHot        5m      1h
//	warm            TierWarm       30m     6h
//	cold            TierCold       4h      48h
//	digest_weekly   DigestWeekly   168h    672h (4 weeks)
//
// A watch-list entry names its tier as a string; [NewRegistry] resolves those names, and a
// host adds tiers of its own with [Registry.Register]. An unknown name is [ErrUnknownTier],
// never a silent default. There is no package-level registry: each host, and each test,
// owns its own, so none can leak tiers into another.
//
// # Jitter
//
// [Jitter] spreads due times so that sources added together — a hundred thousand in one
// minute after an import — do not all come due in the same second. The offset lies in
// [0, fraction·d) and depends only on its arguments through a fixed hash (FNV-1a, finished
// with a 64-bit mixer), not a per-process seed, so every replica computes the same schedule.
package cadence
