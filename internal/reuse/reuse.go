// Package reuse carries duework.Memory's appending read and claim to the dispatcher, which
// reads and claims through them into memory it reuses from cycle to cycle, without either
// package exporting them. duework sets both at init; their types are:
//
//	AppendReady: func(m *duework.Memory, ctx context.Context, heads *[]duework.Head, due *[]duework.Entry, q duework.ReadyQuery) (duework.ReadyPage, error)
//	AppendClaim: func(m *duework.Memory, ctx context.Context, dst []duework.Claim, keys []duework.Key, now, until time.Time) ([]duework.Claim, error)
//
// AppendReady is Ready, appending the page's heads to *heads and their Due entries to *due
// (growing them as append does) and returning a page whose slices are parts of them; what
// they held before is left as it was. AppendClaim is Claim, appending the claims to dst and
// returning the extended slice; dst[:len(dst)] is left as it was.
package reuse

// AppendReady and AppendClaim are duework.Memory's appending read and claim (see the
// package doc for their types).
var AppendReady, AppendClaim any
