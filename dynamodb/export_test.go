package rotadynamo

// What the external tests (package rotadynamo_test) use of the internal ones.
var (
	TestClient = testClient
	TableName  = tableName
	DropTable  = dropTable
)
