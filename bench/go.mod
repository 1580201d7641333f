module github.com/rotaworks/rota/bench

go 1.25.0

require (
	github.com/jackc/pgx/v5 v5.13.0
	github.com/riverqueue/river v0.44.1
	github.com/riverqueue/river/riverdriver/riverpgxv5 v0.44.1
	github.com/rotaworks/rota v0.2.0
	github.com/rotaworks/rota/postgres v0.2.0
	k8s.io/client-go v0.35.10
	k8s.io/utils v0.0.0-20251002143259-bc988d571ff4
)

require (
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/riverqueue/river/riverdriver v0.44.1 // indirect
	github.com/riverqueue/river/rivershared v0.44.1 // indirect
	github.com/riverqueue/river/rivertype v0.44.1 // indirect
	github.com/tidwall/gjson v1.19.0 // indirect
	github.com/tidwall/match v1.2.0 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	golang.org/x/time v0.9.0 // indirect
	k8s.io/apimachinery v0.35.10 // indirect
	k8s.io/klog/v2 v2.130.1 // indirect
)
