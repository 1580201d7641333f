package rotadynamo

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// OpenStores creates the table with its six indexes, on demand, and opens it again as it
// is; a later OpenStores with another Buckets, the zero one included, is refused, so
// processes that disagree on the buckets never share a table.
func TestOpenStoresCreatesThenChecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testClient(t)
	table := tableName("rota-open")
	dropTable(t, c, table)
	if _, err := OpenStores(ctx, c, table, StoresConfig{Buckets: 4}); err != nil {
		t.Fatal(err)
	}
	out, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
	if err != nil {
		t.Fatal(err)
	}
	d := out.Table
	if d.BillingModeSummary == nil || d.BillingModeSummary.BillingMode != types.BillingModePayPerRequest {
		t.Errorf("billing mode %+v, want on demand", d.BillingModeSummary)
	}
	if len(d.LocalSecondaryIndexes) != 2 || len(d.GlobalSecondaryIndexes) != 4 {
		t.Errorf("%d local and %d global indexes, want 2 and 4", len(d.LocalSecondaryIndexes), len(d.GlobalSecondaryIndexes))
	}
	if _, err := OpenStores(ctx, c, table, StoresConfig{Buckets: 4, LeaseName: "other"}); err != nil {
		t.Errorf("reopening with the same Buckets: %v", err)
	}
	for _, b := range []int{0, 1, 8} {
		_, err := OpenStores(ctx, c, table, StoresConfig{Buckets: b})
		if !errors.Is(err, ErrTableShape) || !strings.Contains(err.Error(), "Buckets 4") {
			t.Errorf("reopening with Buckets %d = %v, want ErrTableShape naming Buckets 4", b, err)
		}
	}
}

// A table that exists with another key or without an index the stores read is refused,
// with every problem named, and left as it is.
func TestOpenStoresRefusesAnotherShape(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testClient(t)
	s := func(v string) *string { return &v }
	for _, tc := range []struct {
		name string
		in   func(table string) *dynamodb.CreateTableInput
		want []string
	}{
		{"other key", func(table string) *dynamodb.CreateTableInput {
			return &dynamodb.CreateTableInput{TableName: s(table), BillingMode: types.BillingModePayPerRequest,
				AttributeDefinitions: []types.AttributeDefinition{{AttributeName: s("id"), AttributeType: types.ScalarAttributeTypeS}},
				KeySchema:            []types.KeySchemaElement{{AttributeName: s("id"), KeyType: types.KeyTypeHash}}}
		}, []string{"its key is not (pk, sk)", "index due is missing", "index tenants is missing"}},
		{"no indexes", func(table string) *dynamodb.CreateTableInput {
			in := createTableInput(table)
			in.LocalSecondaryIndexes, in.GlobalSecondaryIndexes = in.LocalSecondaryIndexes[:1], in.GlobalSecondaryIndexes[1:]
			in.AttributeDefinitions = nil
			for _, a := range []string{attrPK, attrSK, attrLDue, attrDueKey, attrDueSK, attrPausedKey, attrPausedSK, attrTenantsKey, attrTenantsSK} {
				in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: s(a), AttributeType: types.ScalarAttributeTypeS})
			}
			return in
		}, []string{"index claims is missing", "index queue is missing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := tableName("rota-shape")
			dropTable(t, c, table)
			if _, err := c.CreateTable(ctx, tc.in(table)); err != nil {
				t.Fatal(err)
			}
			_, err := OpenStores(ctx, c, table, StoresConfig{})
			if !errors.Is(err, ErrTableShape) {
				t.Fatalf("OpenStores = %v, want ErrTableShape", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("OpenStores = %v, want it to say %q", err, w)
				}
			}
			if out, err := c.Scan(ctx, &dynamodb.ScanInput{TableName: &table}); err != nil || out.Count != 0 {
				t.Errorf("the refused table holds %v items (%v), want none written", out.Count, err)
			}
		})
	}
}

// Processes that start at once on a table that does not exist yet all open it: one
// creates it, the others wait for it, and all share one layout.
func TestOpenStoresConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testClient(t)
	table := tableName("rota-race")
	dropTable(t, c, table)
	const n = 4
	stores := make([]*Stores, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = OpenStores(ctx, c, table, StoresConfig{Buckets: 2}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
	}
	// What one writes, another reads.
	tc := mustTenant(t, "ana")
	e := duework.Entry{UserID: "ana", WorkKey: "jobs", DueAt: time.Unix(1e9, 0)}
	if err := stores[0].Index.Schedule(ctx, tc, e); err != nil {
		t.Fatal(err)
	}
	if got, err := stores[n-1].Index.Get(ctx, tc, "jobs"); err != nil || !got.DueAt.Equal(e.DueAt) {
		t.Fatalf("Get from another process = %+v, %v", got, err)
	}
}

// A config OpenStores refuses names every bad field and sends nothing.
func TestOpenStoresRefusesBadConfig(t *testing.T) {
	ctx := context.Background()
	_, err := OpenStores(ctx, nil, "rota", StoresConfig{})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil client: %v, want ErrInvalidConfig", err)
	}
	unreachable := newClient("http://127.0.0.1:1")
	_, err = OpenStores(ctx, unreachable, "rota", StoresConfig{Buckets: MaxBuckets + 1, LeaseName: " heavy", MaxHold: -time.Second})
	for _, w := range []string{"Buckets must be in [1, 256], got 257", "LeaseName", "MaxHold must not be negative"} {
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), w) {
			t.Errorf("OpenStores = %v, want ErrInvalidConfig naming %q", err, w)
		}
	}
	if _, err := OpenStores(ctx, unreachable, "ab", StoresConfig{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("table name ab: %v, want ErrInvalidConfig", err)
	}
}

// Capacity counts what the stores' calls consumed, reads apart from writes, and a write
// its condition refused at the one unit DynamoDB bills for it.
func TestCapacity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openTest(t, 1)
	base := st.Capacity()
	tc := mustTenant(t, "ana")
	if err := st.Watchlist.Add(ctx, tc, tenancy.WatchlistEntry{UserID: "ana", Slug: "jobs", Tier: "hot"}); err != nil {
		t.Fatal(err)
	}
	afterWrite := st.Capacity()
	if afterWrite.Write <= base.Write || afterWrite.Read != base.Read {
		t.Fatalf("a write moved Capacity from %+v to %+v; want only Write to grow", base, afterWrite)
	}
	if _, err := st.Watchlist.Get(ctx, tc, "jobs"); err != nil {
		t.Fatal(err)
	}
	afterRead := st.Capacity()
	if afterRead.Read != afterWrite.Read+1 || afterRead.Write != afterWrite.Write {
		t.Fatalf("a strongly consistent read of a small item moved Capacity from %+v to %+v; want one read unit", afterWrite, afterRead)
	}
	if err := st.Watchlist.Remove(ctx, tc, "absent"); !errors.Is(err, tenancy.ErrNotFound) {
		t.Fatal(err)
	}
	if got := st.Capacity(); got.Write != afterRead.Write+refusedWriteUnits {
		t.Fatalf("a refused delete moved Write from %v to %v; want %d more", afterRead.Write, got.Write, refusedWriteUnits)
	}
	if _, _, err := st.Lease.Current(ctx, time.Unix(1e9, 0)); err != nil {
		t.Fatal(err)
	}
	if got := st.Capacity(); got.Read <= afterRead.Read {
		t.Fatalf("every store's calls count: Read stayed at %v after the Lease read", got.Read)
	}

}

func mustTenant(t testing.TB, user string) tenancy.Context {
	t.Helper()
	tc, err := tenancy.NewContext(user)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}
