package rotadynamo

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rotaworks/rota/internal/vocab"
)

// The table's key attributes and the keys of its items. Every item has a partition key
// (attrPK) and a sort key (attrSK), both strings. A tenant's items share the partition
// key userPK(user): its user item, its entries, its watch list and its plan, so a
// tenant-scoped call reads and writes one partition only.
const (
	attrPK = "pk"
	attrSK = "sk"

	skUser = "U"  // a user's item: group, limits, turn, hold, pause, counts
	skPlan = "P"  // a tenant's plan
	skMeta = "#m" // the table's own item, under pkMeta
	pkMeta = "#meta"
	// pkGroups holds one item, under skGroups, whose string set names every group a user
	// was ever routed to: Groups reads it, and then each group's queues.
	pkGroups = "#groups"
	skGroups = "#g"
	// pkTasks holds the maintenance StateStore: its fence item and one item per task.
	pkTasks = "#tasks"
	skFence = "#fence"
)

// The indexes. Their key attributes are strings, present only on the items an index
// holds: every index is sparse.
const (
	// idxDue, a local secondary index: a user's entries by (DueAt, WorkKey).
	idxDue   = "due"
	attrLDue = "ld"
	// idxClaims, a local secondary index: a user's claimed entries by (Until, WorkKey).
	idxClaims  = "claims"
	attrLClaim = "lc"
	// idxQueue, a global secondary index: each group's turn queues, one per bucket, users
	// with entries by (Turn, UserID).
	idxQueue     = "queue"
	attrQueueKey = "qk"
	attrQueueSK  = "qs"
	// idxDueUsers, a global secondary index: users with entries by (earliest DueAt,
	// UserID), one queue per bucket, for DueBefore.
	idxDueUsers = "dueusers"
	attrDueKey  = "dk"
	attrDueSK   = "ds"
	// idxPaused, a global secondary index: paused users by UserID, one list per bucket.
	idxPaused     = "paused"
	attrPausedKey = "pq"
	attrPausedSK  = "ps"
	// idxTenants, a global secondary index: watch-list entries by (UserID, Slug), one
	// list per bucket, for Watchlist.Tenants.
	idxTenants     = "tenants"
	attrTenantsKey = "tq"
	attrTenantsSK  = "ts"
)

func userPK(user string) string     { return "U#" + user }
func entrySK(workKey string) string { return "E#" + workKey }
func watchSK(slug string) string    { return "W#" + slug }
func leasePK(name string) string    { return "L#" + name }
func taskSK(name string) string     { return "T#" + name }

// userOf returns the user ID of a partition key made by userPK.
func userOf(pk string) string { return pk[len("U#"):] }

// The prefixes of the sort keys of a user's entries and watch-list entries, and the
// string just after every key with that prefix ("#" + 1 is "$").
const (
	entryPrefix = "E#"
	entryEnd    = "E$"
	watchPrefix = "W#"
	watchEnd    = "W$"
)

// bucketOf returns the bucket, in [0, buckets), of user: FNV-1a of its ID. Every process
// sharing a table computes the same.
func bucketOf(user string, buckets int) int {
	h := fnv.New32a()
	h.Write([]byte(user))
	return int(h.Sum32() % uint32(buckets))
}

// queueKey is the partition key of one bucket of a group's turn queue.
func queueKey(group string, bucket int) string {
	return "Q#" + strconv.Itoa(bucket) + "#" + group
}

func dueKey(bucket int) string     { return "D#" + strconv.Itoa(bucket) }
func pausedKey(bucket int) string  { return "P#" + strconv.Itoa(bucket) }
func tenantsKey(bucket int) string { return "T#" + strconv.Itoa(bucket) }

// tenantsSK orders watch-list entries by user, then slug: "\x01" sorts before every
// character a valid name may hold, so a user's entries come before those of any user
// whose ID it prefixes.
func tenantsSK(user, slug string) string { return user + "\x01" + slug }

// tenantsAfter is the least tenants sort key of any user after user.
func tenantsAfter(user string) string { return user + "\x02" }

// Times are stored as timeLen decimal digits: nanoseconds since the zero time (January 1
// of year 1, UTC), seconds first. The encoding is exact over years 1 to 9999 and sorts as
// the times do, so index sort keys that begin with one order by it.
const timeLen = 21

var minUnix = vocab.MinTime.Unix()

// encTime encodes t, which must not be before the zero time nor more than a year after
// the last instant of year 9999.
func encTime(t time.Time) string {
	b := make([]byte, 0, timeLen)
	return string(appendTime(b, t))
}

func appendTime(b []byte, t time.Time) []byte {
	sec := t.Unix() - minUnix
	b = appendPadded(b, uint64(sec), 12)
	return appendPadded(b, uint64(t.Nanosecond()), 9)
}

func appendPadded(b []byte, v uint64, width int) []byte {
	var d [20]byte
	s := strconv.AppendUint(d[:0], v, 10)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

// decTime decodes the first timeLen bytes of s, as encTime wrote them.
func decTime(s string) (time.Time, error) {
	if len(s) < timeLen {
		return time.Time{}, fmt.Errorf("rotadynamo: stored time %q is too short", s)
	}
	sec, err1 := strconv.ParseInt(s[:12], 10, 64)
	nsec, err2 := strconv.ParseInt(s[12:timeLen], 10, 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, fmt.Errorf("rotadynamo: stored time %q is not %d digits", s, timeLen)
	}
	return time.Unix(sec+minUnix, nsec).UTC(), nil
}

// after1 returns the encoding of t plus one nanosecond: a sort key that begins with
// encTime(x) is below it exactly when x is not after t.
func after1(t time.Time) string { return encTime(t.Add(1)) }

// timeKey returns encTime(t) + "#" + rest: a sort key ordered by t, then rest bytewise.
func timeKey(t time.Time, rest string) string {
	b := make([]byte, 0, timeLen+1+len(rest))
	b = appendTime(b, t)
	b = append(b, '#')
	return string(append(b, rest...))
}

// restOf returns what follows the time and "#" of a key made by timeKey.
func restOf(key string) string {
	if len(key) <= timeLen {
		return ""
	}
	return key[timeLen+1:]
}

// Attribute values.

type av = types.AttributeValue

func sv(s string) av { return &types.AttributeValueMemberS{Value: s} }

func nv(n int64) av { return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)} }

func uv(n uint64) av { return &types.AttributeValueMemberN{Value: strconv.FormatUint(n, 10)} }

func tv(t time.Time) av { return sv(encTime(t)) }

// key returns the key of the item (pk, sk).
func key(pk, sk string) map[string]av {
	return map[string]av{attrPK: sv(pk), attrSK: sv(sk)}
}

// item is a read item's attributes, with typed getters that report what is missing or
// malformed once, through err.
type item struct {
	m   map[string]av
	err error
}

func (it *item) has(name string) bool { _, ok := it.m[name]; return ok }

func (it *item) str(name string) string {
	if s, ok := it.m[name].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func (it *item) int(name string) int64 {
	v, ok := it.m[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil && it.err == nil {
		it.err = fmt.Errorf("rotadynamo: attribute %s: %w", name, err)
	}
	return n
}

func (it *item) uint(name string) uint64 {
	v, ok := it.m[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	n, err := strconv.ParseUint(v.Value, 10, 64)
	if err != nil && it.err == nil {
		it.err = fmt.Errorf("rotadynamo: attribute %s: %w", name, err)
	}
	return n
}

// time returns the time stored under name, or the zero time when there is none.
func (it *item) time(name string) time.Time {
	s := it.str(name)
	if s == "" {
		return time.Time{}
	}
	t, err := decTime(s)
	if err != nil && it.err == nil {
		it.err = fmt.Errorf("rotadynamo: attribute %s: %w", name, err)
	}
	return t
}

func (it *item) bool(name string) bool {
	b, ok := it.m[name].(*types.AttributeValueMemberBOOL)
	return ok && b.Value
}

func bv(b bool) av { return &types.AttributeValueMemberBOOL{Value: b} }
