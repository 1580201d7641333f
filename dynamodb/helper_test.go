package rotadynamo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// defaultEndpoint is where the tests find DynamoDB when ROTA_TEST_DYNAMODB_ENDPOINT is not
// set: DynamoDB Local as the repository's .ci/services starts it.
const defaultEndpoint = "http://127.0.0.1:8000"

func endpoint() string {
	if e := os.Getenv("ROTA_TEST_DYNAMODB_ENDPOINT"); e != "" {
		return e
	}
	return defaultEndpoint
}

var (
	clientOnce sync.Once
	client     *dynamodb.Client
	clientErr  error
)

// newClient returns a client of the endpoint, with any credentials and region.
func newClient(ep string) *dynamodb.Client {
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("rota", "rota", ""),
		HTTPClient:  &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(ep) })
}

// testClient returns the client of the test endpoint, which it tries once per process:
// without one answering the test is skipped, with a message that says how to run it,
// except under CI (CI=true), where it fails.
func testClient(tb testing.TB) *dynamodb.Client {
	tb.Helper()
	clientOnce.Do(func() {
		client = newClient(endpoint())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, clientErr = client.ListTables(ctx, &dynamodb.ListTablesInput{Limit: aws.Int32(1)})
	})
	if clientErr == nil {
		return client
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("no DynamoDB at %s: %v (CI=true: the tests must run)", endpoint(), clientErr)
	}
	tb.Skipf("no DynamoDB at %s (%v); to run these tests start DynamoDB Local there (.ci/services does) or set ROTA_TEST_DYNAMODB_ENDPOINT", endpoint(), clientErr)
	return nil
}

// tableName returns a fresh table name.
func tableName(prefix string) string {
	var b [6]byte
	rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// dropTable deletes table when tb ends.
func dropTable(tb testing.TB, c *dynamodb.Client, table string) {
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &table})
	})
}

// openTest opens the stores of a fresh table with buckets over the test client (or over
// wrap of it), dropped when tb ends.
func openTest(tb testing.TB, buckets int, wrap ...func(api) api) *Stores {
	tb.Helper()
	c := testClient(tb)
	table := tableName("rota-test")
	dropTable(tb, c, table)
	var a api = c
	for _, w := range wrap {
		a = w(a)
	}
	st, err := openStores(context.Background(), a, table, StoresConfig{Buckets: buckets})
	if err != nil {
		tb.Fatal(err)
	}
	return st
}

// wipe deletes every item of the stores' table but its own: a test's fresh start on a
// table it keeps. The tests may scan; the stores never do.
func wipe(tb testing.TB, st *Stores) {
	tb.Helper()
	ctx := context.Background()
	d := st.Index.d
	var reqs []types.WriteRequest
	in := &dynamodb.ScanInput{TableName: &d.table, ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("pk, sk")}
	for {
		out, err := testClient(tb).Scan(ctx, in)
		if err != nil {
			tb.Fatal(err)
		}
		for _, m := range out.Items {
			if (&item{m: m}).str(attrPK) == pkMeta {
				continue
			}
			reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: m}})
		}
		if out.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	if err := d.batchWrite(ctx, reqs); err != nil {
		tb.Fatal(err)
	}
}

// freshIndex is a new Index over st's table, emptied first.
func freshIndex(tb testing.TB, st *Stores) *Index {
	wipe(tb, st)
	return &Index{d: st.Index.d, buckets: st.Index.buckets}
}
