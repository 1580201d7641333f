module github.com/rotaworks/rota/lambda

go 1.25.0

require (
	github.com/aws/aws-lambda-go v1.54.0
	github.com/rotaworks/rota v0.2.0
)
