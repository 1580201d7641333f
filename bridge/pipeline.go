package bridge

import (
	"context"

	"github.com/rotaworks/rota/tenancy"
)

// Stage is how far one item found by a pipeline run got, in the host's own words
// ("scored", "filtered", ...). Only [StageAlreadySeen] means anything to rota.
type Stage string

// StageAlreadySeen marks an outcome the host's dedupe ledger had already seen: the source
// yielded nothing new for it.
const StageAlreadySeen Stage = "already_seen"

// Outcome is one thing a pipeline run found, identified by the host (a posting ID, a URL).
type Outcome struct {
	ID    string
	Stage Stage
}

// Result is what one pipeline run over one watched source found.
type Result struct {
	Outcomes []Outcome
}

// FoundNew reports whether the run found anything new: true iff any outcome's stage is
// not [StageAlreadySeen]. An item that reached the pipeline at all — whether it was later
// filtered or scored — is something the dedupe ledger had not seen, which is the signal
// cadence speeds up on. A run that found nothing, or only already-seen items, is a miss.
func (r Result) FoundNew() bool {
	for _, o := range r.Outcomes {
		if o.Stage != StageAlreadySeen {
			return true
		}
	}
	return false
}

// Pipeline is the host's work for one watched source: fetch it, dedupe, judge, record.
// Which profile, rubric or settings to use for the tenant is the pipeline's business; rota
// only reads [Result.FoundNew].
//
// Run must honour ctx. RunDueItem, a Worker and a Runner cancel it a claim margin before
// the item's claim ends, after which the entry may be dispatched again elsewhere, and a
// Runner or Worker also when its stop runs out of time; context.Cause tells which
// ([ErrClaimEnded], [ErrShutdownTimeout]). A run that ignores it can overlap a later run
// of the same source. Run is called concurrently for different entries.
type Pipeline interface {
	Run(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (Result, error)
}

// PipelineFunc adapts a function to the [Pipeline] interface.
type PipelineFunc func(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (Result, error)

// Run calls f(ctx, tc, e).
func (f PipelineFunc) Run(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (Result, error) {
	return f(ctx, tc, e)
}
