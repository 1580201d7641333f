package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rotaworks/rota/duework"
)

var (
	// ErrNotMigrated is returned by every call when the tables it needs do not exist in the
	// pool's schema: run Migrate first.
	ErrNotMigrated = errors.New("postgres: schema not migrated (call Migrate)")
	// ErrSchemaTooNew is returned by Migrate when the database holds migrations newer than
	// this version of the package knows: an older binary must not run against a newer schema.
	ErrSchemaTooNew = errors.New("postgres: database schema is newer than this package")
)

// interpret translates an error from pgx or the server into the core's sentinels, wrapping
// both so that errors.Is finds the sentinel and errors.As still finds the *pgconn.PgError.
// It is the one place where backend errors are mapped:
//
//   - a cancelled or expired ctx (however pgx reports it) wraps ctx.Err();
//   - a data exception (SQLSTATE class 22: a string the server cannot store, a time out of
//     range) or a program limit exceeded (class 54: a key too long for its index) wraps the
//     core's bad-input sentinel (duework.ErrInvalid or maintenance.ErrInvalid);
//   - an undefined table, sequence or function (42P01, 42883) wraps ErrNotMigrated;
//   - anything else is wrapped as it is.
//
// op names the call, e.g. "Index.Claim". The Index's bad-input sentinel is
// duework.ErrInvalid; see interpretAs.
func interpret(ctx context.Context, op string, err error) error {
	return interpretAs(ctx, op, duework.ErrInvalid, err)
}

// interpretAs is interpret with the bad-input sentinel of the caller's core package given
// (maintenance.ErrInvalid for the Lease and the StateStore).
func interpretAs(ctx context.Context, op string, invalid, err error) error {
	if err == nil {
		return nil
	}
	// A cancelled or expired ctx comes back from pgx in several shapes (a query_canceled
	// error from the server, a closed connection, the context's own error); all of them
	// are ctx's error.
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("postgres: %s: %w (%w)", op, cerr, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case len(pgErr.Code) == 5 && (pgErr.Code[:2] == "22" || pgErr.Code[:2] == "54"): // data_exception, program_limit_exceeded
			return fmt.Errorf("postgres: %s: %w: %w", op, invalid, err)
		case pgErr.Code == "42P01" || pgErr.Code == "42883": // undefined_table, undefined_function
			return fmt.Errorf("postgres: %s: %w: %w", op, ErrNotMigrated, err)
		}
	}
	return fmt.Errorf("postgres: %s: %w", op, err)
}
