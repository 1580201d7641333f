package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rotaworks/rota/maintenance"
)

// A program limit the server hits on oversized input (SQLSTATE class 54, such as 54000 for
// a key too long for its index) is bad input, like a data exception; the server's error
// stays reachable.
func TestInterpretProgramLimit(t *testing.T) {
	for _, code := range []string{"54000", "54001", "22008"} {
		pgErr := &pgconn.PgError{Code: code, Message: "index row size exceeds btree maximum"}
		err := interpretAs(context.Background(), "Lease.Acquire", maintenance.ErrInvalid, pgErr)
		var got *pgconn.PgError
		if !errors.Is(err, maintenance.ErrInvalid) || !errors.As(err, &got) || got.Code != code {
			t.Errorf("SQLSTATE %s: %v, want maintenance.ErrInvalid wrapping the server's error", code, err)
		}
	}
}
