package cadence

import "time"

// The named presets. Their Base intervals are ordered TierHot < TierWarm < TierCold <
// DigestWeekly; each backs off by Factor 2 on a miss up to its Max. They are variables so
// that a host can read them, but a host that wants other values should Register its own
// tier rather than change these: a [Registry] copies them when it is created.
var (
	// TierHot polls busy sources every 5 minutes after a hit, backing off to 1 hour.
	TierHot = Backoff{Base: 5 * time.Minute, Max: time.Hour, Factor: 2}
	// TierWarm polls every 30 minutes after a hit, backing off to 6 hours.
	TierWarm = Backoff{Base: 30 * time.Minute, Max: 6 * time.Hour, Factor: 2}
	// TierCold polls every 4 hours after a hit, backing off to 2 days.
	TierCold = Backoff{Base: 4 * time.Hour, Max: 48 * time.Hour, Factor: 2}
	// DigestWeekly polls once a week after a hit, backing off to 4 weeks.
	DigestWeekly = Backoff{Base: 7 * 24 * time.Hour, Max: 28 * 24 * time.Hour, Factor: 2}
)

// The tier names under which [NewRegistry] holds the presets: "hot", "warm", "cold" and
// "digest_weekly".
const (
	nameHot          = "hot"
	nameWarm         = "warm"
	nameCold         = "cold"
	nameDigestWeekly = "digest_weekly"
)
