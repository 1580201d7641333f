package rotadynamo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rotaworks/rota/internal/taskstate"
	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/maintenance"
)

// StateStore is a maintenance.StateStore on the table, fenced by the Lease of the same
// Stores: the task states every maintenance daemon of a fleet shares. OpenStores builds
// it; it is safe for concurrent use.
//
// The states are items of one partition, beside a fence item that holds the highest token
// of a write that succeeded and a version that every Save and Update raises. The fence is
// the greater of that token and the lease's latest. Save is one TransactWriteItems: a check
// that the lease's token is not above its token, the fence item raised under the same
// check, and a put of each state. Update reads the fence, the lease and the states named,
// calls its UpdateFunc, and writes in one TransactWriteItems conditional on the fence's
// version and the lease's token as read; when another write came first it reads again and
// calls the UpdateFunc again, which the contract allows. So a Save or Update holds at most
// 98 distinct tasks. Load reads the fence before and after the states and reads again when
// a write came in between. Times are kept to the nanosecond.
type StateStore struct {
	d     *db
	lease string // the name of the fencing lease
}

var _ maintenance.StateStore = (*StateStore)(nil)

// maxStates is how many tasks one Save or Update writes: a transaction's 100 actions,
// less the fence and the lease.
const maxStates = 98

// The attributes of a task state item (partition pkTasks, sort key taskSK(name)) and of
// the fence item (sort key skFence).
const (
	attrFenceToken = "tok"
	attrState      = "s"
)

// fence reads, in one strongly consistent batch, the fence item's token and version (0, 0
// before the first write) and the fencing lease's latest token (0 before its first grant).
func (s *StateStore) fence(ctx context.Context) (token uint64, ver int64, lease uint64, err error) {
	items, err := s.d.batchGet(ctx, []map[string]av{key(pkTasks, skFence), key(leasePK(s.lease), skLease)})
	for _, m := range items {
		it := &item{m: m}
		if it.str(attrPK) == pkTasks {
			token, ver = it.uint(attrFenceToken), it.int(attrVersion)
		} else {
			lease = it.uint(attrLeaseToken)
		}
		if it.err != nil {
			return 0, 0, 0, it.err
		}
	}
	return token, ver, lease, err
}

// Load returns the fence and every task's state, ordered by Name.
func (s *StateStore) Load(ctx context.Context) (maintenance.Snapshot, error) {
	var snap maintenance.Snapshot
	err := retry(ctx, func() error {
		tok, ver, lt, err := s.fence(ctx)
		if err != nil {
			return err
		}
		var states []maintenance.TaskState
		err = s.d.pageRange(ctx, pkTasks, taskSK(""), taskSK("\U0010FFFF"), 1000, func(m map[string]av) (bool, error) {
			st, err := readState(m)
			states = append(states, st)
			return true, err
		})
		if err != nil {
			return err
		}
		if _, again, _, err := s.fence(ctx); err != nil || again != ver {
			return cmpErr(err, errConflict)
		}
		slices.SortFunc(states, func(a, b maintenance.TaskState) int { return cmpString(a.Name, b.Name) })
		snap = maintenance.Snapshot{Token: max(tok, lt), States: states}
		return nil
	})
	if err != nil {
		return maintenance.Snapshot{}, interpret(ctx, "StateStore.Load", err)
	}
	return snap, nil
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Save inserts or replaces each of states, all or none, fenced by token: it returns
// maintenance.ErrStaleToken, writing nothing, when token is below the fence, and otherwise
// raises the fence to token. A token above math.MaxInt64, a state that
// maintenance.TaskState.Validate refuses, or more than 98 distinct tasks is
// maintenance.ErrInvalid; a Save that names one task twice keeps the later state.
func (s *StateStore) Save(ctx context.Context, token uint64, states ...maintenance.TaskState) error {
	if token > math.MaxInt64 {
		return fmt.Errorf("rotadynamo: StateStore.Save: %w: token must be at most %d, got %d", maintenance.ErrInvalid, int64(math.MaxInt64), token)
	}
	for i, st := range states {
		if err := st.Validate(); err != nil {
			return fmt.Errorf("rotadynamo: StateStore.Save: states[%d]: %w", i, err)
		}
	}
	puts, err := statePuts(states)
	if err != nil {
		return fmt.Errorf("rotadynamo: StateStore.Save: %w", err)
	}
	notAbove := func(attr string) func(e *expr) string {
		return func(e *expr) string {
			return "attribute_not_exists(" + e.n(attr) + ") OR " + e.n(attr) + " <= " + e.v(uv(token))
		}
	}
	err = retry(ctx, func() error {
		fenceUp := newUpdate(key(pkTasks, skFence)).set(attrFenceToken, uv(token)).add(attrVersion, nv(1)).cond(notAbove(attrFenceToken))
		check := newUpdate(key(leasePK(s.lease), skLease)).cond(notAbove(attrLeaseToken))
		actions := append([]types.TransactWriteItem{fenceUp.action(), conditionCheck(check)}, puts...)
		err := s.d.transact(ctx, actions)
		if isConflict(err) {
			return errConflict
		}
		if reasons := cancelled(err); len(reasons) > 1 && (reasonCode(reasons[0]) == "ConditionalCheckFailed" || reasonCode(reasons[1]) == "ConditionalCheckFailed") {
			return fmt.Errorf("rotadynamo: StateStore.Save: token %d is below the fence: %w", token, maintenance.ErrStaleToken)
		}
		return err
	})
	if err != nil && !errors.Is(err, maintenance.ErrStaleToken) {
		err = interpret(ctx, "StateStore.Save", err)
	}
	return err
}

// statePuts returns the puts of states, the later of a name given twice winning, or
// maintenance.ErrInvalid for more than maxStates tasks.
func statePuts(states []maintenance.TaskState) ([]types.TransactWriteItem, error) {
	last := map[string]int{}
	for i, st := range states {
		last[st.Name] = i
	}
	if len(last) > maxStates {
		return nil, fmt.Errorf("%w: %d tasks in one write, at most %d", maintenance.ErrInvalid, len(last), maxStates)
	}
	var out []types.TransactWriteItem
	for i, st := range states {
		if last[st.Name] == i {
			out = append(out, putAction(stateItem(st), nil))
		}
	}
	return out, nil
}

// conditionCheck is u's condition as a ConditionCheck action.
func conditionCheck(u *update) types.TransactWriteItem {
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{Key: u.keyMap, ConditionExpression: u.condition(),
		ExpressionAttributeNames: u.e.namesOrNil(), ExpressionAttributeValues: u.e.valuesOrNil()}}
}

// Update reads the fence and the states of names, calls f with them, and writes what f
// returns, atomically with respect to every other Update and Save and to the lease's
// grants (see StateStore). Names that are not valid names or repeat, and writes that
// maintenance.TaskState.Validate refuses, of a name not given, or a token above
// math.MaxInt64, are maintenance.ErrInvalid; f's error is returned and nothing is written.
func (s *StateStore) Update(ctx context.Context, names []string, f maintenance.UpdateFunc) error {
	given := make(map[string]bool, len(names))
	for i, n := range names {
		if err := vocab.Name(maintenance.ErrInvalid, fmt.Sprintf("names[%d]", i), n); err != nil {
			return fmt.Errorf("rotadynamo: StateStore.Update: %w", err)
		}
		if given[n] {
			return fmt.Errorf("rotadynamo: StateStore.Update: %w: names[%d] %q repeats", maintenance.ErrInvalid, i, n)
		}
		given[n] = true
	}
	err := retry(ctx, func() error { return s.update(ctx, names, given, f) })
	if err != nil && !errors.Is(err, maintenance.ErrInvalid) && !errors.Is(err, errUpdateFunc) {
		return interpret(ctx, "StateStore.Update", err)
	}
	return err
}

// errUpdateFunc marks an error the UpdateFunc returned.
var errUpdateFunc = errors.New("rotadynamo: StateStore.Update")

// update is one attempt of Update.
func (s *StateStore) update(ctx context.Context, names []string, given map[string]bool, f maintenance.UpdateFunc) error {
	tok, ver, lt, err := s.fence(ctx)
	if err != nil {
		return err
	}
	states, err := s.read(ctx, names)
	if err != nil {
		return err
	}
	fence := max(tok, lt)
	writes, raise, err := f(fence, states)
	if err != nil {
		return fmt.Errorf("%w: %w", errUpdateFunc, err)
	}
	if err := taskstate.CheckWrites(given, raise, writes); err != nil {
		return err
	}
	puts, err := statePuts(writes)
	if err != nil {
		return err
	}
	fenceUp := newUpdate(key(pkTasks, skFence)).set(attrFenceToken, uv(max(tok, raise))).set(attrVersion, nv(ver+1))
	fenceUp.cond(func(e *expr) string {
		if ver == 0 {
			return "attribute_not_exists(" + e.n(attrVersion) + ")"
		}
		return e.n(attrVersion) + " = " + e.v(nv(ver))
	})
	check := newUpdate(key(leasePK(s.lease), skLease)).cond(func(e *expr) string {
		if lt == 0 {
			return "attribute_not_exists(" + e.n(attrLeaseToken) + ")"
		}
		return e.n(attrLeaseToken) + " = " + e.v(uv(lt))
	})
	err = s.d.transact(ctx, append([]types.TransactWriteItem{fenceUp.action(), conditionCheck(check)}, puts...))
	if cancelled(err) != nil {
		return errConflict // the fence's version or the lease's token moved: read again
	}
	return err
}

// read returns the states of names, in their order; a task without one is the zero state
// with its name.
func (s *StateStore) read(ctx context.Context, names []string) ([]maintenance.TaskState, error) {
	keys := make([]map[string]av, len(names))
	for i, n := range names {
		keys[i] = key(pkTasks, taskSK(n))
	}
	items, err := s.d.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	byName := map[string]maintenance.TaskState{}
	for _, m := range items {
		st, err := readState(m)
		if err != nil {
			return nil, err
		}
		byName[st.Name] = st
	}
	out := make([]maintenance.TaskState, len(names))
	for i, n := range names {
		st, ok := byName[n]
		if !ok {
			st = maintenance.TaskState{Name: n}
		}
		out[i] = st
	}
	return out, nil
}

// The fields of a task state item.
const (
	attrTaskName      = "n"
	attrClass         = "c"
	attrRank          = "r"
	attrLastRun       = "lr"
	attrOutcome       = "o"
	attrLastError     = "e"
	attrRunning       = "run"
	attrRunningSince  = "rs"
	attrRunningBy     = "rb"
	attrRunningToken  = "rt"
	attrRunningUntil  = "ru"
	attrDeferredSince = "ds0"
	attrDeferredAt    = "da"
	attrDeferrals     = "dn"
	attrDeferReason   = "dr"
	attrDeferBlocker  = "db"
)

func stateItem(st maintenance.TaskState) map[string]av {
	m := key(pkTasks, taskSK(st.Name))
	m[attrTaskName], m[attrClass], m[attrRank] = sv(st.Name), nv(int64(st.Class)), nv(int64(st.Rank))
	m[attrOutcome], m[attrLastError] = sv(string(st.LastOutcome)), sv(st.LastError)
	m[attrRunning], m[attrRunningBy], m[attrRunningToken] = bv(st.Running), sv(st.RunningBy), uv(st.RunningToken)
	m[attrDeferrals], m[attrDeferReason], m[attrDeferBlocker] = nv(int64(st.Deferrals)), sv(string(st.DeferReason)), sv(st.DeferBlocker)
	for a, t := range map[string]time.Time{attrLastRun: st.LastRunAt, attrRunningSince: st.RunningSince,
		attrRunningUntil: st.RunningUntil, attrDeferredSince: st.DeferredSince, attrDeferredAt: st.DeferredAt} {
		m[a] = tv(t)
	}
	return m
}

func readState(m map[string]av) (maintenance.TaskState, error) {
	it := &item{m: m}
	st := maintenance.TaskState{
		Name: it.str(attrTaskName), Class: maintenance.Class(it.int(attrClass)), Rank: maintenance.Rank(it.int(attrRank)),
		LastRunAt: norm(it.time(attrLastRun)), LastOutcome: maintenance.Outcome(it.str(attrOutcome)), LastError: it.str(attrLastError),
		Running: it.bool(attrRunning), RunningSince: norm(it.time(attrRunningSince)), RunningBy: it.str(attrRunningBy),
		RunningToken: it.uint(attrRunningToken), RunningUntil: norm(it.time(attrRunningUntil)),
		DeferredSince: norm(it.time(attrDeferredSince)), DeferredAt: norm(it.time(attrDeferredAt)),
		Deferrals: int(it.int(attrDeferrals)), DeferReason: maintenance.Reason(it.str(attrDeferReason)), DeferBlocker: it.str(attrDeferBlocker),
	}
	return st, it.err
}
