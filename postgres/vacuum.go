package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/rotaworks/rota/maintenance"
)

// QueueVacuumTaskName is the Name of the task QueueVacuumTask returns.
const QueueVacuumTaskName = "rota-queue-vacuum"

// QueueVacuumTask returns a maintenance task that vacuums rota_users every interval, so that
// the dead entries serves leave at the front of each lane's queue are removed even where
// autovacuum comes too rarely (see Operations in the package documentation): register it
// with a maintenance.Scheduler when the server's autovacuum_naptime is longer than the
// time the fleet takes to serve some 10,000 users, or when autovacuum is off.
//
// The task is maintenance.OffLease — a vacuum of rota_users is short and blocks no reader
// or writer — so it never waits for the heavy lease. It runs VACUUM (SKIP_LOCKED), which
// skips the table while another vacuum holds it: every replica may register the task.
// Its Run ends when ctx does (the server cancels the vacuum) and returns errors as the
// Index's calls do. It fails, rather than let the server skip the table with a warning,
// when the pool's role may not vacuum rota_users: run it as the role that ran Migrate
// (the table's owner). A host that keeps two schemas' tasks in one registry renames one,
// as names must be unique. An interval of 0 or less makes a task that
// maintenance.NewScheduler refuses, as any task without a cadence or a Due func.
func (x *Index) QueueVacuumTask(interval time.Duration) maintenance.Task {
	return maintenance.Task{
		Name:    QueueVacuumTaskName,
		Class:   maintenance.OffLease,
		Cadence: interval,
		Run:     x.vacuumQueues,
	}
}

// sqlMayVacuum tells whether the current role may vacuum rota_users: its owner (or a member
// who inherits the owner's privileges), the database's owner, a superuser, or from
// PostgreSQL 17 on a role granted MAINTAIN on it. Anyone else's VACUUM skips the table with
// a warning and succeeds, which would leave the task doing nothing without a word.
const sqlMayVacuum = `
SELECT pg_has_role(c.relowner, 'USAGE')
	OR pg_has_role((SELECT d.datdba FROM pg_database d WHERE d.datname = current_database()), 'USAGE')
	OR (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user)
	OR CASE WHEN current_setting('server_version_num')::int >= 170000
		THEN has_table_privilege(c.oid, 'MAINTAIN') ELSE false END
FROM pg_class c WHERE c.oid = 'rota_users'::regclass`

// vacuumQueues is the queue vacuum task's Run. VACUUM cannot run in a transaction, so the
// permission check and the vacuum are two round trips.
func (x *Index) vacuumQueues(ctx context.Context) error {
	const op = "Index.QueueVacuumTask"
	var may bool
	if err := x.pool.QueryRow(ctx, sqlMayVacuum).Scan(&may); err != nil {
		return interpret(ctx, op, err)
	}
	if !may {
		return fmt.Errorf("postgres: %s: the role may not vacuum rota_users: run the task as the table's owner, the database's owner or a superuser", op)
	}
	_, err := x.pool.Exec(ctx, `VACUUM (SKIP_LOCKED) rota_users`)
	return interpret(ctx, op, err)
}
