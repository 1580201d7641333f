package duework

// WIP on branch v2: the v2 methods of Memory, being rewritten. Never lands.

import (
	"context"
	"errors"
	"time"
)

var errWIP = errors.New("duework: Memory v2 not written yet")

func (m *Memory) CompleteMany(ctx context.Context, done []Done) ([]error, error) {
	return nil, errWIP
}
func (m *Memory) Ready(ctx context.Context, q ReadyQuery) (ReadyPage, error) {
	return ReadyPage{}, errWIP
}
func (m *Memory) Route(ctx context.Context, routes []Route) error              { return errWIP }
func (m *Memory) Groups(ctx context.Context, now time.Time) ([]string, error) { return nil, errWIP }
func (m *Memory) Release(ctx context.Context, userIDs []string, heldUntil time.Time) error {
	return errWIP
}
