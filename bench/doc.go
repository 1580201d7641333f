// Package bench holds rota's side-by-side benchmarks against the peers a user would
// otherwise pick. It is a nested module so that the core never depends on them.
package bench
