package postgres

import (
	"context"
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
// Its Run ends when ctx does (the server cancels the vacuum), and returns the error as
// the Index's calls do. A host that keeps two schemas' tasks in one registry renames one:
// names must be unique. An interval of 0 or less makes a task that
// maintenance.ValidateTasks refuses, as any task without a cadence or a Due func.
func (x *Index) QueueVacuumTask(interval time.Duration) maintenance.Task {
	return maintenance.Task{
		Name:    QueueVacuumTaskName,
		Class:   maintenance.OffLease,
		Cadence: interval,
		Run: func(ctx context.Context) error {
			_, err := x.pool.Exec(ctx, `VACUUM (SKIP_LOCKED) rota_users`)
			return interpret(ctx, "Index.QueueVacuumTask", err)
		},
	}
}
