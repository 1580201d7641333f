package rotaotel

import (
	"sync"
	"time"

	"github.com/rotaworks/rota/bridge"
)

// failingSources is the set rota.bridge.failing_sources counts: the sources whose last
// run this process saw, as a Runner's report, left their ErrorStreak at or over after.
type failingSources struct {
	after int // the threshold; negative: the gauge is left out

	mu      sync.Mutex
	sources map[source]failingUntil
	expiry  time.Time // no later than the earliest forget; zero when sources is empty
}

// source names one source: a tenant's entry. It is a key in memory only, never an
// attribute.
type source struct{ userID, workKey string }

// failingUntil is one failing source: the report that last wrote it, and when the set
// forgets it if no report tells of it again.
type failingUntil struct{ at, forget time.Time }

// update applies a Runner's report and returns the number of failing sources, or false
// when the gauge is off. A failed run whose written ErrorStreak reached after adds its
// source; a pushed-back run of a failing source keeps it; a hit, a miss or a removal drops
// it. A source no report tells of again is forgotten a whole retry interval (at least a
// minute) after its next run was due: another process ran it (a Runner on another
// replica), or the host unscheduled it. A report older than the one that last wrote a
// source leaves it as it is. O(items), and O(failing sources) in the reports that pass
// the earliest forget.
func (f *failingSources) update(rep bridge.CycleReport) (int, bool) {
	if f.after < 0 {
		return 0, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sources == nil {
		f.sources = map[source]failingUntil{}
	}
	for _, it := range rep.Items {
		e := it.Item.Claim.Entry
		k := source{e.UserID, e.WorkKey}
		old, known := f.sources[k]
		if !it.Written || (known && rep.Now.Before(old.at)) {
			continue
		}
		switch it.Status {
		case bridge.StatusError, bridge.StatusPaused:
			if it.Next.ErrorStreak < f.after || (it.Status == bridge.StatusPaused && !known) {
				continue
			}
			n := it.Next
			forget := n.DueAt.Add(max(n.DueAt.Sub(n.LastRunAt), time.Minute))
			f.sources[k] = failingUntil{at: rep.Now, forget: forget}
			if f.expiry.IsZero() || forget.Before(f.expiry) {
				f.expiry = forget
			}
		case bridge.StatusHit, bridge.StatusMiss, bridge.StatusRemoved:
			delete(f.sources, k)
		}
	}
	if !f.expiry.IsZero() && rep.Now.After(f.expiry) {
		f.expiry = time.Time{}
		for k, s := range f.sources {
			switch {
			case rep.Now.After(s.forget):
				delete(f.sources, k)
			case f.expiry.IsZero() || s.forget.Before(f.expiry):
				f.expiry = s.forget
			}
		}
	}
	return len(f.sources), true
}
