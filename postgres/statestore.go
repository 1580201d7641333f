package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/internal/taskstate"
	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/maintenance"
)

// StateStore is a maintenance.StateStore on PostgreSQL: the task states that every
// maintenance daemon of a fleet shares, fenced by the lease token. Make one with
// NewStateStore after Migrate. It is safe for concurrent use.
//
// States are rows of rota_task_state, one column per TaskState field. The fence is the
// greater of the one row of rota_task_fence — the highest token of a write that
// succeeded — and the latest token of every Lease in the schema, so a schema holds one
// StateStore and the one Lease that fences it. Save and Update lock the fence row and
// share the lease rows' locks, in one transaction: Save refuses a token below the fence
// with maintenance.ErrStaleToken, raises the fence row and upserts every state; Update
// reads the states it was given the names of, calls its UpdateFunc once, upserts what it
// returns and raises the fence row. All or nothing; concurrent writes are serialized by
// the fence row, so an Update's read and write are atomic across every daemon, and an
// Acquire waits for a write in flight. Load reads the fence and every state from one
// snapshot (a read-only REPEATABLE READ transaction).
//
// Save and Update check their input as maintenance.MemoryStateStore does (see
// maintenance.TaskState.Validate), a Save's before anything is sent, an Update's names
// before and its writes before they are. Times are stored with microsecond precision.
type StateStore struct {
	pool *pgxpool.Pool
}

var _ maintenance.StateStore = (*StateStore)(nil)

// NewStateStore returns the StateStore in the pool's schema, which Migrate must have
// prepared.
func NewStateStore(pool *pgxpool.Pool) *StateStore {
	if pool == nil {
		panic("postgres: NewStateStore: nil pool")
	}
	return &StateStore{pool: pool}
}

const stateColumns = `name, class, rank, last_run_at, last_outcome, last_error, running, running_since,
	running_by, running_token, running_until, deferred_since, deferred_at, deferrals, defer_reason, defer_blocker`

// sqlUpsertState inserts or replaces one state.
const sqlUpsertState = `INSERT INTO rota_task_state (` + stateColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
	ON CONFLICT (name) DO UPDATE SET class = EXCLUDED.class, rank = EXCLUDED.rank,
		last_run_at = EXCLUDED.last_run_at, last_outcome = EXCLUDED.last_outcome,
		last_error = EXCLUDED.last_error, running = EXCLUDED.running,
		running_since = EXCLUDED.running_since, running_by = EXCLUDED.running_by,
		running_token = EXCLUDED.running_token, running_until = EXCLUDED.running_until,
		deferred_since = EXCLUDED.deferred_since, deferred_at = EXCLUDED.deferred_at,
		deferrals = EXCLUDED.deferrals, defer_reason = EXCLUDED.defer_reason,
		defer_blocker = EXCLUDED.defer_blocker`

// queueUpsert queues the upsert of st.
func queueUpsert(b *pgx.Batch, st maintenance.TaskState) {
	b.Queue(sqlUpsertState, st.Name, int32(st.Class), int32(st.Rank), ts(st.LastRunAt), string(st.LastOutcome), st.LastError,
		st.Running, ts(st.RunningSince), st.RunningBy, int64(st.RunningToken), ts(st.RunningUntil), ts(st.DeferredSince),
		ts(st.DeferredAt), int64(st.Deferrals), string(st.DeferReason), st.DeferBlocker)
}

// Load returns the highest token seen and every task's state, ordered by Name.
func (s *StateStore) Load(ctx context.Context) (maintenance.Snapshot, error) {
	var snap maintenance.Snapshot
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var fence int64
		if err := tx.QueryRow(ctx, `SELECT greatest(coalesce((SELECT token FROM rota_task_fence), 0),
			coalesce((SELECT max(token) FROM rota_leases), 0))`).Scan(&fence); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT `+stateColumns+` FROM rota_task_state ORDER BY name`)
		if err != nil {
			return err
		}
		states, err := pgx.CollectRows(rows, scanState)
		snap = maintenance.Snapshot{Token: uint64(fence), States: states}
		return err
	})
	if err != nil {
		return maintenance.Snapshot{}, interpretAs(ctx, "StateStore.Load", maintenance.ErrInvalid, err)
	}
	return snap, nil
}

func scanState(r pgx.CollectableRow) (maintenance.TaskState, error) {
	var (
		st                                                             maintenance.TaskState
		class, rank                                                    int32
		lastRun, runningSince, runningUntil, deferredSince, deferredAt *time.Time
		outcome, reason                                                string
		token, deferrals                                               int64
	)
	err := r.Scan(&st.Name, &class, &rank, &lastRun, &outcome, &st.LastError, &st.Running, &runningSince,
		&st.RunningBy, &token, &runningUntil, &deferredSince, &deferredAt, &deferrals, &reason, &st.DeferBlocker)
	st.Class, st.Rank = maintenance.Class(class), maintenance.Rank(rank)
	st.LastRunAt, st.RunningSince, st.RunningUntil = fromTS(lastRun), fromTS(runningSince), fromTS(runningUntil)
	st.DeferredSince, st.DeferredAt = fromTS(deferredSince), fromTS(deferredAt)
	st.LastOutcome, st.RunningToken, st.Deferrals = maintenance.Outcome(outcome), uint64(token), int(deferrals)
	st.DeferReason = maintenance.Reason(reason)
	return st, err
}

// Save inserts or replaces (by Name) each of states, all or none, fenced by token: it
// returns maintenance.ErrStaleToken, writing nothing, when token is below the fence, and
// otherwise raises the fence row to token. A token above math.MaxInt64 or a state that
// maintenance.TaskState.Validate refuses is maintenance.ErrInvalid; a Save that names one
// task twice keeps the later state.
func (s *StateStore) Save(ctx context.Context, token uint64, states ...maintenance.TaskState) error {
	if token > math.MaxInt64 {
		return fmt.Errorf("postgres: StateStore.Save: %w: token must be at most %d, got %d", maintenance.ErrInvalid, int64(math.MaxInt64), token)
	}
	last := make(map[string]int, len(states))
	for i, st := range states {
		if err := st.Validate(); err != nil {
			return fmt.Errorf("postgres: StateStore.Save: states[%d]: %w", i, err)
		}
		last[st.Name] = i
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		fence, err := lockFence(ctx, tx)
		if err != nil {
			return err
		}
		if token < uint64(fence) {
			return fmt.Errorf("%w: token %d below fence %d", maintenance.ErrStaleToken, token, fence)
		}
		b := &pgx.Batch{}
		b.Queue(`UPDATE rota_task_fence SET token = $1`, int64(token))
		for i, st := range states {
			if last[st.Name] == i { // a later state of the same task replaces an earlier one
				queueUpsert(b, st)
			}
		}
		return tx.SendBatch(ctx, b).Close()
	})
	return interpretAs(ctx, "StateStore.Save", maintenance.ErrInvalid, err)
}

// Update reads the fence and the states of names, calls f once with them, and upserts
// the states f returns (a task written twice keeps the later state), raising the fence
// row to the token f returns if that is higher: one transaction under the fence row's
// lock, so no other Save or Update of the schema takes effect in between. Names that are
// not valid names (see Names and times in package maintenance) or that repeat are
// maintenance.ErrInvalid before anything is sent; so are writes that
// maintenance.TaskState.Validate refuses, of a name not given, or a token above
// math.MaxInt64, before they are sent. f's error is returned (wrapped) and nothing is
// written.
//
// Cost: one round trip for the locks, one for the states, one for the writes.
func (s *StateStore) Update(ctx context.Context, names []string, f maintenance.UpdateFunc) error {
	given := make(map[string]bool, len(names))
	for i, n := range names {
		if err := vocab.Name(maintenance.ErrInvalid, fmt.Sprintf("names[%d]", i), n); err != nil {
			return fmt.Errorf("postgres: StateStore.Update: %w", err)
		}
		if given[n] {
			return fmt.Errorf("postgres: StateStore.Update: %w: names[%d] %q repeats", maintenance.ErrInvalid, i, n)
		}
		given[n] = true
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		fence, err := lockFence(ctx, tx)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT `+stateColumns+` FROM rota_task_state WHERE name = ANY($1)`, names)
		if err != nil {
			return err
		}
		found, err := pgx.CollectRows(rows, scanState)
		if err != nil {
			return err
		}
		writes, raise, err := f(uint64(fence), aligned(names, found))
		if err != nil {
			return err
		}
		if err := taskstate.CheckWrites(given, raise, writes); err != nil {
			return err
		}
		b := &pgx.Batch{}
		if raise > uint64(fence) {
			b.Queue(`UPDATE rota_task_fence SET token = $1`, int64(raise))
		}
		for _, st := range writes {
			queueUpsert(b, st)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	return interpretAs(ctx, "StateStore.Update", maintenance.ErrInvalid, err)
}

// aligned returns, for each of names, its state among found, or the zero state with its
// name.
func aligned(names []string, found []maintenance.TaskState) []maintenance.TaskState {
	byName := make(map[string]maintenance.TaskState, len(found))
	for _, st := range found {
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
	return out
}

// lockFence locks the fence row (creating it if needed) and shares the locks of the lease
// rows, so that no grant is made until tx ends, and returns the fence. A client that hangs
// after it holds them for at most txIdleTimeout.
func lockFence(ctx context.Context, tx pgx.Tx) (int64, error) {
	b := &pgx.Batch{}
	b.Queue(sqlIdleTimeout)
	b.Queue(`INSERT INTO rota_task_fence (token) VALUES (0) ON CONFLICT (id) DO NOTHING`)
	b.Queue(`SELECT token FROM rota_task_fence FOR UPDATE`)
	b.Queue(`SELECT coalesce(max(token), 0) FROM (SELECT token FROM rota_leases FOR SHARE) AS l`)
	br := tx.SendBatch(ctx, b)
	var saved, granted int64
	_, err := br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		err = br.QueryRow().Scan(&saved)
	}
	if err == nil {
		err = br.QueryRow().Scan(&granted)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return max(saved, granted), err
}
