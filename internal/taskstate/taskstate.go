// Package taskstate holds the checks the maintenance StateStore adapters share.
package taskstate

import (
	"fmt"
	"math"

	"github.com/rotaworks/rota/maintenance"
)

// CheckWrites checks what an UpdateFunc given the task names in given returned: raise at
// most math.MaxInt64, every write of a given task and valid. The error wraps
// maintenance.ErrInvalid and names the write.
func CheckWrites(given map[string]bool, raise uint64, writes []maintenance.TaskState) error {
	if raise > math.MaxInt64 {
		return fmt.Errorf("%w: raise must be at most %d, got %d", maintenance.ErrInvalid, int64(math.MaxInt64), raise)
	}
	for i, st := range writes {
		if !given[st.Name] {
			return fmt.Errorf("%w: writes[%d] is of task %q, which the update was not given", maintenance.ErrInvalid, i, st.Name)
		}
		if err := st.Validate(); err != nil {
			return fmt.Errorf("writes[%d]: %w", i, err)
		}
	}
	return nil
}
