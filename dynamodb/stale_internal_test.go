package rotadynamo

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// staleGSI is a client that answers queries of the global secondary indexes from an older
// snapshot of them, as DynamoDB may (its global indexes are eventually consistent, and no
// emulator lags them): it copies every global index (with a Scan, as a test may) on the
// first query and again after every `every` queries, and answers each query from the copy
// it holds, filtered, sorted and paged as DynamoDB would. Everything else passes through.
type staleGSI struct {
	api
	table string
	every int

	mu      sync.Mutex
	queries int
	snap    map[string][]map[string]av // by index name
}

// globalIndexes are the global secondary indexes the snapshot copies.
var globalIndexes = map[string][2]string{
	idxQueue:    {attrQueueKey, attrQueueSK},
	idxDueUsers: {attrDueKey, attrDueSK},
	idxPaused:   {attrPausedKey, attrPausedSK},
	idxTenants:  {attrTenantsKey, attrTenantsSK},
}

func (s *staleGSI) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	keys, ok := globalIndexes[deref0(in.IndexName)]
	if !ok {
		return s.api.Query(ctx, in, opts...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap == nil || s.queries%s.every == 0 {
		if err := s.refresh(ctx); err != nil {
			return nil, err
		}
	}
	s.queries++
	return answer(s.snap[*in.IndexName], keys[0], keys[1], in)
}

// refresh copies every global index.
func (s *staleGSI) refresh(ctx context.Context) error {
	scanner := s.api.(interface {
		Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	})
	snap := map[string][]map[string]av{}
	for name := range globalIndexes {
		in := &dynamodb.ScanInput{TableName: &s.table, IndexName: &name}
		for {
			out, err := scanner.Scan(ctx, in)
			if err != nil {
				return err
			}
			snap[name] = append(snap[name], out.Items...)
			if out.LastEvaluatedKey == nil {
				break
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
	}
	s.snap = snap
	return nil
}

// keyCondition is the shape of every key condition the stores send to a global index:
// the partition key, and optionally one comparison of the sort key.
var keyCondition = regexp.MustCompile(`^(#\d+) = (:\d+)(?: AND (#\d+) (<|>) (:\d+))?$`)

// answer evaluates query in over items, an index's copy keyed (hash, rng).
func answer(items []map[string]av, hash, rng string, in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
	m := keyCondition.FindStringSubmatch(deref0(in.KeyConditionExpression))
	if m == nil {
		return nil, fmt.Errorf("staleGSI: a key condition it does not read: %q", deref0(in.KeyConditionExpression))
	}
	str := func(x av) string { return (&item{m: map[string]av{"x": x}}).str("x") }
	want := str(in.ExpressionAttributeValues[m[2]])
	var got []map[string]av
	for _, it := range items {
		if str(it[hash]) != want {
			continue
		}
		if m[3] != "" {
			r, bound := str(it[rng]), str(in.ExpressionAttributeValues[m[5]])
			if m[4] == "<" && r >= bound || m[4] == ">" && r <= bound {
				continue
			}
		}
		got = append(got, it)
	}
	order := func(a, b map[string]av) int {
		return cmp.Or(strings.Compare(str(a[rng]), str(b[rng])), strings.Compare(str(a[attrPK]), str(b[attrPK])),
			strings.Compare(str(a[attrSK]), str(b[attrSK])))
	}
	slices.SortFunc(got, order)
	if start := in.ExclusiveStartKey; start != nil {
		got = slices.DeleteFunc(got, func(it map[string]av) bool { return order(it, start) <= 0 })
	}
	out := &dynamodb.QueryOutput{ConsumedCapacity: &types.ConsumedCapacity{CapacityUnits: ptr(0.5)}}
	if in.Limit != nil && len(got) > int(*in.Limit) {
		got = got[:*in.Limit]
		last := got[len(got)-1]
		out.LastEvaluatedKey = map[string]av{hash: last[hash], rng: last[rng], attrPK: last[attrPK], attrSK: last[attrSK]}
	}
	out.Items, out.Count = got, int32(len(got))
	return out, nil
}
